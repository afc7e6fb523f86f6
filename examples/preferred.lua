--[[ examples/preferred.lua: a preferred candidate takes the lead when it
joins, through graceful hand-overs, and nobody flaps.

Each candidate publishes a priority in its --data: a token prio=N anywhere
in it (--data "prio=10", --data "10.0.0.5:5432 prio=10"); no token means 0.
Rule: a leader resigns when a candidate with a strictly higher priority is
in line. Resigning puts it at the back, and the next in line leads.

Why it converges and cannot flap. Let P be the highest priority in line.
A candidate of priority P never resigns. Each resignation of a lower one
moves every candidate behind it one place forward, so a top-priority one
leads after at most as many hand-overs as there are candidates ahead of it
(an intermediate leader resigns in its on_leader, before any work of its
own). Once it leads, nothing changes until the line changes; if it leaves,
the next in line leads and stays unless someone of a higher priority than
its own is in line. Equal priorities never hand over to each other.

How the leader learns who is in line, without watching the folder (no
herd): it reads the line itself, `zkelect status --json` (one short
ZooKeeper session: a listing and one read per candidate), run with
zkelect.exec when it becomes leader and then from health(), the one
periodic callback that may wait (every --health-interval; it always
returns true, so it never withdraws the candidate). Followers read
nothing. So a preferred candidate that joins leads within about one
health interval plus one hand-over per candidate ahead of it.

Hooks
  on_leader    reads the line; resigns at once if a higher priority is in
               line (an intermediate leader); otherwise logs "staying".
               Put the term's real work after the check (see `lead` below).
  health()     the leader reads the line again and resigns if needed.
  on_stepdown  logs.

What it needs
  the zkelect binary (for `zkelect status`); no privileges.

Configuration (environment of the agent)
  PREFERRED_ZK         the connect string for `zkelect status`, default
                       $ZKELECT_ZK (set one of them)
  PREFERRED_BIN        the zkelect binary, default "zkelect" on PATH
  PREFERRED_AUTH_FILE  --auth-file for `zkelect status`, if the election
                       needs credentials to read

  PREFERRED_ZK=zk1:2181 zkelect run --zk zk1:2181 --path /app/db --id db-1 \
    --data "prio=10" --health-interval 2000 --script examples/preferred.lua
]]

local ZK = os.getenv("PREFERRED_ZK") or os.getenv("ZKELECT_ZK")
local BIN = os.getenv("PREFERRED_BIN") or "zkelect"
local AUTH = os.getenv("PREFERRED_AUTH_FILE")
assert(ZK and ZK ~= "", "set PREFERRED_ZK (or ZKELECT_ZK) to the ZooKeeper connect string")

local election_path = os.getenv("ZKELECT_PATH")  -- set again from each event

local function prio_of(data)
  return tonumber((data or ""):match("prio=(%d+)") or "0")
end

-- The line as `zkelect status --json` prints it: { {node=, id=, prio=}, ... }
-- in order (the leader first). Data with quotes or braces is not supported
-- by this small reader.
local function line_up(path)
  local argv = { BIN, "status", "--zk", ZK, "--path", path, "--json", timeout = 5 }
  if AUTH then argv[#argv + 1] = "--auth-file"; argv[#argv + 1] = AUTH end
  local ok, code, out, err = zkelect.exec(argv)
  if not ok then
    return nil, string.format("zkelect status: %s %s", tostring(code), (err or ""):gsub("%s+$", ""))
  end
  local arr = out:match('"candidates":%[(.*)%]')
  if not arr then return nil, "zkelect status: no candidates in " .. out:sub(1, 200) end
  local list = {}
  for obj in arr:gmatch("%b{}") do
    local node = obj:match('"node":"([^"]*)"')
    local data = obj:match('"data":"([^"]*)"')
    if node and data then          -- a node gone since the listing has no data
      list[#list + 1] = { node = node, id = obj:match('"id":"([^"]*)"'), prio = prio_of(data) }
    end
  end
  return list
end

-- Resigns if a higher priority is in line; returns true if it resigned.
local function hand_over_if_needed(why)
  local st = zkelect.status()
  if st.role ~= "leader" or st.suspended or not election_path then return false end
  local list, err = line_up(election_path)
  if not list then
    zkelect.log("warn", "cannot read the line (" .. why .. "): " .. tostring(err))
    return false
  end
  local mine, best
  for _, c in ipairs(list) do
    if c.node == st.node then
      mine = c.prio
    elseif not best or c.prio > best.prio then
      best = c
    end
  end
  if mine and best and best.prio > mine then
    zkelect.log("info", string.format("handing over (%s): %s has priority %d, mine is %d",
      why, tostring(best.id), best.prio, mine))
    zkelect.resign()
    return true
  end
  return false
end

-- the term's real work goes here; it only runs on a leader that stays
local function lead(ev)
  zkelect.log("info", string.format("staying leader (epoch %d)", ev.epoch))
end

function on_leader(ev)
  election_path = ev.path
  if not hand_over_if_needed("elected") then lead(ev) end
end

function health()
  hand_over_if_needed("poll")
  return true
end

function on_follower(ev)
  election_path = ev.path
end

function on_stepdown(ev)
  zkelect.log("info", "stepped down (" .. ev.reason .. ")")
end
