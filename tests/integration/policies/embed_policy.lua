-- Test policy (tests/integration/test_embed.py, examples/embed/embed_policy):
-- a leader hook that runs a process and reads zkelect.status(), and an
-- on_stepdown that waits before its "undo_done" line.
function on_leader(ev)
  local ok, code, out = zkelect.exec({ "echo", "duty-" .. ev.epoch })
  assert(ok, "echo failed: " .. tostring(code))
  local st = zkelect.status()
  zkelect.log("info", "leading epoch=" .. ev.epoch .. " exec=" .. out:gsub("%s+$", "")
    .. " role=" .. tostring(st.role))
end

function on_follower(ev)
  zkelect.log("info", "following leader=" .. tostring(ev.leader))
end

function on_stepdown(ev)
  zkelect.sleep(0.1)
  zkelect.log("info", "undo_done epoch=" .. ev.epoch)
end
