-- Test policy (tests/integration/test_hook_error.py): hooks that raise.
-- The test finds the line numbers of the two error() calls by their markers.

function on_follower(ev)
  local where = ev.node
  error("boom-follower " .. tostring(where)) -- MARK:follower
end

function on_leader(ev)
  error("boom") -- MARK:leader
end
