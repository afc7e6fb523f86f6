-- Test policy (tests/integration/test_hooks.py): logs every hook's ev fields
-- and zkelect.status() as one line of key=value pairs through zkelect.log.
-- Values must not contain spaces (the test ids and data have none).
-- on_stepdown logs at level warn (the test checks the level is passed on).

local FIELDS = {
  "id", "path", "node", "seq", "session", "reason",
  "epoch", "previous", "candidates",
  "leader", "leader_data", "leader_epoch", "leader_node", "predecessor", "position", "lease_ms",
  "old", "new",
}
local STATUS = { "role", "leader", "epoch", "node", "position" }

local function report(name, ev, level)
  local now = zkelect.clock()
  local parts = { "hook=" .. name }
  if ev.at ~= nil then
    -- ev.at: when the loop read the message behind this event (zkelect.clock scale)
    parts[#parts + 1] = string.format("at_ns=%d", math.floor(ev.at * 1e9))
    parts[#parts + 1] = string.format("age_us=%d", math.floor((now - ev.at) * 1e6))
  end
  for _, k in ipairs(FIELDS) do
    if ev[k] ~= nil then
      parts[#parts + 1] = k .. "=" .. tostring(ev[k])
    end
  end
  local st = zkelect.status()
  if type(st) == "table" then
    for _, k in ipairs(STATUS) do
      if st[k] ~= nil then
        parts[#parts + 1] = "status." .. k .. "=" .. tostring(st[k])
      end
    end
  else
    parts[#parts + 1] = "status=" .. type(st)
  end
  zkelect.log(level or "info", table.concat(parts, " "))
end

function on_leader(ev) report("on_leader", ev) end
function on_follower(ev) report("on_follower", ev) end
function on_predecessor_change(ev) report("on_predecessor_change", ev) end
function on_stepdown(ev) report("on_stepdown", ev, "warn") end
