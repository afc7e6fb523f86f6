-- Test policy (tests/integration/test_guarded_write.py, the read case):
-- each leader reads /rm/value (zkelect.zk.get). "a" sets it with the
-- version it read (a guarded, versioned set). "b" reads what a wrote,
-- waits (bounded) until another writer changed the node, then sets it
-- with the version it read first: ZooKeeper refuses that (EBADVERSION).
-- "b" also reads a node that does not exist (ENONODE), the election
-- folder (allowed), and a path outside the allow-list (raises).
local function note(fmt, ...)
  zkelect.log("info", string.format(fmt, ...))
end

function on_leader(ev)
  local data, v, code = zkelect.zk.get("/rm/value")
  note("read id=%s data=%s version=%s code=%s", ev.id, tostring(data), tostring(v), tostring(code))
  if ev.id == "a" then
    local nv, msg, c = zkelect.zk.set("/rm/value", "a@" .. ev.epoch, { version = v })
    note("set id=%s version=%s code=%s msg=%s", ev.id, tostring(nv), tostring(c), tostring(msg))
    return
  end
  local t0 = zkelect.clock()
  local v2 = v
  while v2 == v and zkelect.clock() - t0 < 5 do
    zkelect.sleep(0.05)
    _, v2 = zkelect.zk.get("/rm/value")
  end
  local r, msg, c = zkelect.zk.set("/rm/value", "b@" .. ev.epoch, { version = v })
  note("stale_set r=%s code=%s now=%s msg=%s", tostring(r), tostring(c), tostring(v2), tostring(msg))
  local _, _, c3 = zkelect.zk.get("/rm/missing")
  local _, v4 = zkelect.zk.get(ev.path)
  local ok5, e5 = pcall(zkelect.zk.get, "/elsewhere")
  local ok6, e6 = pcall(zkelect.zk.get, ev.path .. "/" .. ev.node)
  note("reads missing=%s folder=%s raised=%s %s: %s | %s", tostring(c3), tostring(v4),
       tostring(not ok5), tostring(not ok6), tostring(e5), tostring(e6))
end
