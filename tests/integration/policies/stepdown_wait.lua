-- Test policy (tests/integration/test_lease.py): on_stepdown waits (as a
-- hook undoing a leader duty with a command would), for ZKT_UNDO_S seconds,
-- then logs "undo_done". The successor must lead only after that, unless
-- the wait is longer than half the step-down budget.
local undo = tonumber(os.getenv("ZKT_UNDO_S") or "0.3")

function on_leader(ev)
  zkelect.log("info", "on_leader epoch=" .. ev.epoch)
end

function on_stepdown(ev)
  zkelect.log("info", "undo_start epoch=" .. ev.epoch)
  zkelect.sleep(undo)
  zkelect.log("info", "undo_done epoch=" .. ev.epoch)
end
