-- the candidate's identity from the top level on (script_opts.id/.path)
top_id, top_path = zkelect.id, zkelect.path
local st = zkelect.status()
top_status_id, top_status_path = st.id, st.path
-- a reader's status: the same table; a view that is no boolean, or an
-- argument that is no table, is the caller's mistake
local v = zkelect.status{view = true}
assert(v.id == st.id and v.path == st.path and v.role == st.role)
assert(zkelect.status{}.id == st.id and zkelect.status(nil).id == st.id)
local ok, err = pcall(zkelect.status, {view = 1})
assert(not ok and err:find("view must be a boolean, got number", 1, true), err)
ok, err = pcall(zkelect.status, "view")
assert(not ok and err:find("table expected, got string", 1, true), err)
function health()
  zkelect.log("info", string.format("health id=%s path=%s status.id=%s", tostring(zkelect.id),
    tostring(zkelect.path), tostring(zkelect.status().id)))
  return true
end
function on_follower(ev)
  zkelect.log("info", string.format("top id=%s path=%s status.id=%s status.path=%s other=%s",
    tostring(top_id), tostring(top_path), tostring(top_status_id), tostring(top_status_path),
    tostring(zkelect.no_such_field)))
end
