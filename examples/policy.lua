-- examples/policy.lua: a failover policy that narrates what it would do.
--
-- Hooks run on the agent's loop, one at a time, in event order. Keep them
-- short: zkelect.exec/zkelect.sleep (asynchronous commands) come with the
-- Lua runtime; until then a hook must not block.

local function describe(ev)
  return string.format("%s (node %s, seq %d, session %s)", ev.id, ev.node or "-", ev.seq or -1, ev.session)
end

function on_leader(ev)
  zkelect.log("info", string.format("I LEAD: %s, epoch %d, took over from %s; " ..
    "this is where the VIP moves and the database is promoted",
    describe(ev), ev.epoch, ev.previous or "nobody"))
end

function on_follower(ev)
  zkelect.log("info", string.format("following %s (%s), %d in line, watching %s",
    ev.leader or "?", ev.leader_node, ev.position, ev.predecessor))
end

function on_predecessor_change(ev)
  zkelect.log("info", string.format("now watching %s instead of %s, %d in line", ev.new, ev.old, ev.position))
end

function on_stepdown(ev)
  zkelect.log("info", string.format("stepping down (%s) after term epoch %d: release the VIP now", ev.reason, ev.epoch))
end
