-- Test policy (tests/integration/test_http.py): hooks that take a little
-- time, so the status endpoint has hook statistics to show.
function on_leader(ev)
  zkelect.sleep(0.02)
  zkelect.log("info", "leading epoch=" .. tostring(ev.epoch))
end

function on_follower(ev)
  zkelect.log("info", "following leader=" .. tostring(ev.leader))
end

function on_stepdown(ev)
  zkelect.log("info", "stepdown reason=" .. tostring(ev.reason))
end
