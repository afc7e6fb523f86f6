-- bench/policy.lua: the policy script of the zkelect candidates in bench/run.
--
-- Each hook takes its timestamp first (zkelect.clock(), CLOCK_MONOTONIC, the
-- clock every benchmarked program stamps with), then logs one line that
-- bench/run reads: "bench <event> <mono_us> <delay_us>", where delay_us is
-- zkelect's own part of the path (from the loop reading the ZooKeeper
-- message behind the event, ev.at, to this hook starting), or "-". At warn:
-- bench/run starts zkelect with --log-level warn, so that these are the only
-- lines it writes to the driver's pipe, one per event like the other programs.
-- A timer in the term stands in for a real duty, so that memory and idle CPU
-- are measured with a term that holds something. With BENCH_DUTY=1 in the
-- environment the term also spawns a process (`sleep`), which runs in a
-- cgroup of the term where one can be made: the graceful phase's
-- zkelect-duty and zkelect-duty-pg systems, the cost of that cgroup.

local duty = os.getenv("BENCH_DUTY") == "1"

local function stamp(what, t, ev)
  local delay = ev.at and string.format("%d", math.floor((t - ev.at) * 1e6 + 0.5)) or "-"
  zkelect.log("warn", string.format("bench %s %d %s", what, math.floor(t * 1e6), delay))
end

function on_leader(ev)
  local t = zkelect.clock()
  stamp("leader", t, ev)
  zkelect.every(10, function() end)
  if duty then
    zkelect.spawn{ "sleep", "3600" }
  end
end

function on_follower(ev)
  local t = zkelect.clock()
  stamp("follower", t, ev)
end

function on_stepdown(ev)
  local t = zkelect.clock()
  stamp("stepdown", t, ev)
end
