# FindZooKeeperST: the single-threaded ZooKeeper C client (libzookeeper-st-dev).
# Defines ZooKeeperST::ZooKeeperST. Never compile its users with -DTHREADED.
find_path(ZOOKEEPER_INCLUDE_DIR zookeeper/zookeeper.h)
find_library(ZOOKEEPER_ST_LIBRARY NAMES zookeeper_st)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(ZooKeeperST REQUIRED_VARS ZOOKEEPER_ST_LIBRARY ZOOKEEPER_INCLUDE_DIR)
if(ZooKeeperST_FOUND AND NOT TARGET ZooKeeperST::ZooKeeperST)
  add_library(ZooKeeperST::ZooKeeperST UNKNOWN IMPORTED)
  set_target_properties(ZooKeeperST::ZooKeeperST PROPERTIES
    IMPORTED_LOCATION "${ZOOKEEPER_ST_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${ZOOKEEPER_INCLUDE_DIR}")
endif()
