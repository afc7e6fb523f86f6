-- examples/policy.lua: a failover policy that narrates what it would do.
--
-- Hooks run on the agent's loop, one at a time, in event order. Keep them
-- short: a hook that must run a command waits for it with zkelect.exec (the
-- loop goes on meanwhile; see zkelect(1), THE POLICY SCRIPT). Timers and
-- processes started in on_leader belong to the term: the agent ends them
-- before on_stepdown runs.

local function describe(ev)
  return string.format("%s (node %s, seq %d, session %s)", ev.id, ev.node or "-", ev.seq or -1, ev.session)
end

function on_leader(ev)
  zkelect.log("info", string.format("I LEAD: %s, epoch %d, took over from %s; " ..
    "this is where the VIP moves and the database is promoted",
    describe(ev), ev.epoch, ev.previous or "nobody"))
  -- a leader-only duty: a heartbeat for as long as the term lasts; a real
  -- policy would zkelect.spawn{...} its singleton job here (it gets
  -- ZKELECT_EPOCH in its environment, to fence its writes)
  zkelect.every(5, function()
    local st = zkelect.status()
    zkelect.log("debug", string.format("still leading, epoch %d, lease %d ms left", st.epoch, st.lease_ms or -1))
  end)
end

function on_suspend(ev)
  zkelect.log("warn", string.format("connection lost: leading for at most %d ms more unless it comes back", ev.lease_ms))
end

function on_resume(ev)
  zkelect.log("info", string.format("connection back, still leading (epoch %d)", ev.epoch))
end

function on_follower(ev)
  zkelect.log("info", string.format("following %s (%s, epoch %s), %d in line, watching %s",
    ev.leader or "?", ev.leader_node, tostring(ev.leader_epoch or "?"), ev.position, ev.predecessor))
end

function on_predecessor_change(ev)
  zkelect.log("info", string.format("now watching %s instead of %s, %d in line", ev.new, ev.old, ev.position))
end

function on_stepdown(ev)
  zkelect.log("info", string.format("stepping down (%s) after term epoch %d: release the VIP now", ev.reason, ev.epoch))
end
