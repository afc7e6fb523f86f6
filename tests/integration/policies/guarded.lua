-- Test policy (tests/integration/test_guarded_write.py): each leader writes
-- its id and epoch to /gw/value with a guarded write (zkelect.zk.set); the
-- candidate "a" waits 0.6 s first (the test holds its connection silent by
-- then). on_stepdown tries one more write, which its ended term refuses.
-- "b" also tries a multi whose second op fails (nothing applied, the op's
-- index returned), paths the allow-list refuses and writes past the bounds
-- (a NUL in a path, more than 512 KiB of paths and data: they raise).
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
  if ev.id == "b" then
    local r, m, c, op = zkelect.zk.multi{
      { op = "create", path = "/gw/m1", data = "x" },
      { op = "check", path = "/gw/missing" },
    }
    note("multi r=%s code=%s op=%s", tostring(r), tostring(c), tostring(op))
    local ok1, e1 = pcall(zkelect.zk.set, "/elsewhere", "x")
    local ok2, e2 = pcall(zkelect.zk.delete, ev.path .. "/" .. ev.node)
    local ok3, e3 = pcall(zkelect.zk.create, "/gw/../x", "x")
    note("raised %s %s %s: %s | %s | %s", tostring(not ok1), tostring(not ok2), tostring(not ok3),
         tostring(e1), tostring(e2), tostring(e3))
    local big = string.rep("x", 300 * 1024)
    local ok4, e4 = pcall(zkelect.zk.multi, { { op = "create", path = "/gw/big1", data = big },
                                              { op = "create", path = "/gw/big2", data = big } })
    local ok5, e5 = pcall(zkelect.zk.create, "/gw/nul\0/../../zookeeper", "x")
    note("bounded %s %s: %s | %s", tostring(not ok4), tostring(not ok5), tostring(e4), tostring(e5))
  end
end

function on_stepdown(ev)
  local v, msg, code = zkelect.zk.set("/gw/value", "from-stepdown")
  note("stepdown_write id=%s ok=%s code=%s msg=%s", ev.id, tostring(v), tostring(code),
       tostring(msg))
end
