--[[ examples/upstream.lua: a local HAProxy sends its traffic to the leader.

Every candidate (and, with `zkelect watch`, any other host) runs an HAProxy
next to it whose one backend server is the leader. Each candidate publishes
its service address as its --data (HOST:PORT); this policy writes that of
the current leader into a small HAProxy config file of its own, checks the
whole configuration (`haproxy -c`) and reloads HAProxy (SIGUSR2 to its
master process: master-worker mode, `-W` or `master-worker` in `global`;
the new worker takes the listening sockets over, old connections finish).

  backend file (UPSTREAM_BACKEND, written here, one line per reload):
      backend leader
          server leader HOST:PORT
  your main config (UPSTREAM_CFG) has the frontend, `default_backend leader`.
  HAProxy runs as: haproxy -W -f MAIN -f BACKEND -p PIDFILE

Who learns the leader, and when
  the leader       in on_leader (its own --data, from zkelect.status()).
  next in line     in on_follower and on_predecessor_change (ev.leader_data).
  further back     a follower only watches its predecessor, so it is not told
                   when the leader changes ahead of it (that would take a
                   watch on the leader: the herd). A timer of this script
                   polls zkelect.status{view = true} every UPSTREAM_POLL
                   seconds: while it does, the agent's census re-reads the
                   line after each change (every half session timeout, 1 to
                   5 s), and its leader_data follows.
  `zkelect watch --script examples/upstream.lua` (a proxy host that is not
                   a candidate): on_leader_change, at every change (one data
                   watch on the leader's node).

Every hook and the timer only record the wanted address; the update runs as
one process (zkelect.spawn, so nothing waits and it works from a timer as
well as from a hook), one at a time; a failed check or reload keeps the old
file and is retried at the next poll. Running it again for the same address
does nothing (after a reload of this script it rewrites the same file once).

What it needs
  haproxy (Debian package haproxy, 2.x), sh; rights to write the backend
  file and to signal HAProxy's master (same user, or root). No other
  privileges: HAProxy may listen on an unprivileged port.

Configuration (environment of the agent)
  UPSTREAM_CFG      the main HAProxy config (required)
  UPSTREAM_BACKEND  the backend file this policy owns (required)
  UPSTREAM_PIDFILE  HAProxy master's pid file, `-p` (required)
  UPSTREAM_HAPROXY  the haproxy binary, default "haproxy"
  UPSTREAM_POLL     seconds between polls of zkelect.status{view = true}, default 1

  UPSTREAM_CFG=/etc/haproxy/main.cfg UPSTREAM_BACKEND=/etc/haproxy/leader.cfg \
  UPSTREAM_PIDFILE=/run/haproxy.pid zkelect run --zk ... --path /app/db --id db-1 \
    --data 10.0.0.5:5432 --status 127.0.0.1:0 --script examples/upstream.lua
]]

local CFG = os.getenv("UPSTREAM_CFG")
local BACKEND = os.getenv("UPSTREAM_BACKEND")
local PIDFILE = os.getenv("UPSTREAM_PIDFILE")
local HAPROXY = os.getenv("UPSTREAM_HAPROXY") or "haproxy"
local POLL = tonumber(os.getenv("UPSTREAM_POLL") or "1")
assert(CFG and BACKEND and PIDFILE, "set UPSTREAM_CFG, UPSTREAM_BACKEND and UPSTREAM_PIDFILE")
assert(POLL and POLL > 0, "UPSTREAM_POLL must be a number of seconds > 0")

-- write BACKEND.tmp, check MAIN + it, move it in place, reload the master
local UPDATE = [[
set -e
printf 'backend leader\n    server leader %s\n' "$1" > "$2.tmp"
"$5" -c -q -f "$3" -f "$2.tmp"
mv "$2.tmp" "$2"
kill -USR2 "$(cat "$4")"
]]

local want, have, proc

local function apply()
  if want == nil or want == have or (proc and proc:running()) then return end
  local target = want
  local p, err = zkelect.spawn{ "sh", "-c", UPDATE, "upstream", target, BACKEND, CFG, PIDFILE, HAPROXY,
    on_exit = function(code, signal)
      if code == 0 then
        have = target
        zkelect.log("info", "upstream now " .. target .. " (haproxy checked and reloaded)")
      else
        zkelect.log("warn", string.format("upstream %s not applied (exit %s, signal %s); retrying",
          target, tostring(code), tostring(signal)))
      end
      if code == 0 and want ~= have then zkelect.after(0, apply) end   -- it changed meanwhile
    end }
  if not p then zkelect.log("warn", "upstream update: " .. tostring(err)) end
  proc = p
end

local function set_leader(addr, why)
  if type(addr) ~= "string" then return end
  if not addr:match("^[%w%.%-]+:%d+$") and not addr:match("^%[[%x:]+%]:%d+$") then
    zkelect.log("warn", "leader data is not HOST:PORT (" .. why .. "): " .. addr)
    return
  end
  if addr ~= want then
    zkelect.log("info", string.format("leader's address %s (%s)", addr, why))
    want = addr
  end
  apply()
end

function on_leader(ev)
  set_leader(zkelect.status().leader_data, "we lead")
end

function on_follower(ev)
  set_leader(ev.leader_data, "following " .. tostring(ev.leader))
end

function on_predecessor_change(ev)
  set_leader(ev.leader_data, "predecessor change")
end

function on_leader_change(ev)           -- zkelect watch
  set_leader(ev.leader_data, "leader change")
end

-- the script's own timer (not a term's): polls the census view (view =
-- true: the census keeps a follower's leader fresh for it), and retries
zkelect.every(POLL, function()
  local st = zkelect.status{view = true}
  if st.role == "leader" or st.role == "follower" then
    set_leader(st.leader_data, "status")
  else
    apply()
  end
end)
