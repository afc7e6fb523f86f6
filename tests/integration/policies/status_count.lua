-- Test policy (tests/integration/test_hardening.py): the leader logs what
-- zkelect.status() says of the election's size, every 0.2 s of its term.
function on_leader(ev)
  zkelect.log("info", "on_leader candidates=" .. tostring(ev.candidates))
  zkelect.every(0.2, function()
    zkelect.log("info", "status candidates=" .. tostring(zkelect.status().candidates))
  end)
end
