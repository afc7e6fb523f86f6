-- Soak-run policy (tests/soak/soak.py): a leader starts commands and timers and
-- resigns after a short random time, so leadership moves fast.
--
-- on_leader: zkelect.exec of a short command (waits), zkelect.spawn of a
--   long-lived process and a zkelect.every timer (both belong to the term and
--   end with it), zkelect.after(random 20..100 ms) -> zkelect.resign().
-- on_stepdown: waits briefly (zkelect.sleep) - the node is held meanwhile.
-- At load: a script-lifetime zkelect.every that runs a full collectgarbage, so
-- the driver's minimum over a second of /status readings is the live level.
local ticks = 0
local terms = 0

zkelect.every(0.25, function() collectgarbage("collect") end)

function on_leader(ev)
  terms = terms + 1
  local ok, code = zkelect.exec{ "true" }
  if not ok then
    zkelect.log("warn", "soak: exec true: " .. tostring(code))
  end
  zkelect.spawn{ "sleep", "30" }
  local t = {}                      -- per-term garbage: must not accumulate
  for i = 1, 64 do t[i] = string.rep("x", i) end
  zkelect.every(0.02, function() ticks = ticks + 1; t[#t + 1] = ticks; if #t > 200 then t = {} end end)
  zkelect.after(0.02 + math.random() * 0.08, function() zkelect.resign() end)
  zkelect.log("info", string.format("soak_term terms=%d epoch=%s", terms, tostring(ev.epoch)))
end

function on_stepdown(ev)
  zkelect.sleep(0.01)
end
