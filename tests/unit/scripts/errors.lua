local function deep() error("boom") end
function on_leader(ev) deep() end
function on_follower(ev)
  -- a runaway hook that tries to swallow the budget error
  while true do pcall(function() while true do end end) end
end
function on_stepdown(ev)
  local t = {}
  -- 1 MiB a step: the cap (64 MiB) comes long before the 300 ms budget,
  -- also in a slow sanitizer build on a busy machine
  for i = 1, 1e9 do t[i] = string.rep("x", 1 << 20) .. i end
end
function on_predecessor_change(ev)
  os.execute("true")
end
