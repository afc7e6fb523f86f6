-- Test policy (tests/integration/test_runtime.py): the Lua runtime. The
-- behaviour of on_leader is chosen by $ZKT_MODE; results are logged as
-- "key=value" lines through zkelect.log.
local mode = os.getenv("ZKT_MODE") or "exec"
local dir = os.getenv("ZKT_DIR") or "/tmp"

local function q(s) return (string.gsub(s, "\n", "|")) end

local modes = {}

function modes.exec(ev)
  local ok, code, out, err = zkelect.exec{ "sh", "-c",
    'echo "out $ZKELECT_ID $ZKELECT_EPOCH $ZKELECT_ROLE $EXTRA"; echo err >&2; exit 3',
    env = { EXTRA = "x1" } }
  zkelect.log("info", "exec1 ok=" .. tostring(ok) .. " code=" .. tostring(code) ..
    " out=" .. q(out) .. " err=" .. q(err))
  ok, code, out = zkelect.exec{ "echo a b | tr ' ' '-'", shell = true }
  zkelect.log("info", "exec2 ok=" .. tostring(ok) .. " code=" .. tostring(code) .. " out=" .. q(out))
  ok, code = zkelect.exec{ "sh", "-c", "kill -SEGV $$" }
  zkelect.log("info", "exec3 ok=" .. tostring(ok) .. " code=" .. tostring(code))
  local nok, msg, ecode = zkelect.exec{ "/nonexistent/zkelect-prog" }
  zkelect.log("info", "exec4 ok=" .. tostring(nok) .. " code=" .. tostring(ecode) .. " msg=" .. q(msg))
  ok, code, out = zkelect.exec{ "head", "-c", "100000", "/dev/zero", max_output = 1000 }
  zkelect.log("info", "exec5 ok=" .. tostring(ok) .. " len=" .. #out)
  -- a group with a grandchild that outlives a timeout
  local t0 = os.time()
  ok, code = zkelect.exec{ "sh", "-c", "sleep 60 & echo $! > " .. dir .. "/grandchild; wait", timeout = 0.3 }
  zkelect.log("info", "exec6 ok=" .. tostring(ok) .. " code=" .. tostring(code))
  -- timers and sleep interleave on the loop
  local ticks = 0
  local t = zkelect.every(0.05, function() ticks = ticks + 1 end)
  zkelect.after(0.01, function() zkelect.log("info", "after fired") end)
  zkelect.sleep(0.3)
  t:stop()
  zkelect.log("info", "slept ticks=" .. ticks)
  -- waiting is for hooks only
  zkelect.after(0, function()
    local okc, e = pcall(zkelect.sleep, 1)
    zkelect.log("info", "sleep_in_callback ok=" .. tostring(okc) .. " err=" .. q(tostring(e)))
  end)
  local oke, e = pcall(os.execute, "true")
  zkelect.log("info", "os.execute ok=" .. tostring(oke) .. " err=" .. q(tostring(e)))
  zkelect.log("info", "exec done")
end

function modes.supervise(ev)
  local p = zkelect.spawn{ "sh", "-c", 'echo "$ZKELECT_EPOCH-$TAG" >> "$0"; sleep 0.05; exit 1',
    dir .. "/starts", restart = "on-failure", restart_delay = 0.05, env = { TAG = "t1" } }
  assert(p, "spawn failed")
  zkelect.log("info", "supervised pid=" .. p:pid())
end

function modes.helpers(ev)
  local zke = require("zke")
  assert(require("zke") == zke, "modules load once")
  local out = zke.run{ "echo", "hi" }
  zkelect.log("info", "run out=" .. q(out))
  local ok, msg = zke.try("echo bad >&2; exit 4")
  zkelect.log("info", "try ok=" .. tostring(ok) .. " msg=" .. q(msg))
  local okr, e = pcall(zke.run, { "false" })
  zkelect.log("info", "run_fail ok=" .. tostring(okr) .. " err=" .. q(tostring(e)))
  local calls = 0
  local d = zke.debounce(0.1, function(x) calls = calls + 1; zkelect.log("info", "debounced x=" .. x) end)
  for i = 1, 5 do d(i) end
  zkelect.sleep(0.3)
  zkelect.log("info", "debounce calls=" .. calls)
  local okm, em = pcall(require, "no_such_module")
  zkelect.log("info", "missing ok=" .. tostring(okm) .. " err=" .. q(tostring(em)))
  local oke1, ee1 = pcall(zkelect.exec, { "true", env = { ["A=B"] = "x" } })
  zkelect.log("info", "badenv ok=" .. tostring(oke1) .. " err=" .. q(tostring(ee1)))
  local okn, en = pcall(require, "../etc/passwd")
  zkelect.log("info", "badname ok=" .. tostring(okn))
  zkelect.log("info", "helpers done")
end

-- a preempted hook whose to-be-closed variables misbehave: a term timer and
-- a __close handler that never returns (both must be handled safely)
function modes.closers(ev)
  local t <close> = zkelect.every(1, function() end)
  local x <close> = setmetatable({}, { __close = function() while true do end end })
  zkelect.log("info", "closers waiting")
  zkelect.sleep(60)
end

-- a supervised child waiting to restart when its term ends (first term only)
local terms = 0
function modes.restart_resign(ev)
  terms = terms + 1
  zkelect.spawn{ "false", restart = "always", restart_delay = 0.3 }
  zkelect.log("info", "restart_resign term=" .. terms)
  if terms == 1 then
    zkelect.sleep(0.1)
    zkelect.resign()
  end
end

function modes.idle(ev)
  zkelect.log("info", "idle leader epoch=" .. ev.epoch)
end

function modes.hang(ev)
  zkelect.log("info", "hang start")
  zkelect.exec{ "sh", "-c", "echo $$ > " .. dir .. "/hang-child; exec sleep 60" }
  zkelect.log("info", "never")
end

function modes.overrun(ev)
  zkelect.log("info", "overrun start epoch=" .. ev.epoch)
  zkelect.sleep(60)
end

function modes.spin(ev)
  zkelect.log("info", "spin start")
  while true do
    pcall(function() while true do end end)   -- pcall cannot swallow the budget
  end
end

function on_leader(ev)
  modes[mode](ev)
end

function on_follower(ev)
  zkelect.log("info", "on_follower start")
  zkelect.sleep(0.3)
  zkelect.log("info", "on_follower end")
end

function on_stepdown(ev)
  zkelect.log("info", "on_stepdown reason=" .. ev.reason)
end

hook_budgets = { on_leader = tonumber(os.getenv("ZKT_BUDGET") or "20") }

-- health: $ZKT_DIR/unhealthy present = failing check (through a command)
if os.getenv("ZKT_HEALTH") then
  function health()
    local ok = zkelect.exec{ "test", "!", "-e", dir .. "/unhealthy" }
    if not ok then return false, "marker file present" end
    return true
  end
end
