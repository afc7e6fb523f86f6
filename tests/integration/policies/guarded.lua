-- Test policy (tests/integration/test_guarded_write.py): each leader writes
-- its id and epoch to /gw/value with a guarded write (zkelect.zk.set); the
-- candidate "a" waits 0.6 s first (the test holds its connection silent by
-- then). on_stepdown tries one more write, which its ended term refuses.
local function note(fmt, ...)
  zkelect.log("info", string.format(fmt, ...))
end

function on_leader(ev)
  note("ready id=%s epoch=%d", ev.id, ev.epoch)
  if ev.id == "a" then
    zkelect.sleep(0.6)
  end
  note("writing id=%s", ev.id)
  local v, msg, code = zkelect.zk.set("/gw/value", ev.id .. "@" .. ev.epoch)
  if v then
    note("write_ok id=%s version=%d", ev.id, v)
  else
    note("write_refused id=%s code=%s msg=%s", ev.id, code, msg)
  end
end

function on_stepdown(ev)
  local v, msg, code = zkelect.zk.set("/gw/value", "from-stepdown")
  note("stepdown_write id=%s ok=%s code=%s msg=%s", ev.id, tostring(v), tostring(code),
       tostring(msg))
end
