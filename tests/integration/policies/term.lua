-- Test policy (tests/integration/test_lease.py): a leader duty made of a
-- timer (an "action" line every 50 ms) and a child process that ignores
-- SIGTERM (so the agent must SIGKILL it) and writes its ZKELECT_*
-- environment to $ZKT_DIR/env-<id>-<epoch>.
local dir = os.getenv("ZKT_DIR") or "/tmp"
local child, ticker

function on_leader(ev)
  zkelect.log("info", "on_leader epoch=" .. ev.epoch .. " lease_ms=" .. ev.lease_ms)
  ticker = zkelect.every(0.05, function()
    zkelect.log("info", "action epoch=" .. ev.epoch)
  end)
  local script = 'echo "$ZKELECT_ID $ZKELECT_EPOCH $ZKELECT_ROLE" > "$0.tmp" && mv "$0.tmp" "$0"; '
              .. 'trap "" TERM; while :; do sleep 0.1; done'
  local p, err = zkelect.spawn{ "sh", "-c", script, dir .. "/env-" .. ev.id .. "-" .. ev.epoch,
    on_exit = function(code, sig)
      zkelect.log("info", "child_exit code=" .. tostring(code) .. " sig=" .. tostring(sig))
    end }
  assert(p, err)
  child = p
  zkelect.log("info", "child pid=" .. p:pid())
end

function on_stepdown(ev)
  zkelect.log("warn", "on_stepdown reason=" .. ev.reason .. " epoch=" .. ev.epoch
    .. " child_running=" .. tostring(child ~= nil and child:running())
    .. " ticker_active=" .. tostring(ticker ~= nil and ticker:active()))
end

function on_suspend(ev)
  zkelect.log("info", "on_suspend epoch=" .. ev.epoch .. " lease_ms=" .. ev.lease_ms)
end

function on_resume(ev)
  zkelect.log("info", "on_resume epoch=" .. ev.epoch .. " lease_ms=" .. ev.lease_ms)
end
