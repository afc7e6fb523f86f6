-- Records what each hook received into the global `seen` (read by the test).
seen = {}
local function rec(name, ev)
  local keys = {}
  for k, v in pairs(ev) do keys[#keys + 1] = k .. "=" .. tostring(v) end
  table.sort(keys)
  seen[#seen + 1] = name .. ":" .. table.concat(keys, ",")
  zkelect.log("info", seen[#seen])
end
function on_leader(ev) rec("on_leader", ev) end
function on_follower(ev) rec("on_follower", ev) end
function on_predecessor_change(ev) rec("on_predecessor_change", ev) end
function on_stepdown(ev) rec("on_stepdown", ev) end
