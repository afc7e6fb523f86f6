--[[ examples/postgres/postgres.lua: a PostgreSQL primary with streaming
standbys, one zkelect per node; README.md (beside this file) is the how-to.

What it does
  on_leader      the fence, then the promotion (pgnode.sh promote): refuses
                 (the hook fails, the term resigns) unless the local server is
                 a standby that has streamed since it started and no reachable
                 standby among the other candidates is ahead of it at all; then pg_promote(wait => true) and the term's
                 epoch into zkelect_term, which the writers' trigger checks.
                 /primary answers 200 only after this returns.
  on_stepdown    stops the local server (a fast shutdown, an immediate one
                 if that has not ended after 0.5 s, SIGKILL to the server's
                 processes 0.2 s later) before the node is released.
  on_follower, on_predecessor_change, health() on a follower
                 pgnode.sh follow: a stopped server is rewound against the
                 leader (pg_rewind) and started as its standby; a primary
                 that does not lead is stopped; a standby is pointed at the
                 leader. health() fails until the server is a streaming
                 standby at most PG_MAX_LAG bytes behind, so the candidate
                 withdraws and cannot lead meanwhile.
  health() on the leader
                 pg_isready and not in recovery.

Configuration (environment of the agent)
  PGDATA, PGPORT   the node's data directory and port (required); the
                   agent's --data is this node's HOST:PORT for the others
  PG_NAME          the node's name (application_name on the primary)
  PG_MAX_LAG       bytes a standby may be behind the leader and stay in line
                   (1048576)
  PG_BIN, PG_HOST, PG_OS_USER, PG_LOG, PG_SOCKDIR: see pgnode.sh
  PGNODE           the pgnode.sh script (default: beside this file, from
                   ZKELECT_PG_DIR)

  PGDATA=/srv/pg/n2 PGPORT=5433 PG_NAME=n2 PGNODE=/opt/zkelect/postgres/pgnode.sh \
    zkelect run --zk ... --path /db/main --id n2 --data 127.0.0.1:5433 \
      --status 127.0.0.1:8009 --session-timeout 6000 --stepdown-budget 2000 \
      --health-interval 1000 --health-fails 2 --script postgres.lua
]]
local PGNODE = os.getenv("PGNODE") or "pgnode.sh"
local MAX_LAG = os.getenv("PG_MAX_LAG") or "1048576"
assert(os.getenv("PGDATA") and os.getenv("PGPORT"), "PGDATA and PGPORT name the local server")
assert(MAX_LAG:match("^%d+$"), "PG_MAX_LAG must be a number of bytes")

-- a promotion waits for recovery to end; a rewind copies what changed
hook_budgets = { on_leader = 40, on_follower = 60, on_predecessor_change = 60 }

local function pgnode(timeout, ...)
  local argv = { PGNODE, ... }
  argv.timeout = timeout
  local ok, code, out, err = zkelect.exec(argv)
  local msg = ((err ~= nil and err ~= "") and err or out or ""):gsub("%s+$", "")
  if not ok and msg == "" then msg = "pgnode.sh " .. (...) .. ": " .. tostring(code) end
  return ok, msg
end

-- a node's data as HOST:PORT, or nil: another ZooKeeper client wrote it, and
-- it ends up in a conninfo string and in SQL
local function addr(data)
  if type(data) == "string" and #data < 256 and data:match("^[%w.%-]+:%d+$") then return data end
  return nil
end

-- the leader's HOST:PORT, from the line itself (a hook and health() may read
-- it); the status view (the follower's own last reading) when that fails
local function leader_addr()
  local line = zkelect.candidates()
  if line and line[1] and line[1].id ~= zkelect.id then
    return addr(line[1].data) or ""
  end
  local st = zkelect.status()
  if st.role ~= "leader" and st.leader and st.leader ~= zkelect.id then
    return addr(st.leader_data) or ""
  end
  return ""
end

local function follow(why)
  local ok, msg = pgnode(90, "follow", leader_addr(), MAX_LAG)
  if not ok and why then zkelect.log("info", why .. ": " .. msg) end
  return ok, msg
end

function on_leader(ev)
  if ev.reload then return end
  local others = {}
  local line = zkelect.candidates() or {}
  for _, c in ipairs(line) do
    if c.id ~= zkelect.id and addr(c.data) then
      others[#others + 1] = c.data
    end
  end
  local ok, msg = pgnode(35, "promote", tostring(ev.epoch), table.unpack(others))
  if not ok then error("not promoting: " .. msg, 0) end
  zkelect.log("info", msg)
end

function on_stepdown(ev)
  -- on_stepdown has half the step-down budget (1 s with --stepdown-budget
  -- 2000): a fast shutdown for 0.5 s, then an immediate one, then SIGKILL to
  -- the server's process group at 0.7 s, within the hook's 0.9 s
  local ok, msg = pgnode(0.9, "fence", "5")
  zkelect.log(ok and "info" or "error", string.format("term %d over (%s): %s", ev.epoch, ev.reason,
    ok and "the local server is stopped" or ("could not stop the local server: " .. msg)))
end

function on_follower(ev)
  follow("following " .. tostring(ev.leader))
end

function on_predecessor_change()
  follow("predecessor changed")
end

function health()
  if zkelect.status().role == "leader" then
    return pgnode(5, "check-primary")
  end
  return follow(nil)
end
