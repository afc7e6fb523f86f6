-- Test policy (tests/integration/test_lease.py): a leader hook that waits
-- while its lease is fresh and, once less than 400 ms of it is left (the
-- test holds the leader's connection silent, so no renewal is answered),
-- computes without waiting until something stops it. It notes the clock
-- before it asked for the lease left, the lease (ms, truncated) and the
-- clock when it began to compute, and the last clock it read; on_stepdown
-- logs them.
local asked, began, left, last

function on_leader(ev)
  zkelect.log("info", "on_leader epoch=" .. ev.epoch)
  while true do
    local t0 = zkelect.clock()
    local s = zkelect.status()
    if s.lease_ms ~= nil and s.lease_ms < 400 then
      asked, began, left = t0, zkelect.clock(), s.lease_ms
      zkelect.log("info", "computing lease_ms=" .. left)
      while true do
        last = zkelect.clock()
      end
    end
    zkelect.sleep(0.005)
  end
end

function on_stepdown(ev)
  if began ~= nil then
    zkelect.log("info", string.format("computed asked=%.6f began=%.6f lease_ms=%d last=%.6f reason=%s",
      asked, began, left, last or began, ev.reason))
  end
end
