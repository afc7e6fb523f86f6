-- Chaos-suite policy (tests/chaos/chaos.py): what a leader "does".
--
-- In on_leader:
--   * log "action epoch=<E>" at once and then every CFG.action_every seconds
--     (zkelect.every); the runner turns these lines into action_begin/end;
--   * spawn the duty process `fence_writer <socket> <ms>` (zkelect.spawn),
--     which writes to the fenced fake resource with ZKELECT_ID/ZKELECT_EPOCH
--     from its environment.
-- Timers and children started here belong to the leadership term: the agent
-- stops/kills them before on_stepdown runs, so nothing here cancels them.
--
-- Hooks log "hook_start <hook> epoch=<E>" and "hook_end <hook>" so the
-- checker can see that each hook ends within its budget (S5).
--
-- Variant (hook_hang scenario): CFG.hang_on_leader = true makes the first
-- on_leader of this candidate loop forever after starting its duties; the
-- agent must stop it at --hook-timeout (instruction-count budget), cancel the
-- term (timer, child) and, by default, resign.
--
-- The runner generates one copy per candidate, replacing the block between
-- the CHAOS-CONFIG markers (the Lua sandbox has no os.getenv); as checked in
-- this file is valid on its own (no duty process: fence_writer = "").
-- Variant (loop_stall scenario): CFG.stall_ms > 0 makes the first term of
-- this candidate, CFG.stall_after seconds after on_leader (its duty process
-- running), block the agent's loop in ONE C call for about stall_ms: a lazy
-- pattern that backtracks in O(n^3) on a string without the 'b' it looks
-- for (string.find(("a"):rep(n), ".-.-b")). The sandbox has no os.execute
-- nor io.popen, and the instruction-count budget cannot stop a C function:
-- only the agent's fail-stop watcher (another process) can end such a term
-- in time. n is calibrated first (calls of a few ms, doubling n until one
-- takes 20 ms, then n * (stall/t)^(1/3)). Logs "stall begin n=<n>
-- target_ms=<ms>" right before the call.
--
-- Variant (daemon_escape scenarios): CFG.daemonize = true starts the duty as
-- a daemon (`setsid -f fence_writer ...`): it leaves the spawned process's
-- group and session, and the spawned process exits at once. Only the
-- term's cgroup holds it then; the checker sees every write it makes after
-- its term ended (S1).
--
-- Variant (state_duty, log_stall scenarios): CFG.marker = true gives the term
-- a duty that is state, not a process: on_leader sets this candidate's
-- marker in the fence's marker table (`fence_writer --mark set SOCKET`, with
-- zkelect.exec: the hook waits for it) before it starts the duty process,
-- and on_stepdown removes it (`--mark clear`; a waiting on_stepdown holds
-- the node, within half the step-down budget). Both name the term's epoch.
-- Nothing else removes it: a term that ends without its on_stepdown (the
-- agent SIGKILLed or frozen) leaves it to the agent's --fence command (the
-- harness gives one that runs `--mark clear`). Logs "marker set|clear epoch=<E> ok=<bool> code=<c>".
--
-- Variant (guarded_counter scenario): CFG.counter names a folder holding
-- the counter, the node CFG.counter .. "/value" ("<value> <epoch>"). After
-- the rest of on_leader and COUNTER_START seconds, the hook counts: it
-- reads the node (zkelect.zk.get: value, version), waits COUNTER_GAP (the
-- work between a read and its write) and sends one guarded multi that sets
-- value + 1 with the version read and creates the audit trail's node
-- CFG.counter .. "/log/a-" (sequential, the same data): the trail is the
-- order ZooKeeper applied the values in, each with its term's epoch. Until
-- its term ends (the end preempts the hook), at most 15 s. Logs "counter
-- epoch=<E> value=<V>" per value applied and "counter refused epoch=<E>
-- code=<c>".
--
-- If zkelect.every / zkelect.spawn are missing (an older agent) it degrades to
-- one action per term and says so at load time ("policy caps ...").

-- CHAOS-CONFIG-BEGIN
local CFG = {
  fence_writer = "",        -- path of the fence_writer binary ("" = none)
  fence_socket = "",        -- the fence's Unix socket
  fence_interval_ms = 50,
  action_every = 0.05,      -- seconds between "action" lines
  hang_on_leader = false,   -- hook_hang variant
  stall_ms = 0,             -- loop_stall variant (0 = none)
  stall_after = 0,          -- seconds after on_leader
  daemonize = false,        -- daemon_escape variant
  marker = false,           -- state_duty / log_stall variant
  counter = "",             -- guarded_counter variant: the counter's folder ("" = none)
}
-- CHAOS-CONFIG-END

local HAS_EVERY = type(zkelect.every) == "function"
local HAS_SPAWN = type(zkelect.spawn) == "function"
local HAS_AFTER = type(zkelect.after) == "function"
local HAS_EXEC = type(zkelect.exec) == "function"
local terms = 0

-- One C call of about ms milliseconds (loop_stall variant).
local function stall(ms)
  local pat = ".-.-b"
  local n, dt = 64, 0
  while n < 1000000 do
    local s = string.rep("a", n)
    local t0 = zkelect.clock()
    string.find(s, pat)
    dt = zkelect.clock() - t0
    if dt >= 0.02 then
      break
    end
    n = n * 2
  end
  local target = math.floor(n * ((ms / 1000) / math.max(dt, 1e-4)) ^ (1 / 3))
  local s = string.rep("a", target)
  zkelect.log("warn", string.format("stall begin n=%d target_ms=%d", target, ms))
  local t0 = zkelect.clock()
  string.find(s, pat)
  zkelect.log("warn", string.format("stall end ms=%d", math.floor((zkelect.clock() - t0) * 1000)))
end

local function epoch_str(ev)
  if math.type(ev.epoch) == "integer" then
    return string.format("%d", ev.epoch)
  end
  return tostring(ev.epoch)
end

-- The marker variant: one request to the fence's marker table (op "set" or
-- "clear"), waited for inside the hook.
local function marker(op, e)
  if not (CFG.marker and HAS_EXEC and CFG.fence_writer ~= "") then
    return
  end
  local ok, code, _, err = zkelect.exec{ CFG.fence_writer, "--mark", op, CFG.fence_socket, e,
                                         timeout = 2 }
  zkelect.log(ok and "info" or "error", string.format("marker %s epoch=%s ok=%s code=%s%s", op, e,
    tostring(ok), tostring(code), ok and "" or (" " .. tostring(err or ""):gsub("%s+$", ""))))
end

zkelect.log("info", string.format("policy caps every=%s spawn=%s hang=%s stall_ms=%d",
  tostring(HAS_EVERY), tostring(HAS_SPAWN), tostring(CFG.hang_on_leader), CFG.stall_ms))

-- The guarded_counter variant's duty (above). COUNTER_START: a term
-- starts counting late, so that a deposed leader's write held in the
-- network reaches ZooKeeper before its successor changes the counter (the
-- version it carries still matches: only the guard refuses it).
-- COUNTER_GAP: a cut of the leader's network most likely falls between a
-- read and its write, so that the write goes into the cut.
local COUNTER_START, COUNTER_GAP = 1.5, 0.1

local function counter(e)
  local node = CFG.counter .. "/value"
  zkelect.sleep(COUNTER_START)
  local t0 = zkelect.clock()
  while zkelect.clock() - t0 < 15 do
    local data, ver, code = zkelect.zk.get(node)
    local n = data and tonumber(string.match(data, "^(%d+) ")) or nil
    local r, msg
    if n then
      zkelect.sleep(COUNTER_GAP)
      local v = (n + 1) .. " " .. e
      zkelect.log("info", "counter sending epoch=" .. e .. " value=" .. (n + 1))
      r, msg, code = zkelect.zk.multi{
        { op = "set", path = node, data = v, version = ver },
        { op = "create", path = CFG.counter .. "/log/a-", data = v, sequential = true },
      }
    else
      msg = data and "not a counter: " .. data or ver
    end
    if r then
      zkelect.log("info", "counter epoch=" .. e .. " value=" .. (n + 1))
    else
      zkelect.log("info", "counter refused epoch=" .. e .. " code=" .. tostring(code) ..
                  " msg=" .. tostring(msg))
      if code == "ETERM" then break end
      zkelect.sleep(0.02)
    end
  end
end

function on_leader(ev)
  local e = epoch_str(ev)
  terms = terms + 1
  zkelect.log("info", "hook_start on_leader epoch=" .. e)
  zkelect.log("info", "action epoch=" .. e)
  marker("set", e)
  if HAS_EVERY then
    zkelect.every(CFG.action_every, function()
      zkelect.log("info", "action epoch=" .. e)
    end)
  end
  if HAS_SPAWN and CFG.fence_writer ~= "" then
    local argv = { CFG.fence_writer, CFG.fence_socket, tostring(CFG.fence_interval_ms) }
    if CFG.daemonize then
      table.insert(argv, 1, "-f")
      table.insert(argv, 1, "setsid")
    end
    local child, msg, code = zkelect.spawn(argv)
    if not child then
      zkelect.log("error", "spawn fence_writer failed: " .. tostring(msg) .. " code=" .. tostring(code))
    end
  end
  if CFG.stall_ms > 0 and terms == 1 and HAS_AFTER then
    zkelect.after(CFG.stall_after, function() stall(CFG.stall_ms) end)
  end
  if CFG.hang_on_leader and terms == 1 then
    zkelect.log("warn", "hang on_leader epoch=" .. e)
    local n = 0
    while true do
      n = n + 1
    end
  end
  zkelect.log("info", "hook_end on_leader")
  if CFG.counter ~= "" then
    counter(e)
  end
end

function on_stepdown(ev)
  zkelect.log("info", "hook_start on_stepdown epoch=" .. epoch_str(ev))
  marker("clear", epoch_str(ev))
  zkelect.log("info", "hook_end on_stepdown")
end

function on_suspend(ev)
  zkelect.log("info", "hook_start on_suspend")
  zkelect.log("info", "hook_end on_suspend")
end

function on_resume(ev)
  zkelect.log("info", "hook_start on_resume")
  zkelect.log("info", "hook_end on_resume")
end
