-- Test policy (tests/integration/test_hooks.py): the first time this
-- candidate leads it resigns, from inside on_leader; later terms are kept.

resigned = false

function on_leader(ev)
  zkelect.log("info", "hook=on_leader node=" .. tostring(ev.node) .. " epoch=" .. tostring(ev.epoch))
  if not resigned then
    resigned = true
    local ok, err = pcall(zkelect.resign)
    zkelect.log("info", "resign_called ok=" .. tostring(ok) .. " err=" .. tostring(err))
  end
end

function on_follower(ev)
  zkelect.log("info", "hook=on_follower node=" .. tostring(ev.node) .. " leader=" .. tostring(ev.leader))
end

function on_stepdown(ev)
  zkelect.log("info", "hook=on_stepdown reason=" .. tostring(ev.reason) .. " epoch=" .. tostring(ev.epoch))
end
