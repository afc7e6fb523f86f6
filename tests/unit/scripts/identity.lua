-- the candidate's identity from the top level on (script_opts.id/.path)
top_id, top_path = zkelect.id, zkelect.path
local st = zkelect.status()
top_status_id, top_status_path = st.id, st.path
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
