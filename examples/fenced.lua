--[[ examples/fenced.lua: the leader's duty writes with its epoch, and the
resource it writes to refuses stale epochs.

What it does
  on_leader      starts the duty for the term (zkelect.spawn through
                 zke.singleton, restarted if it fails): a writer that sends
                 "W <id> <epoch> <n>" lines to a protected resource, the
                 epoch taken from ZKELECT_EPOCH in its environment. After a
                 reload (ev.reload) the term's writer is still running and
                 is left alone.
  term end       the agent stops the writer (SIGTERM to its group, SIGKILL
                 after the grace) before on_stepdown and before the node is
                 released.
  on_stepdown    only logs.
The resource keeps the largest epoch it has accepted and rejects any write
with a smaller one ("REJECT <max>"). That covers what the lease cannot: a
writer that outlived its agent's term for a moment (its agent was frozen:
a frozen agent's children are not frozen), or a write that was in flight
when the host paused. Epochs only grow from term to term (docs/design.md, "The
promise"), so the newest leader's writes always pass.

The writer and the resource here are the chaos suite's:
tests/tools/fence_writer.c (built as build/tests/tools/fence_writer) and
tests/chaos/fence.py (a Unix-socket server that logs every accept and
reject). A real resource does the same with a column, a header or a
conditional update (`UPDATE ... WHERE epoch <= :epoch`).

What it needs
  nothing beyond the writer and the resource; no privileges.

Configuration (environment of the agent)
  FENCE_SOCKET       the resource's Unix socket path (required)
  FENCE_WRITER       the writer program, default "fence_writer" (on PATH)
  FENCE_INTERVAL_MS  milliseconds between writes, default 200

  python3 tests/chaos/fence.py /run/fence.sock /tmp/fence.log &
  FENCE_SOCKET=/run/fence.sock FENCE_WRITER=build/tests/tools/fence_writer \
    zkelect run --zk ... --path /app/fenced --id a --script examples/fenced.lua
]]
local zke = require("zke")

local SOCKET = os.getenv("FENCE_SOCKET")
local WRITER = os.getenv("FENCE_WRITER") or "fence_writer"
local INTERVAL = os.getenv("FENCE_INTERVAL_MS") or "200"
assert(SOCKET and SOCKET ~= "", "FENCE_SOCKET must name the resource's socket")
assert(INTERVAL:match("^%d+$"), "FENCE_INTERVAL_MS must be a number of milliseconds")

function on_leader(ev)
  if ev.reload then return end      -- the term, and its writer, go on
  zkelect.log("info", "leading with epoch " .. ev.epoch .. ": starting the fenced writer")
  zke.singleton({ WRITER, SOCKET, INTERVAL }, {
    restart_delay = 1,
    on_exit = function(code, signal)
      if code ~= 0 and signal ~= 15 then     -- 15: SIGTERM, the end of the term
        zkelect.log("warn", string.format("writer ended (exit %s, signal %s)", tostring(code), tostring(signal)))
      end
    end,
  })
end

function on_stepdown(ev)
  zkelect.log("info", string.format("term %d over (%s): the writer has been stopped", ev.epoch, ev.reason))
end
