-- zkelect.spawn / zkelect.exec need the host's consent (script_opts.allow_processes)
function on_follower(ev)
  local p, msg, code = zkelect.spawn{ "/bin/true" }
  local ok, emsg, ecode = zkelect.exec{ "/bin/true" }
  zkelect.log("info", string.format("spawn=%s %s %s exec=%s %s %s", tostring(p), tostring(msg),
                                    tostring(code), tostring(ok), tostring(emsg), tostring(ecode)))
end
