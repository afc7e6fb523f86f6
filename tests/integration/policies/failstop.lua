-- Test policy (tests/integration/test_failstop.py). on_leader starts a duty:
-- a process that appends a CLOCK_MONOTONIC stamp (ns) to
-- $ZKT_DIR/duty-<id>-<epoch> every 20 ms and has a grandchild (a sleep, in
-- its process group, whose pid it writes to that file + ".gc"). Then, on the
-- candidate named by $ZKT_STALL_ID, it stalls the loop in one C call: a
-- string.find whose pattern backtracks over $ZKT_STALL_N characters
-- (cubic), which the instruction-count hook cannot interrupt.
--
-- Calibration: with $ZKT_CALIBRATE_N set, the top level times that call
-- for that many characters and fails with "calibrated n=N cpu=SECONDS"
-- (`zkelect check` prints it and exits 78).
local dir = os.getenv("ZKT_DIR") or "/tmp"
local PATTERN = ".-.-b"

local function stall(n)
  return string.find(string.rep("a", n), PATTERN)
end

local calib = tonumber(os.getenv("ZKT_CALIBRATE_N") or "")
if calib then
  local t0 = os.clock()
  stall(calib)
  error(string.format("calibrated n=%d cpu=%.6f", calib, os.clock() - t0), 0)
end

local DUTY = [[
import os, subprocess, sys, time
f = open(sys.argv[1], "a", buffering=1)
gc = subprocess.Popen(["sleep", "1000"])
with open(sys.argv[1] + ".gc.tmp", "w") as g:
    g.write("%d\n" % gc.pid)
os.rename(sys.argv[1] + ".gc.tmp", sys.argv[1] + ".gc")
while True:
    f.write("%d\n" % time.monotonic_ns())
    time.sleep(0.02)
]]

function on_leader(ev)
  local file = dir .. "/duty-" .. ev.id .. "-" .. ev.epoch
  local p, err = zkelect.spawn{ "python3", "-c", DUTY, file,
    on_exit = function(code, sig)
      zkelect.log("info", "duty_exit code=" .. tostring(code) .. " sig=" .. tostring(sig))
    end }
  assert(p, err)
  zkelect.log("info", "duty pid=" .. p:pid() .. " file=" .. file)
  if ev.id == os.getenv("ZKT_STALL_ID") then
    -- the duty writes a few stamps and names its grandchild first (what the
    -- test waits for; a fixed sleep lost the race on a loaded machine)
    for _ = 1, 200 do
      if zkelect.exec{ "sh", "-c", '[ -e "$1.gc" ] && [ "$(wc -l <"$1")" -ge 3 ]', "sh", file } then
        break
      end
      zkelect.sleep(0.05)
    end
    local n = tonumber(os.getenv("ZKT_STALL_N"))
    zkelect.log("info", "stall_begin n=" .. n)
    stall(n)
    zkelect.log("info", "stall_end")
  end
end

function on_stepdown(ev)
  zkelect.log("info", "on_stepdown reason=" .. ev.reason .. " epoch=" .. ev.epoch)
end
