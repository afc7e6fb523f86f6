--[[ examples/vip.lua: the leader holds a virtual IP address.

What it does
  on_leader      adds VIP/PREFIX to DEV (`ip addr replace`, so running it
                 again after a reload changes nothing), then sends one
                 gratuitous ARP (`arping -U -c 1 -I DEV VIP`, if arping is
                 installed: Debian package iputils-arping) so that the
                 neighbours' ARP caches point to this host at once instead
                 of after their entries went stale. A failed `ip` fails the
                 hook, and a failed on_leader resigns: a leader that cannot
                 hold the address should not lead. A failed arping is only
                 logged ("gratuitous ARP failed").
  on_follower    makes sure the address is absent (an old leader's leftover,
                 e.g. after this agent was SIGKILLed while leading and
                 restarted: nothing could remove it then).
  term end       removes the address (every end of a term: resign, SIGTERM,
                 the lease running out while disconnected, expiry...): a
                 guard process started in on_leader runs `ip addr del` when
                 the agent ends the term's processes, which it does before
                 it releases the node, so the successor cannot add the
                 address before it is gone here. on_stepdown checks again.
  on_suspend     keeps it: the lease still holds; if it runs out, on_stepdown
                 (reason "lease") removes it before a successor can lead.
  fence          removes it when the term ended without any of the above
                 (the agent SIGKILLed, crashed, or frozen past its term's
                 hard end): the fail-stop watcher runs `ip addr del` once
                 it has killed the term's processes (zkelect.fence).
Every command goes through zkelect.exec with a timeout (the loop, and the
ZooKeeper session, keep running while it waits); removing and adding check
first, so every hook may run again.

What it needs
  root or CAP_NET_ADMIN (and CAP_NET_RAW for arping), the `ip` command
  (iproute2); arping is optional. Under systemd, uncomment the
  CAP_NET_ADMIN / AF_NETLINK lines of examples/zkelect.service.

Configuration (environment of the agent)
  VIP_ADDR     the address, e.g. 10.0.0.100 (required)
  VIP_PREFIX   prefix length, default 32
  VIP_DEV      the interface, e.g. eth0 (required)
  VIP_NETNS    optional: a named network namespace (`ip -n NS ...`,
               `ip netns exec NS arping ...`) where DEV lives; the agent
               itself stays in its own namespace, next to ZooKeeper
  VIP_ARPING   arping program, default "arping" (looked up on PATH);
               "" turns the gratuitous ARP off

  VIP_ADDR=10.0.0.100 VIP_PREFIX=24 VIP_DEV=eth0 \
    zkelect run --zk ... --path /app/vip --id node-1 --script examples/vip.lua

A SIGKILLed leader's address is removed by the fence, at once (the
watcher outlives the agent). Only a host that dies with its watcher (a
power cut, a kernel panic, `kill -9` of both) keeps it; the new leader
adds it on its own host and its gratuitous ARP steers the neighbours to
it, and the old host removes it when its agent is restarted
(on_follower). Two hosts holding one address for that while is harmless
for ARP (the last announcement wins) but not for the hosts themselves: if
that matters, fence the old host (STONITH) as keepalived and Pacemaker
setups do.
]]

local VIP = os.getenv("VIP_ADDR")
local PREFIX = os.getenv("VIP_PREFIX") or "32"
local DEV = os.getenv("VIP_DEV")
local NETNS = os.getenv("VIP_NETNS")
local ARPING = os.getenv("VIP_ARPING") or "arping"
if NETNS == "" then NETNS = nil end

assert(VIP and VIP:match("^%d+%.%d+%.%d+%.%d+$"), "VIP_ADDR must be an IPv4 address")
assert(DEV and DEV:match("^[%w._-]+$"), "VIP_DEV must name an interface")
assert(PREFIX:match("^%d+$") and tonumber(PREFIX) <= 32, "VIP_PREFIX must be 0..32")
assert(not NETNS or NETNS:match("^[%w._-]+$"), "VIP_NETNS must name a network namespace")

-- The fence: the watcher's `ip addr del` for a term that ended without its
-- step-down (it appends EPOCH and REASON: the shell's $1 and $2, unused).
-- Exit 0 when the address is gone (also when it was gone already).
local IP = "ip " .. (NETNS and ("-n " .. NETNS .. " ") or "")
local FENCE = IP .. "addr del " .. VIP .. "/" .. PREFIX .. " dev " .. DEV .. " 2>/dev/null; " ..
              "! " .. IP .. "-o -4 addr show dev " .. DEV .. " | grep -qF ' " .. VIP .. "/'"
zkelect.fence{ "sh", "-c", FENCE, "vip-fence", timeout = 3 }   -- (nil where no watcher runs)

local TIMEOUT = 3   -- seconds for each `ip` command

-- `ip [-n NS] ARGS...`
local function ip(...)
  local argv = { "ip" }
  if NETNS then argv[#argv + 1] = "-n"; argv[#argv + 1] = NETNS end
  for _, a in ipairs({ ... }) do argv[#argv + 1] = a end
  argv.timeout = TIMEOUT
  return zkelect.exec(argv)
end

local function check(what, ok, code, out, err)
  if ok then return out end
  if ok == nil then error(what .. ": " .. tostring(code)) end
  error(string.format("%s: exit %s: %s", what, tostring(code), (err or ""):gsub("%s+$", "")))
end

local function present()
  local out = check("ip addr show", ip("-o", "-4", "addr", "show", "dev", DEV))
  for addr in out:gmatch("inet (%d+%.%d+%.%d+%.%d+)/") do
    if addr == VIP then return true end
  end
  return false
end

local function remove(why)
  if present() then
    check("ip addr del", ip("addr", "del", VIP .. "/" .. PREFIX, "dev", DEV))
    zkelect.log("info", string.format("VIP %s removed from %s (%s)", VIP, DEV, why))
  end
end

local function arp()
  if ARPING == "" then return end
  local argv = {}
  if NETNS then argv = { "ip", "netns", "exec", NETNS } end
  for _, a in ipairs({ ARPING, "-q", "-U", "-c", "1", "-I", DEV, VIP }) do argv[#argv + 1] = a end
  -- arping waits a second for replies nobody sends: run it beside the hook
  -- (it belongs to the term), and log how it ended
  argv.on_exit = function(code, signal)
    if code == 0 then
      zkelect.log("info", "gratuitous ARP sent for " .. VIP .. " on " .. DEV)
    else
      zkelect.log("warn", string.format("gratuitous ARP failed (exit %s, signal %s)",
        tostring(code), tostring(signal)))
    end
  end
  local p, err = zkelect.spawn(argv)
  if not p then zkelect.log("warn", "gratuitous ARP failed: " .. tostring(err)) end
end

-- The removal at the end of a term is done by a guard process of the term,
-- not by on_stepdown: the agent ends a term's processes (SIGTERM, waiting
-- for them) before it releases the node, whereas a hook that waits for a
-- command (zkelect.exec) does not hold the release back, and at a shutdown
-- the agent may exit before it returns. The guard sleeps until SIGTERM and
-- then runs its arguments (`ip [-n NS] addr del VIP/PREFIX dev DEV`).
local GUARD = 'trap \'"$@"; exit $?\' TERM INT; sleep 2147483647 & wait'

local function guard()
  local argv = { "sh", "-c", GUARD, "vip-guard", "ip" }
  if NETNS then argv[#argv + 1] = "-n"; argv[#argv + 1] = NETNS end
  for _, a in ipairs({ "addr", "del", VIP .. "/" .. PREFIX, "dev", DEV }) do argv[#argv + 1] = a end
  argv.on_exit = function(code, signal)
    if code == 0 then
      zkelect.log("info", string.format("VIP %s removed from %s (term end)", VIP, DEV))
    else
      zkelect.log("warn", string.format("VIP removal at term end: exit %s, signal %s",
        tostring(code), tostring(signal)))
    end
  end
  return assert(zkelect.spawn(argv))
end

function on_leader(ev)
  -- after a reload the term, and with it its guard, goes on
  if not ev.reload then guard() end
  check("ip addr replace", ip("addr", "replace", VIP .. "/" .. PREFIX, "dev", DEV))
  zkelect.log("info", string.format("VIP %s/%s on %s (epoch %d%s)", VIP, PREFIX, DEV, ev.epoch,
    ev.reload and ", after a reload" or ""))
  if not ev.reload then arp() end
end

function on_follower(ev)
  remove("following " .. tostring(ev.leader))
end

function on_stepdown(ev)
  -- the guard has removed it already; this only catches a guard that failed
  remove("stepdown: " .. ev.reason)
end

function on_suspend(ev)
  zkelect.log("warn", string.format("disconnected: keeping VIP %s for at most %d ms", VIP, ev.lease_ms))
end
