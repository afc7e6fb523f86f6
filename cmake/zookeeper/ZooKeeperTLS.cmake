# The single-threaded ZooKeeper C client compiled with OpenSSL, for
# zkelect-tls (cmake -DZKELECT_TLS=ON; docs/operations.md "TLS to
# ZooKeeper"). Debian's libzookeeper-st is built without it. The source is
# Debian's own of the same package (scripts/zksource.sh fetches it; the
# SHA-256 sums are pinned here and there), with Debian's patches, then
# cmake/zookeeper/zkelect-tls.patch. The jute serializers Debian generates
# through Maven come from the jute compiler of the installed
# libzookeeper-java. Extracted and patched at configure time into
# <build>/zookeeper-tls (again only when the source or the patch changed).
# Defines zke_zk_tls: the static library, its headers (as
# <zookeeper/zookeeper.h>), HAVE_OPENSSL_H and OpenSSL.
set(_zkt_orig zookeeper_3.8.0.orig.tar.gz)
set(_zkt_orig_sha256 b0c5684640bea2d8bd6610b47ff41be2aefd6c910ba48fcad5949bd2bf2fa1ac)
set(_zkt_debian zookeeper_3.8.0-11+deb12u2.debian.tar.xz)
set(_zkt_debian_sha256 c2fca81a9bf80b6bf93cdb78366a60e1d9e561fd664c85db7cddc21d200c9540)
if(DEFINED ENV{ZKELECT_CACHE})
  set(_zkt_cache "$ENV{ZKELECT_CACHE}")
elseif(DEFINED ENV{XDG_CACHE_HOME})
  set(_zkt_cache "$ENV{XDG_CACHE_HOME}/zkelect")
else()
  set(_zkt_cache "$ENV{HOME}/.cache/zkelect")
endif()
set(ZKELECT_ZK_SOURCE "${_zkt_cache}/zookeeper-source" CACHE PATH
    "Debian's zookeeper source files (scripts/zksource.sh DIR fetches them)")
foreach(_f orig debian)
  set(_p "${ZKELECT_ZK_SOURCE}/${_zkt_${_f}}")
  if(NOT EXISTS "${_p}")
    message(FATAL_ERROR "ZKELECT_TLS: ${_p} is missing: run scripts/zksource.sh "
            "(scripts/setup.sh --dev does), or set ZKELECT_ZK_SOURCE")
  endif()
  file(SHA256 "${_p}" _sum)
  if(NOT _sum STREQUAL _zkt_${_f}_sha256)
    message(FATAL_ERROR "ZKELECT_TLS: ${_p} does not have the pinned SHA-256 sum")
  endif()
endforeach()

find_package(OpenSSL REQUIRED)
find_package(Java REQUIRED COMPONENTS Runtime)
find_file(ZKELECT_JUTE_JAR zookeeper-jute.jar PATHS /usr/share/java REQUIRED NO_DEFAULT_PATH)
find_program(ZKELECT_PATCH patch REQUIRED)

set(_zkt_root ${CMAKE_BINARY_DIR}/zookeeper-tls)
set(_zkt_top ${_zkt_root}/apache-zookeeper-3.8.0)
set(_zkt_c ${_zkt_top}/zookeeper-client/zookeeper-client-c)
set(_zkt_patch ${CMAKE_CURRENT_LIST_DIR}/zkelect-tls.patch)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_zkt_patch})
file(SHA256 ${_zkt_patch} _zkt_patch_sum)
set(_zkt_stamp "${_zkt_orig_sha256} ${_zkt_debian_sha256} ${_zkt_patch_sum}")
set(_zkt_old "")
if(EXISTS ${_zkt_root}/stamp)
  file(READ ${_zkt_root}/stamp _zkt_old)
endif()
if(NOT _zkt_old STREQUAL _zkt_stamp)
  message(STATUS "ZKELECT_TLS: extracting and patching Debian's zookeeper source")
  file(REMOVE_RECURSE ${_zkt_root})
  file(MAKE_DIRECTORY ${_zkt_root})
  file(ARCHIVE_EXTRACT INPUT "${ZKELECT_ZK_SOURCE}/${_zkt_orig}" DESTINATION ${_zkt_root})
  file(ARCHIVE_EXTRACT INPUT "${ZKELECT_ZK_SOURCE}/${_zkt_debian}" DESTINATION ${_zkt_top})
  file(STRINGS ${_zkt_top}/debian/patches/series _zkt_series REGEX "^[^#]")
  foreach(_p IN LISTS _zkt_series ITEMS ${_zkt_patch})
    if(NOT IS_ABSOLUTE "${_p}")
      set(_p ${_zkt_top}/debian/patches/${_p})
    endif()
    execute_process(COMMAND ${ZKELECT_PATCH} -p1 -s -N --no-backup-if-mismatch -i ${_p}
                    WORKING_DIRECTORY ${_zkt_top} RESULT_VARIABLE _r OUTPUT_VARIABLE _o ERROR_VARIABLE _o)
    if(NOT _r EQUAL 0)
      message(FATAL_ERROR "ZKELECT_TLS: ${_p} does not apply:\n${_o}")
    endif()
  endforeach()
  file(MAKE_DIRECTORY ${_zkt_c}/generated)
  execute_process(COMMAND ${Java_JAVA_EXECUTABLE} -cp ${ZKELECT_JUTE_JAR}
                          org.apache.jute.compiler.generated.Rcc -l c
                          ${_zkt_top}/zookeeper-jute/src/main/resources/zookeeper.jute
                  WORKING_DIRECTORY ${_zkt_c}/generated RESULT_VARIABLE _r OUTPUT_QUIET ERROR_VARIABLE _o)
  if(NOT _r EQUAL 0 OR NOT EXISTS ${_zkt_c}/generated/zookeeper.jute.c)
    message(FATAL_ERROR "ZKELECT_TLS: the jute compiler failed:\n${_o}")
  endif()
  # the headers as users include them: <zookeeper/zookeeper.h>
  file(GLOB _zkt_headers ${_zkt_c}/include/*.h)
  file(COPY ${_zkt_headers} ${_zkt_c}/generated/zookeeper.jute.h DESTINATION ${_zkt_root}/include/zookeeper)
  file(WRITE ${_zkt_root}/stamp "${_zkt_stamp}")
endif()

add_library(zookeeper_st_tls STATIC
  ${_zkt_c}/src/zookeeper.c ${_zkt_c}/src/recordio.c ${_zkt_c}/generated/zookeeper.jute.c
  ${_zkt_c}/src/zk_log.c ${_zkt_c}/src/zk_hashtable.c ${_zkt_c}/src/addrvec.c ${_zkt_c}/src/st_adaptor.c
  ${_zkt_c}/src/hashtable/hashtable.c ${_zkt_c}/src/hashtable/hashtable_itr.c)
# ZooKeeper's code, not ours: its own flags (no -Werror/-Wpedantic), what
# its configure finds on Debian. Under ZKELECT_SANITIZE, AddressSanitizer
# too (the patch's code is checked where integration.tls runs it; not UBSan,
# which would judge ZooKeeper's own code)
set(_zkt_opts -w)
if(ZKELECT_SANITIZE)
  list(APPEND _zkt_opts -fsanitize=address -fno-omit-frame-pointer)
endif()
set_target_properties(zookeeper_st_tls PROPERTIES COMPILE_OPTIONS "${_zkt_opts}" C_EXTENSIONS ON
  POSITION_INDEPENDENT_CODE ON EXPORT_COMPILE_COMMANDS OFF)
file(WRITE ${_zkt_root}/config.new/config.h "/* what its configure finds on Debian 12 */\n"
  "#define HAVE_OPENSSL_H 1\n#define HAVE_SYS_TIME_H 1\n#define HAVE_SYS_SOCKET_H 1\n"
  "#define HAVE_POLL 1\n#define HAVE_NETINET_IN_H 1\n#define HAVE_ARPA_INET_H 1\n"
  "#define HAVE_NETDB_H 1\n#define HAVE_UNISTD_H 1\n#define HAVE_SYS_UTSNAME_H 1\n"
  "#define HAVE_GETPWUID_R 1\n#define HAVE_GETUID 1\n#define HAVE_GETHOSTNAME 1\n"
  "#define HAVE_GETLOGIN 1\n#define HAVE_GETCWD 1\n#define ZOO_IPV6_ENABLED 1\n"
  "#define PACKAGE_STRING \"zookeeper C client 3.8.0\"\n#define VERSION \"3.8.0\"\n")
configure_file(${_zkt_root}/config.new/config.h ${_zkt_root}/config/config.h COPYONLY)
target_compile_definitions(zookeeper_st_tls PRIVATE HAVE_OPENSSL_H _GNU_SOURCE)
target_include_directories(zookeeper_st_tls PRIVATE ${_zkt_root}/config ${_zkt_c}/include
  ${_zkt_c}/generated ${_zkt_c}/src)
target_link_libraries(zookeeper_st_tls PUBLIC OpenSSL::SSL OpenSSL::Crypto m)

add_library(zke_zk_tls INTERFACE)
target_include_directories(zke_zk_tls BEFORE INTERFACE ${_zkt_root}/include)
target_compile_definitions(zke_zk_tls INTERFACE HAVE_OPENSSL_H)
target_link_libraries(zke_zk_tls INTERFACE zookeeper_st_tls)
