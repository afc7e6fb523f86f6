#!/usr/bin/python3
"""chaos.py: fault-injection runs of zkelect against a real 3-node ZooKeeper
ensemble, checked by tests/chaos/checker.py (tests/chaos/README.md lists the
scenarios and the properties; docs/design.md states the promise they test).

    python3 tests/chaos/chaos.py [--trials N] [--scenario NAME ...] [--keep] [--jobs N]
                                 [--json FILE] [--out DIR] [--list]

Needs root: the run re-executes itself in a private network + mount namespace
(`unshare --net --mount`), starts the ensemble there (client ports on 0.0.0.0,
reachable only inside), and puts each candidate in its own child namespace
behind a veth pair (10.250.N.2 -> 10.250.N.1). Partitions are nftables drops
inside a candidate's namespace. Servers are partitioned from each other
(never from their clients) by net.QuorumFirewall: each server runs under its
own uid and nftables drops the packets of the connections between one server
and the others. Nothing is touched outside the run's own namespaces;
everything started is remembered by pid and killed by pid.

Scenarios (tests/chaos/README.md has the table): leader_kill9 (the
fail-stop watcher off: the session expires), agent_kill9_keeper (the
watcher, the keeper, alive: it closes the session once the term is over),
host_kill9 (the agent and its keeper die together: the session expires),
leader_sigstop (the fail-stop watcher off: the epoch's case),
leader_sigstop_guarded (the watcher on, as by default), partition_short,
partition_long, zk_leader_kill, quorum_loss, server_restart, cut_after_create,
hook_hang, folder_delete, and for issue 15 hostile_peer (a plain client
forges a leader claim in the folder), loop_stall (the leader's
policy blocks the loop in one C call for 3 T; the fail-stop watcher must end
the term), follower_isolated_s5 / _s20 (the leader's only server, a ZooKeeper
follower, black-holed from the other servers at syncLimit 5 / 20), and for
issue 34 daemon_escape / _frozen (the duty daemonizes), keeper_stop (the
leader's watcher stopped), state_duty / _frozen (the duty is state, a
marker in the fence's marker table, undone by on_stepdown or by the
agent's --fence; the leader SIGKILLed / frozen), log_stall (the leader's
log pipe stops being read, then it is partitioned for 2.5 T), and for
issue 38 quorum_link_stall (the quorum leader's data to the leader's
follower stalls, then that follower is cut off as the stall ends) and
zk_leader_blackhole (the quorum leader's host lost silently), and for
issue 39 balance_kill9 (a balance group of bench_many processes, killed,
restarted and leaving while the shares move; checker.GroupChecker). The
candidates get `--server-tick 200` when the binary has it.

Per scenario: start 3 candidates (c1 first, so c1 leads), wait for a leader,
steady window, fault, hold, heal all, recovery window (until one leader is
stable), stop the candidates with SIGTERM (the leader first), dump the
election children before and after the stop, merge every log (and the
servers' lines on sessions that ended: zk.jsonl) into one history and run
the checker. A failing trial's directory is kept and printed.

Environment:
  ZKELECT_BIN        zkelect binary (default <repo>/build/zkelect)
  FENCE_WRITER_BIN   fence_writer (default <repo>/build/tests/tools/fence_writer)
  ZK_JAR             ZooKeeper class path (default /usr/share/java/zookeeper.jar)
  BENCH_MANY_BIN     bench_many, balance_kill9's processes (default: bench/bench_many
                     beside ZKELECT_BIN)
Exit: 0 all trials passed, 1 some failed, 2 setup error, 64 usage, 77 not root.
"""
import argparse
import array
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import termios
import threading
import time
import traceback

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

import checker as CK  # noqa: E402
import ensemble as E  # noqa: E402
import history as HI  # noqa: E402
import net  # noqa: E402
import proxy as P  # noqa: E402
import zkharness as h  # noqa: E402

REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
FENCE_WRITER_BIN = os.path.abspath(os.environ.get("FENCE_WRITER_BIN") or os.path.join(
    REPO, "build", "tests", "tools", "fence_writer"))   # agents run elsewhere: absolute
POLICY_TEMPLATE = os.path.join(HERE, "policy.lua")
FENCE_PY = os.path.join(HERE, "fence.py")
HTTP_FLOOD_PY = os.path.join(HERE, "http_flood.py")
PROXY_PY = os.path.join(HERE, "proxy.py")

T_MS = 2000                 # requested session timeout of the candidates
TICK_MS = 200
SYNC_LIMIT = 5              # the ensemble's syncLimit unless a scenario asks for another
SERVER_UIDS = {1: 64101, 2: 64102, 3: 64103}   # one uid per server (QuorumFirewall)
H_MS = min(T_MS // 3, 5000)   # zkelect's default hook budget
STEADY_S = 2.0              # steady window before the fault
SETTLE_S = 2.0              # stable leader required after recovery
SCENARIO_BOUND_S = 90.0     # hard time bound of one scenario
POLL = 0.02
STALL_S = 0.7               # quorum_link_stall: the stall of L -> F, under syncLimit x tickTime (1 s)
LOG_PIPE_BYTES = 4096       # log_stall: the capacity of c1's log pipe (one page, the least)
BENCH_MANY_BIN = os.path.abspath(os.environ.get("BENCH_MANY_BIN") or os.path.join(
    os.path.dirname(h.ZKELECT_BIN), "bench", "bench_many"))    # the group scenarios' processes
GROUP_E = 24                # balance_kill9: the group's elections
GROUP_SETTLE_MS = 100       # balance_kill9: the group's settle delay (BENCH_MANY_SETTLE_MS)


# a server's log line on a session's end (slf4j simple logger, HH:mm:ss.SSS)
ZK_SESSION_RE = re.compile(r"^(\d\d):(\d\d):(\d\d)\.(\d\d\d) \[[^\]]*\] INFO \S+ - "
                           r"(Expiring session|Submitting global closeSession request for "
                           r"session) 0x([0-9a-fA-F]+)")


class SetupError(Exception):
    pass


class ScenarioTimeout(BaseException):
    pass


class Interrupted(BaseException):
    pass


def lua_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _preexec():
    """Children: own process group (a terminal's Ctrl-C reaches only the
    runner, which tears down by pid) and SIGKILL if the runner dies."""
    os.setpgid(0, 0)
    h._pdeathsig()


# --------------------------------------------------------------------------
# candidates


def make_candidate_class():
    class Candidate(h.Agent):
        """A zkelect candidate in its own network namespace."""

        def __init__(self, cid, netns, zkhosts, path, script, logdir, extra=(), flags=None,
                     log_pipe=False):
            self.netns = netns
            self.exit_rec = None
            self.log_pipe = log_pipe
            self.reader = None      # log_pipe: the `cat` between the agent and its log file
            self.pipe_r = None      # log_pipe: the harness's read end (FIONREAD only, never read)
            extra = list(extra)
            if flags is not None:
                if "--server-tick" in flags and "--server-tick" not in extra:
                    extra += ["--server-tick", str(TICK_MS)]
                extra = _supported(extra, flags)
            super().__init__(None, cid, path=path, script=script, session_timeout=T_MS,
                             zkhosts=zkhosts, extra=["--log-level", "debug"] + extra,
                             start=False)
            self.dir = logdir
            self.logfile = os.path.join(logdir, "%s.log" % cid)

        def argv(self):
            return self.netns.exec_prefix() + super().argv()

        def start(self):
            if not os.access(h.ZKELECT_BIN, os.X_OK):
                raise SetupError("zkelect binary not found or not executable: %s (set ZKELECT_BIN)"
                                 % h.ZKELECT_BIN)
            out = open(self.logfile, "wb")
            sink = out
            if self.log_pipe:
                # the agent's stdout and stderr go into a pipe of one page
                # that a `cat` of its own copies to the log file: stopping
                # the cat stalls the agent's log sink (log_stall), and the
                # lines it buffered arrive once the cat runs again
                r, sink = os.pipe()
                fcntl.fcntl(sink, fcntl.F_SETPIPE_SZ, LOG_PIPE_BYTES)
                self.reader = subprocess.Popen(["cat"], stdin=r, stdout=out,
                                               stderr=subprocess.DEVNULL, preexec_fn=_preexec)
                self.pipe_r = r
            self.t_start = time.time()
            self.proc = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL, stdout=sink,
                                         stderr=subprocess.STDOUT, cwd=self.dir, env=h._child_env(),
                                         preexec_fn=_preexec)
            out.close()
            if sink is not out:
                os.close(sink)
            self.pid = self.proc.pid
            threading.Thread(target=self._stamp_exit, daemon=True).start()
            return self

        def _stamp_exit(self):
            """The exit record at the moment the process ends (waitid with
            WNOWAIT: the zombie is left for Popen to reap), so that a
            candidate that dies on its own (its fail-stop watcher) closes its
            term when it died, not when the harness looked."""
            try:
                os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)
            except (ChildProcessError, OSError):
                return
            if self.exit_rec is None:
                self.exit_rec = {"mono_ns": time.monotonic_ns(), "wall": time.time(), "src": self.id,
                                 "pid": self.pid, "ev": "exit", "rc": self.proc.poll()}

        def alive(self):
            """Whether the process runs, without reaping it before its exit
            is stamped: Popen.poll() could reap it between its death and
            _stamp_exit's look, which would then find no child and stamp
            nothing (the term would look open until the run's end). An exit
            seen here is stamped here, the zombie left for Popen."""
            if self.proc is None or self.proc.returncode is not None:
                return False
            try:
                r = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return self.proc.poll() is None
            if r is None:
                return True
            if self.exit_rec is None:
                self.exit_rec = {"mono_ns": time.monotonic_ns(), "wall": time.time(), "src": self.id,
                                 "pid": self.pid, "ev": "exit",
                                 "rc": r.si_status if r.si_code == os.CLD_EXITED else -r.si_status}
            return False

        def pipe_unread(self):
            """Bytes waiting in the log pipe (log_pipe), None without one."""
            if self.pipe_r is None:
                return None
            buf = array.array("i", [0])
            fcntl.ioctl(self.pipe_r, termios.FIONREAD, buf)
            return buf[0]

        def drain_log(self, timeout=5.0):
            """log_pipe: lets the cat run and waits (bounded) until it ends,
            which it does at the pipe's end of file, once the agent and every
            process that shares its stderr (its watcher, its children) are
            gone: the log file is then whole. False if it had to be killed."""
            if self.reader is None:
                return True
            ok = True
            if self.reader.poll() is None:
                try:
                    os.kill(self.reader.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
                if h._wait_proc(self.reader, timeout) is None:
                    ok = False
                    self.reader.kill()
                    h._wait_proc(self.reader, 5.0)
            if self.pipe_r is not None:
                os.close(self.pipe_r)
                self.pipe_r = None
            return ok

        def role(self):
            """leader | follower | None, from the last role event."""
            role = None
            for e in self.events():
                ev = e.get("event")
                if ev in ("leader", "follower"):
                    role = ev
                elif ev in ("stepdown", "stopped"):
                    role = None
                elif ev == "session" and e.get("reason") == "expired":
                    role = None
            return role if self.alive() else None

    return Candidate


def _supported(extra, flags):
    """extra without the options (and their values) the binary does not know."""
    out = []
    i = 0
    while i < len(extra):
        a = extra[i]
        takes = i + 1 < len(extra) and not extra[i + 1].startswith("--")
        if a.startswith("--") and a not in flags and a in KNOWN_VALUED:
            i += 2 if takes else 1
            continue
        out.append(a)
        i += 1
    return out


KNOWN_VALUED = ("--server-tick", "--fail-stop", "--fence")


def agent_flags(binary):
    """The options `zkelect run --help` lists (set of '--name')."""
    try:
        p = subprocess.run([binary, "run", "--help"], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return set()
    return set(re.findall(r"(?m)^\s+(--[a-z][a-z-]*)", p.stdout.decode("utf-8", "replace")))


# --------------------------------------------------------------------------
# one run: ensemble + namespaces, reused by every scenario


class Run:
    def __init__(self, args):
        self.args = args
        self.tag = str(os.getpid())
        self.base = args.out or tempfile.mkdtemp(prefix="zkechaos-")
        self.ens_dir = None         # setup(): the ensemble's own folder
        os.makedirs(self.base, exist_ok=True)
        self.sockdir = tempfile.mkdtemp(prefix="zkechaos-s-")   # short paths for Unix sockets
        self.ens = None
        self.nets = []
        self.procs = []          # helper processes (fence, proxy) still to reap
        self.results = []
        self.degraded = False
        self.fence_writer = FENCE_WRITER_BIN if os.access(FENCE_WRITER_BIN, os.X_OK) else ""
        self.Candidate = make_candidate_class()
        self.cands = []
        self.flags = set()
        self.qfw = None

    # -- setup / teardown ----------------------------------------------------------

    def setup(self):
        if not os.access(h.ZKELECT_BIN, os.X_OK):
            raise SetupError("zkelect binary not found: %s (set ZKELECT_BIN)" % h.ZKELECT_BIN)
        if not self.fence_writer and not self.args.allow_degraded:
            raise SetupError("fence_writer not found: %s (set FENCE_WRITER_BIN, or --allow-degraded)"
                             % FENCE_WRITER_BIN)
        # trial directories of an earlier run into the same --out (only ours)
        names = {sc["name"] for sc in SCENARIOS}
        for d in os.listdir(self.base):
            m = re.match(r"^(.*)-(\d+)$", d)
            if m and m.group(1) in names and os.path.isdir(os.path.join(self.base, d)):
                shutil.rmtree(os.path.join(self.base, d), ignore_errors=True)
        self.flags = agent_flags(h.ZKELECT_BIN)
        t0 = time.monotonic()
        # the servers run as their own uids: they must reach their
        # directories, which a log folder inside a private tree (a 0700
        # temporary clone, say) does not let them: the ensemble lives in a
        # folder of its own under the system's temporary directory
        ens_dir = tempfile.mkdtemp(prefix="zkechaos-ensemble-")
        self.ens_dir = ens_dir
        # before the servers start: every quorum connection must be marked
        self.qfw = net.QuorumFirewall(SERVER_UIDS).create()
        self.ens = E.Ensemble(ens_dir, tick=TICK_MS, sync_limit=SYNC_LIMIT,
                              uids=[SERVER_UIDS[n] for n in (1, 2, 3)])
        os.makedirs(ens_dir, exist_ok=True)
        os.chmod(ens_dir, 0o755)
        self.ens.start(timeout=90)
        self.t_ensemble = time.monotonic() - t0
        for n in (1, 2, 3):
            self.nets.append(net.CandidateNet(n, self.tag).create())
        print("chaos: ensemble healthy in %.1fs (client ports %s, leader zk%d); zkelect %s "
              "(server-tick %s, fail-stop %s); logs %s"
              % (self.t_ensemble, [s.client_port for s in self.ens.servers],
                 self.ens.leader_index() + 1, h.ZKELECT_BIN,
                 "yes" if "--server-tick" in self.flags else "no",
                 "yes" if "--fail-stop" in self.flags else "no", self.base), flush=True)

    def kill_proc(self, p, sig=signal.SIGTERM, wait=5.0):
        if p is None or p.poll() is not None:
            return
        try:
            os.kill(p.pid, signal.SIGCONT)
            os.kill(p.pid, sig)
        except ProcessLookupError:
            return
        if h._wait_proc(p, wait) is None:
            try:
                os.kill(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            h._wait_proc(p, 5.0)

    def stop_candidates_hard(self):
        for c in self.cands:
            if c.alive():
                self.kill_proc(c.proc, signal.SIGKILL)

    def teardown(self):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        self.stop_candidates_hard()
        for p in self.procs:
            self.kill_proc(p)
        if self.ens is not None:
            try:
                self.ens.close()
            except Exception:
                traceback.print_exc()
        for n in self.nets + ([self.qfw] if self.qfw else []):
            try:
                n.delete()
            except Exception:
                traceback.print_exc()
        shutil.rmtree(self.sockdir, ignore_errors=True)

    # -- helpers -------------------------------------------------------------------

    def policy(self, tdir, cid, sock, hang=False, stall_ms=0, stall_after=0.0, daemonize=False,
               marker=False, counter=""):
        with open(POLICY_TEMPLATE) as f:
            text = f.read()
        begin, end = "-- CHAOS-CONFIG-BEGIN", "-- CHAOS-CONFIG-END"
        i, j = text.index(begin), text.index(end)
        cfg = ("%s\nlocal CFG = {\n  fence_writer = %s,\n  fence_socket = %s,\n"
               "  fence_interval_ms = 50,\n  action_every = 0.05,\n  hang_on_leader = %s,\n"
               "  stall_ms = %d,\n  stall_after = %.3f,\n  daemonize = %s,\n  marker = %s,\n"
               "  counter = %s,\n}\n"
               % (begin, lua_str(self.fence_writer), lua_str(sock), "true" if hang else "false",
                  int(stall_ms), float(stall_after), "true" if daemonize else "false",
                  "true" if marker else "false", lua_str(counter)))
        path = os.path.join(tdir, "policy-%s.lua" % cid)
        with open(path, "w") as f:
            f.write(text[:i] + cfg + text[j:])
        return path

    def start_helper(self, args, name, tdir):
        out = open(os.path.join(tdir, name + ".out"), "wb")
        p = subprocess.Popen([sys.executable] + args, stdin=subprocess.DEVNULL, stdout=out,
                             stderr=subprocess.STDOUT, preexec_fn=_preexec,
                             env=dict(h._child_env(), PYTHONDONTWRITEBYTECODE="1"))
        out.close()
        self.procs.append(p)
        return p

    def heal_all(self, t):
        """Jepsen's final generator: every fault undone."""
        for n in self.nets:
            n.heal()
        if self.qfw:
            self.qfw.heal()
        for c in t.cands:
            if c.alive():
                c.sigcont()
            if c.reader is not None and c.reader.poll() is None:
                os.kill(c.reader.pid, signal.SIGCONT)
        if t.proxy_ctl:
            try:
                P.control(t.proxy_ctl, "disarm")
            except OSError:
                pass
        self.ens.ensure_all_running()

    # -- scenarios -----------------------------------------------------------------

    def run_trial(self, sc, trial):
        name = sc["name"]
        tdir = os.path.join(self.base, "%s-%d" % (name, trial))
        if os.path.exists(tdir):
            shutil.rmtree(tdir)
        os.makedirs(tdir)
        t = Trial(self, sc, trial, tdir)
        t0 = time.monotonic()
        err = None

        def on_alarm(signum, frame):
            raise ScenarioTimeout("scenario %s exceeded %.0fs" % (name, SCENARIO_BOUND_S))
        signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, SCENARIO_BOUND_S)
        try:
            t.run()
        except (Interrupted, KeyboardInterrupt):
            signal.setitimer(signal.ITIMER_REAL, 0)
            raise
        except BaseException:
            signal.setitimer(signal.ITIMER_REAL, 0)
            err = traceback.format_exc()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        try:
            t.finish(err)
        except (Interrupted, KeyboardInterrupt):
            raise
        except BaseException:
            err = (err or "") + traceback.format_exc()
            t.problems.append("finish failed")
        res = t.result(err, time.monotonic() - t0)
        self.results.append(res)
        if res["verdict"] == "pass" and not self.args.keep:
            shutil.rmtree(tdir, ignore_errors=True)
        return res


# --------------------------------------------------------------------------
# one trial of one scenario


class Trial:
    def __init__(self, run, sc, trial, tdir):
        self.run_ = run
        self.sc = sc
        self.trial = trial
        self.tdir = tdir
        self.ens = run.ens
        self.rec = HI.Recorder()
        self.path = "/chaos/%s-%d" % (sc["name"], trial)
        self.cands = []
        self.proxy_ctl = None
        self.proxy_log = None
        self.proxy_ports = []
        self.fence_proc = None
        self.proxy_proc = None
        self.problems = []       # harness-level failures (exit codes, fault not injected ...)
        self.notes = {}
        self.summary = None
        self.sock = os.path.join(run.sockdir, "fence-%s-%d.sock" % (sc["name"][:12], trial))
        self.fence_log = os.path.join(tdir, "fence.jsonl")
        self.zk_log = os.path.join(tdir, "zk.jsonl")
        self.zk_log_at = {}      # server index -> its log's size when the trial began
        self.stopped = False
        self.group = []          # the group scenarios' bench_many processes (GroupProc)

    # -- candidates ------------------------------------------------------------------

    def zkhosts(self, n, proxied):
        cn = self.run_.nets[n - 1]
        if proxied:
            return ",".join("%s:%d" % (cn.host_ip, p) for p in self.proxy_ports)
        return self.ens.connect_string(for_namespace=cn)

    def fence_cmd(self):
        """The agents' --fence command of the marker variant: a script that
        removes the candidate's marker (`fence_writer --mark clear SOCKET`;
        the watcher appends EPOCH REASON, and ZKELECT_ID, ZKELECT_EPOCH,
        ZKELECT_REASON are in its environment)."""
        path = os.path.join(self.tdir, "fence-marker.sh")
        if not os.path.exists(path):
            with open(path, "w") as f:
                f.write("#!/bin/sh\n# the --fence of the chaos suite's marker variant\n"
                        "exec %s --mark clear %s \"$@\"\n" % (self.run_.fence_writer, self.sock))
            os.chmod(path, 0o755)
        return path

    def new_candidate(self, n, proxied=False, hang=False, extra=(), servers=None, stall_ms=0,
                      stall_after=0.0, daemonize=False, marker=False, fence=False, log_pipe=False,
                      counter=""):
        """servers: 0-based indexes of the only servers it may connect to;
        marker: the policy's state duty (policy.lua); fence: --fence removes
        the marker; log_pipe: the agent logs into a pipe the harness can
        stall (Candidate.start)."""
        cid = "c%d" % n
        script = self.run_.policy(self.tdir, cid, self.sock, hang=hang, stall_ms=stall_ms,
                                  stall_after=stall_after, daemonize=daemonize, marker=marker,
                                  counter=counter)
        if fence:
            extra = list(extra) + ["--fence", self.fence_cmd()]
        if servers is not None:
            zkhosts = self.ens.connect_string(for_namespace=self.run_.nets[n - 1],
                                              ports=[self.ens.servers[i].client_port for i in servers])
        else:
            zkhosts = self.zkhosts(n, proxied)
        c = self.run_.Candidate(cid, self.run_.nets[n - 1], zkhosts, self.path,
                                script, self.tdir, extra=extra, flags=self.run_.flags,
                                log_pipe=log_pipe)
        self.cands.append(c)
        self.run_.cands.append(c)
        c.start()
        if c.reader is not None:
            self.run_.procs.append(c.reader)
        return c

    def start_candidates(self, proxied=(), hang=(), wait_role=True, extra=(), daemonize=False,
                         marker=False, fence=False, counter=""):
        """c1, c2, c3 one after another (each after the previous joined), so
        sequence order is start order and c1 leads."""
        for n in (1, 2, 3):
            c = self.new_candidate(n, proxied=n in proxied, hang=n in hang, extra=extra,
                                   daemonize=daemonize, marker=marker, fence=fence, counter=counter)
            c.wait_for("joined", timeout=15)
        if wait_role:
            self.wait_stable(timeout=15, settle=0)

    def live(self):
        return [c for c in self.cands if c.alive()]

    def roles(self):
        return {c.id: c.role() for c in self.live()}

    def leader(self):
        ls = [c for c in self.live() if c.role() == "leader"]
        return ls[0] if len(ls) == 1 else None

    def stable_now(self):
        r = self.roles()
        vals = list(r.values())
        return bool(r) and vals.count("leader") == 1 and vals.count("follower") == len(vals) - 1

    def wait_stable(self, timeout, settle=SETTLE_S, record=False):
        """Waits (bounded) until exactly one live candidate leads and all the
        others follow; with settle > 0 then keeps a steady window of `settle`
        seconds (recorded as steady_begin/steady_end when record). Returns
        the seconds it took to become stable, or None."""
        t0 = time.monotonic()
        try:
            h.wait_until(self.stable_now, timeout=timeout, desc="one leader, others followers")
        except h.Timeout:
            self.notes.setdefault("unstable", []).append(self.roles())
            return None
        took = time.monotonic() - t0
        if settle > 0:
            if record:
                self.rec.emit("steady_begin")
            time.sleep(settle)
            if record:
                self.rec.emit("steady_end")
        return took

    def steady(self):
        return self.wait_stable(timeout=10, settle=STEADY_S, record=True)

    # -- faults ------------------------------------------------------------------

    def fault_begin(self, kind, target=None, **f):
        self.rec.emit("fault_begin", kind=kind, target=target, **f)

    def fault_end(self, kind):
        self.rec.emit("fault_end", kind=kind)

    def client_ports(self):
        return [s.client_port for s in self.ens.servers] + list(self.proxy_ports)

    def server_of(self, c):
        """0-based index of the server c is connected to (from `cons`), or None."""
        ip = c.netns.ns_ip
        for i, s in enumerate(self.ens.servers):
            if s.running() and ip in s.connections():
                return i
        return None

    # -- lifecycle -------------------------------------------------------------------

    def start_fence(self):
        self.fence_proc = self.run_.start_helper([FENCE_PY, self.sock, self.fence_log], "fence", self.tdir)
        h.wait_until(lambda: os.path.exists(self.sock), timeout=10, desc="fence socket")

    def start_proxy(self):
        self.proxy_ports = E.free_ports(3, host="0.0.0.0")
        self.proxy_ctl = os.path.join(self.run_.sockdir, "proxy-%d.ctl" % self.trial)
        self.proxy_log = os.path.join(self.tdir, "proxy.jsonl")
        maps = ["0.0.0.0:%d=127.0.0.1:%d" % (pp, s.client_port)
                for pp, s in zip(self.proxy_ports, self.ens.servers)]
        self.proxy_proc = self.run_.start_helper([PROXY_PY, "--control", self.proxy_ctl, "--log",
                                                  self.proxy_log] + maps, "proxy", self.tdir)
        h.wait_until(lambda: os.path.exists(self.proxy_ctl), timeout=10, desc="proxy control socket")

    def run(self):
        self.ens.ensure_all_running()
        dt = self.ens.set_sync_limit(self.sc.get("sync_limit", SYNC_LIMIT))
        if dt:
            self.notes["ensemble_restart_s"] = round(dt, 1)
        self.ens.wait_healthy(60)
        for srv in self.ens.servers:
            try:
                self.zk_log_at[srv.index] = os.path.getsize(srv.log)
            except OSError:
                self.zk_log_at[srv.index] = 0
        self.rec.emit("meta", boot_id=HI.boot_id())
        self.rec.emit("config", T_ms=T_MS, tick_ms=TICK_MS, H_ms=H_MS, scenario=self.sc["name"],
                      trial=self.trial, path=self.path, zkelect=h.ZKELECT_BIN,
                      sync_limit=self.ens.sync_limit,
                      server_tick=TICK_MS if "--server-tick" in self.run_.flags else None,
                      fail_stop="--fail-stop" in self.run_.flags)
        self.start_fence()
        if self.sc.get("proxy"):
            self.start_proxy()
        self.sc["fn"](self)

    def stop_all(self):
        """Graceful stop: the leader first (handover measured), then the rest."""
        if self.stopped:
            return
        self.stopped = True
        live = self.live()
        self.rec.emit("final_children", phase="live", path=self.path, live=[c.id for c in live],
                      children=self.children())
        self.rec.emit("phase", name="stop")
        lead = self.leader()
        order = ([lead] if lead else []) + [c for c in live if c is not lead]
        for i, c in enumerate(order):
            marks = {o: o.mark() for o in order[i + 1:]}
            t_term = time.monotonic_ns()
            c.term()
            rc = h._wait_proc(c.proc, 10.0)
            if rc is None:
                self.problems.append("%s did not exit within 10 s of SIGTERM" % c.id)
                self.run_.kill_proc(c.proc, signal.SIGKILL)
                rc = c.proc.returncode
            elif rc != 0:
                self.problems.append("%s exited with %s after SIGTERM (expected 0)" % (c.id, rc))
            if c is lead and order[i + 1:]:
                # graceful handover: the next candidate should lead within ms
                try:
                    nl = h.wait_until(lambda: [e for o in order[i + 1:] for e in o.events()[marks[o]:]
                                               if e.get("event") == "leader"], timeout=5)
                    self.notes["handover_ms"] = round((nl[0]["mono_ns"] - t_term) / 1e6, 1)
                except h.Timeout:
                    self.problems.append("no handover within 5 s after SIGTERM of leader %s" % c.id)
        self.rec.emit("final_children", phase="after_stop", path=self.path, live=[],
                      children=self.children())

    def children(self):
        try:
            kids = self.ens.children_with_owner(self.path) or []
        except (OSError, E.ZKError) as e:
            self.problems.append("could not list %s: %s" % (self.path, e))
            return []
        return [{"name": k["name"], "owner": k["owner"]} for k in kids]

    def finish(self, err):
        """Heal, stop, collect, check. Runs even after an error."""
        run = self.run_
        if self.sc.get("group"):
            return self.finish_group(err)
        try:
            run.heal_all(self)
            self.ens.wait_healthy(60)
        except Exception as e:
            self.problems.append("heal: %s" % e)
        if err is None:
            self.stop_all()
        for c in self.cands:
            if c.alive():
                run.kill_proc(c.proc, signal.SIGKILL)
            if not c.drain_log():
                self.problems.append("%s's log reader did not end within 5 s of the agent's end"
                                     % c.id)
            c._read()
            if c.exit_rec is None and c.proc is not None:
                c.exit_rec = {"mono_ns": time.monotonic_ns(), "wall": time.time(), "src": c.id,
                              "pid": c.pid, "ev": "exit", "rc": c.proc.returncode}
            marks = h.crash_markers("\n".join(c.other_lines()))
            if marks:
                self.problems.append("%s: crash markers %s" % (c.id, marks))
        for p in (self.fence_proc, self.proxy_proc):
            run.kill_proc(p)
        self.kill_orphan_writers()
        self.check_duties()
        agents = [(c.id, c.pid, c.events(), c.exit_rec) for c in self.cands]
        self.zk_session_ends()
        extra = [self.fence_log, self.zk_log] + ([self.proxy_log] if self.proxy_log else [])
        self.history = os.path.join(self.tdir, "history.jsonl")
        HI.write_history(self.history, self.rec, agents, extra)
        if err is None:
            recs = CK.load([self.history])
            ck = CK.Checker(recs)
            self.summary = ck.run()
            with open(os.path.join(self.tdir, "summary.json"), "w") as f:
                json.dump(self.summary, f, indent=1, default=str)
            with open(os.path.join(self.tdir, "timeline.csv"), "w") as f:
                f.write(ck.timeline_csv())
        for c in self.cands:
            run.cands.remove(c)

    # -- the group scenarios: bench_many processes of one balance group ------------

    def group_start(self, name):
        g = GroupProc(self, name)
        self.group.append(g)
        self.run_.procs.append(g.proc)
        return g

    def group_kill(self, g):
        """SIGKILL of the process alone (its keeper lives and closes its
        session): its terms end at the signal (the checker's killed)."""
        r = self.rec.emit("killed", target=g.name, signal="KILL")
        os.kill(g.pid, signal.SIGKILL)
        r["sent_ns"] = time.monotonic_ns()
        g.killed = True
        h._wait_proc(g.proc, 5.0)

    def group_live(self):
        return [g for g in self.group if not g.killed and g.proc.poll() is None and not g.leaving]

    def group_settled(self):
        """Every live process's last group line: exactly the live ones,
        nothing moving, its target led (and its own leader lines agree),
        the targets summing to E."""
        live = self.group_live()
        for g in self.group:
            g.poll()
        if not live:
            return False
        for g in live:
            st = g.state
            if st is None or st.get("members") != len(live) or st.get("moving") != 0 or \
                    st.get("leads") != st.get("target") or len(g.led) != st.get("target"):
                return False
        return sum(g.state["target"] for g in live) == GROUP_E

    def finish_group(self, err):
        """The group scenarios' end: stop every process ("quit"), reap, the
        keepers gone, then the history (the processes' lines and the
        harness's records) through checker.GroupChecker."""
        run = self.run_
        self.rec.emit("phase", name="stop")
        for g in self.group:
            if g.proc.poll() is None:
                g.send("quit")
        for g in self.group:
            rc = h._wait_proc(g.proc, 10.0)
            if rc is None:
                self.problems.append("%s did not exit within 10 s of quit" % g.name)
                run.kill_proc(g.proc, signal.SIGKILL)
            elif rc != 0 and not g.killed:
                self.problems.append("%s exited with %s (expected 0)" % (g.name, rc))
            g.exit_ns = g.exit_ns or time.monotonic_ns()
        for g in self.group:
            for w in g.watchers():
                try:
                    h.wait_until(lambda: not h.pid_alive(w), timeout=5, desc="keeper %d's end" % w)
                except h.Timeout:
                    self.problems.append("%s's keeper (pid %d) outlived it by 5 s" % (g.name, w))
                    try:
                        os.kill(w, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            g.poll()
            marks = h.crash_markers(g.stderr())
            if marks:
                self.problems.append("%s: crash markers %s" % (g.name, marks))
        recs = list(self.rec.recs)
        for g in self.group:
            recs.extend(g.recs)
            recs.append({"mono_ns": g.exit_ns, "wall": None, "src": g.name, "pid": g.pid,
                         "ev": "exit", "rc": g.proc.returncode})
        recs.sort(key=lambda r: r["mono_ns"])
        self.history = os.path.join(self.tdir, "history.jsonl")
        with open(self.history, "w") as f:
            for r in recs:
                f.write(json.dumps(r, separators=(",", ":"), default=str) + "\n")
        if err is None:
            self.summary = CK.GroupChecker(CK.load([self.history])).run()
            with open(os.path.join(self.tdir, "summary.json"), "w") as f:
                json.dump(self.summary, f, indent=1, default=str)
        self.notes["terms"] = (self.summary or {}).get("metrics", {}).get("terms")

    def zk_session_ends(self):
        """The servers' log lines on sessions that ended during the trial
        (ZK_SESSION_RE) as the checker's zk session_end records, in zk.jsonl:
        "expired" from `Expiring session` (the quorum leader's), "closed" from
        `Submitting global closeSession request` of a session that no server
        expired before. The servers stamp their lines with the wall clock to
        the ms (local time, no date); the record's mono_ns is that time moved
        onto CLOCK_MONOTONIC by the harness's own offset, at most about a ms
        early (the checker's zk_clock_ms)."""
        off = time.time_ns() - time.monotonic_ns()
        now = time.time()
        today = time.localtime(now)
        ends = {}
        for srv in self.ens.servers:
            try:
                with open(srv.log, "rb") as f:
                    f.seek(self.zk_log_at.get(srv.index, 0))
                    text = f.read().decode("utf-8", "replace")
            except OSError:
                continue
            for line in text.splitlines():
                m = ZK_SESSION_RE.match(line)
                if not m:
                    continue
                hh, mm, ss, msec, what, sess = m.groups()
                sec = time.mktime((today.tm_year, today.tm_mon, today.tm_mday, int(hh), int(mm),
                                   int(ss), 0, 0, -1))
                if sec > now + 3600:
                    sec -= 86400                        # a line from before midnight
                wall_ns = int(sec) * 10 ** 9 + int(msec) * 10 ** 6
                how = "expired" if what.startswith("Expiring") else "closed"
                key = int(sess, 16)
                r = {"mono_ns": wall_ns - off, "wall": round(wall_ns / 1e9, 3), "src": "zk",
                     "pid": srv.pid or 0,
                     "ev": "session_end", "session": "0x%x" % key, "how": how,
                     "server": "zk%d" % srv.index}
                old = ends.get(key)
                # an expiry wins over the close it submits; else the first
                if old is None or (how == "expired" and old["how"] == "closed") or \
                        (how == old["how"] and r["mono_ns"] < old["mono_ns"]):
                    ends[key] = r
        with open(self.zk_log, "w") as f:
            for r in sorted(ends.values(), key=lambda r: r["mono_ns"]):
                f.write(json.dumps(r) + "\n")
        self.notes["zk_session_ends"] = len(ends)

    def kill_orphan_writers(self):
        """fence_writer processes still alive after their agents are gone:
        killed by pid (learned by the fence through SO_PEERCRED)."""
        pids = {r.get("peer_pid") for r in HI.read_jsonl(self.fence_log) if r.get("peer_pid")}
        for pid in sorted(pids):
            try:
                with open("/proc/%d/cmdline" % pid, "rb") as f:
                    cmd = f.read()
            except OSError:
                continue
            if b"fence_writer" in cmd:
                self.problems.append("fence_writer pid %d outlived its agent" % pid)
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def check_duties(self):
        caps = {}
        for c in self.cands:
            for e in c.events():
                m = re.match(r"policy caps every=(\w+) spawn=(\w+)", e.get("msg") or "")
                if e.get("event") == "script" and m:
                    caps[c.id] = (m.group(1) == "true", m.group(2) == "true")
        full = caps and all(a and b for a, b in caps.values())
        self.notes["api"] = "full" if full else "degraded"
        silent = [c.id for c in self.cands if c.id not in caps]
        if silent:
            # an agent that never loaded the policy did not start at all (a
            # binary that cannot be executed) or died first: say that, not
            # "lacks zkelect.every"
            for c in self.cands:
                if c.id in silent:
                    code = c.proc.poll() if c.proc is not None else None
                    tail = (c.other_lines() or [""])[-1][:300]
                    self.problems.append("agent %s never loaded the policy (exit code %s; %s): "
                                         "did %s start?" % (c.id, code, tail or "no output",
                                                            h.ZKELECT_BIN))
        elif not full:
            self.run_.degraded = True
            if not self.run_.args.allow_degraded:
                self.problems.append("agent lacks zkelect.every/zkelect.spawn (policy caps %s); "
                                     "use --allow-degraded to run anyway" % caps)
        accepts = [r for r in HI.read_jsonl(self.fence_log) if r.get("ev") == "accept"]
        self.notes["fence_accepts"] = len(accepts)
        if full and self.run_.fence_writer and not accepts:
            self.problems.append("no fence write was accepted: the leader's duty process did not run")

    def result(self, err, seconds):
        s = self.summary
        failed = list(s["failed"]) if s else []
        verdict = "pass" if (s and s["verdict"] == "pass" and not self.problems and not err) else "fail"
        m = s["metrics"] if s else {}
        takes = [f.get("t_take_ms") for f in m.get("faults", []) if f.get("t_take_ms") is not None]
        return {"scenario": self.sc["name"], "trial": self.trial, "verdict": verdict,
                "failed_properties": failed, "harness_problems": self.problems, "error": err,
                "seconds": round(seconds, 1), "dir": self.tdir, "overlaps": m.get("overlaps"),
                "overlap_ms_max": m.get("overlap_ms_max"), "t_take_ms": takes,
                "flaps": m.get("flaps"), "orphans": m.get("orphans"),
                "fence_rejects": m.get("fence_rejects"), "notes": self.notes,
                "checker": s}


# --------------------------------------------------------------------------
# scenarios (reference §2 fault matrix)

def _leader_or_fail(t):
    lead = t.leader()
    if lead is None:
        raise AssertionError("no single leader before the fault: %s" % t.roles())
    return lead


def _marker_set(t, lead):
    """The marker variant: the leader's on_leader set its marker (its log
    says so) before the fault; the expectation that the fence removes it."""
    if "--fence" not in t.run_.flags:
        t.problems.append("%s has no --fence: the marker of a killed term is not removed"
                          % h.ZKELECT_BIN)
    try:
        ev = lead.wait_for(lambda e: e.get("event") == "script" and
                           (e.get("msg") or "").startswith("marker set"), timeout=5)
    except h.Timeout:
        raise AssertionError("%s logged no marker set" % lead.id)
    if "ok=true" not in ev["msg"]:
        raise AssertionError("%s could not set its marker: %s" % (lead.id, ev["msg"]))
    return [{"type": "marker_cleared", "target": lead.id, "via": ["fence"]}]


def _fence_outcome(t, lead):
    """The marker variant: the watcher's line on its fence run (notes)."""
    try:
        ev = h.wait_until(lambda: lead.find(lambda e: e.get("event") == "fail_stop" and
                                            "the fence for term" in (e.get("msg") or "")),
                          timeout=5, desc="the watcher's fence line")
        t.notes["fence"] = ev[0]["msg"]
    except h.Timeout:
        t.notes["fence"] = None


KEEPER_CLOSE_MS = T_MS // 4    # agent_kill9_keeper: the successor leads within this of the kill


def _stopped(pid, timeout=2.0):
    """Waits (bounded) until pid is stopped (state T or t in /proc/PID/stat):
    False if it is not within timeout (or is gone)."""
    for _ in range(int(timeout / 0.001) + 10):
        try:
            with open("/proc/%d/stat" % pid) as f:
                if f.read().rsplit(")", 1)[-1].split()[0] in ("T", "t"):
                    return True
        except OSError:
            return False
        time.sleep(0.001)
    return False


def _kill_frozen(t, lead, also=()):
    """SIGKILL of lead, and of the pids in `also` with it: each is SIGSTOPped
    first (lead first, then the others in order) and seen stopped, then
    `killed` is stamped, then each gets SIGKILL (the others first, lead
    last), and the record gets sent_ns once they are sent. The others die
    first: a stopped process whose parent dies is left in a newly orphaned
    process group, which the kernel sends SIGHUP and SIGCONT (POSIX), so a
    keeper killed after its agent ran again, said its agent was gone and
    began its close before its own SIGKILL came 98 ms later (host_kill9,
    1 of 24); the stopped lead cannot see them die. The stamp falls where the victims can no longer act
    and are not dead yet: nothing of theirs is stamped after it (a stamp
    taken before a plain SIGKILL let a preempted harness see an action 3.9
    ms "after" the kill: S5 failed on the harness's order), and nothing
    that follows their death (the keeper's close, a successor that leads
    tens of ms after the kill) is stamped before it, however late the harness
    runs (a stamp taken after the signal could be). S1 counts its slack for
    the dead term's writes from sent_ns."""
    pids = [lead.pid] + list(also)
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
        if not _stopped(pid):
            t.problems.append("pid %d did not stop within 2 s of its SIGSTOP" % pid)
    rec = t.rec.emit("killed", target=lead.id, signal=9, **({"also": list(also)} if also else {}))
    for pid in reversed(pids):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    rec["sent_ns"] = time.monotonic_ns()
    return rec


def _kill9(t, kind="kill9", extra=(), daemonize=False, marker=False, fence=False, keeper=None,
           fault=None, expect=()):
    """The leader SIGKILLed while its duty writes (_kill_frozen). marker:
    the state duty, with --fence (fence: --fence alone). keeper: None (not
    looked at), "alive" (it must exist: it outlives the agent), "dies" (it
    is frozen and killed with the agent: a host's crash). fault: more
    fields of the fault (bounds); expect: more expectations."""
    t.start_candidates(extra=extra, daemonize=daemonize, marker=marker, fence=marker or fence)
    t.steady()
    lead = _leader_or_fail(t)
    more = _marker_set(t, lead) if marker else []
    w = None
    if keeper is not None:
        if "--fail-stop" not in t.run_.flags:
            t.problems.append("%s has no --fail-stop: no keeper" % h.ZKELECT_BIN)
        w = _watcher_of(lead)
        if w is None:
            t.problems.append("fault not injected: %s has no keeper (zkelect-guard)" % lead.id)
    t.fault_begin(kind, lead.id, l2=True, **dict(fault or {}),
                  expect=[{"type": "leader_change"}, {"type": "epoch_up"}] + list(expect) + more)
    _kill_frozen(t, lead, also=[w] if keeper == "dies" and w is not None else [])
    h._wait_proc(lead.proc, 10.0)
    lead.exit_rec = {"mono_ns": time.monotonic_ns(), "wall": time.time(), "src": lead.id,
                     "pid": lead.pid, "ev": "exit", "rc": lead.proc.returncode}
    if keeper == "dies" and w is not None:
        try:
            h.wait_until(lambda: not h.pid_alive(w), timeout=5, desc="the keeper's end")
        except h.Timeout:
            t.problems.append("%s's keeper (pid %d) lived on after its SIGKILL" % (lead.id, w))
    t.fault_end(kind)
    t.wait_stable(timeout=3 * T_MS / 1000.0 + 5, record=True)
    if marker or fence:
        _fence_outcome(t, lead)
    return lead


def _keeper_lines(c, text):
    return [e for e in c.events() if e.get("event") == "fail_stop" and text in (e.get("msg") or "")]


def _audit_history(t, killed):
    """The terms the candidates recorded (--history), judged by `zkelect
    history --json`: no overlap and no epoch backwards, and the killed
    leader's term raised as ended without a step-down."""
    code, out, err, _ = h.run([h.ZKELECT_BIN, "history", "--zk", t.ens.connect_string(), "--path",
                               t.path, "--json"], timeout=15)
    if code != 0:
        t.problems.append("zkelect history exited %s: %s" % (code, (err or out).strip()[:300]))
        return
    doc = json.loads(out)
    kinds = [(f["kind"], f["epoch"]) for f in doc["findings"]]
    t.notes["history"] = {"terms": len(doc["terms"]), "findings": kinds}
    bad = [k for k in kinds if k[0] != "no_stepdown"]
    if bad:
        t.problems.append("the history's audit raised %s" % bad)
    ep = (killed.last("leader") or {}).get("epoch")
    if ("no_stepdown", ep) not in kinds:
        t.problems.append("the killed leader's term (epoch %s) is not raised as no_stepdown: %s"
                          % (ep, kinds))


def sc_leader_kill9(t):
    """The leader SIGKILLed with --fail-stop off (no keeper): nobody
    closes its session, the successor leads once a server expired it
    (session_expired), within L2's T + tick + 0.5 s: the bare recipe's
    crash failover, as before the keeper closed sessions. The candidates
    record their terms (--history): the audit's judgement of them raises
    no overlap, no epoch backwards, and the killed term as no_stepdown."""
    lead = _kill9(t, extra=["--fail-stop", "off", "--history"],
                  expect=[{"type": "session_expired", "silent": True}])
    _audit_history(t, lead)


def sc_agent_kill9_keeper(t):
    """The leading agent's process alone SIGKILLed while its duty writes,
    its keeper (zkelect-guard) alive, with --fence (a command that has no
    marker to remove: the state duty is state_duty's, whose graceful stop
    waits for a marker's removal): the keeper kills the duty's groups, runs
    the fence, then closes the session (session_closed): the successor
    leads after every keeper line before the close (the fence's among
    them) and after the server took it, within T/4 of the kill
    (KEEPER_CLOSE_MS: no expiry can come that early, the dead session's
    last touch being younger than T/3, as in integration.kill9), and the
    server logged no expiry of it. The two
    terms do not overlap: S2 and S7 (the old duty's last write before the
    new duty's first, at the fence's stamps) with a zero bound."""
    lead = _kill9(t, fence=True, keeper="alive", fault=dict(s2_bound_ms=0, duty_bound_ms=0),
                  expect=[{"type": "gap_positive"},
                          {"type": "session_closed", "within_ms": KEEPER_CLOSE_MS}])
    try:
        line = h.wait_until(lambda: _keeper_lines(lead, "is closed"), timeout=5,
                            desc="the keeper's close line")[0]
        t.notes["keeper_close"] = line["msg"]
    except h.Timeout:
        t.notes["keeper_close"] = [e.get("msg") for e in _keeper_lines(lead, "session")]


def sc_host_kill9(t):
    """A host's crash: the leading agent and its keeper die together
    (SIGSTOP the agent, then its keeper, then SIGKILL the keeper, then the
    agent: a keeper stopped or killed while the agent runs would be seen
    by the agent, which would step down at once and release its node; one
    killed after the agent would be resumed by the kernel, _kill_frozen).
    Nobody closes the session and the keeper says nothing (silent): a
    server expires it, and the successor leads only after that
    (session_expired); S2 and S7 with a zero bound."""
    _kill9(t, kind="host_kill9", keeper="dies", fault=dict(s2_bound_ms=0, duty_bound_ms=0),
           expect=[{"type": "gap_positive"}, {"type": "session_expired", "silent": True}])


def sc_leader_sigstop(t):
    # the epoch's case: the paused leader's writer runs on and is fenced, the
    # leader steps down on resume. Without the fail-stop watcher, which would
    # kill both before the successor leads (integration.failstop).
    t.start_candidates(extra=["--fail-stop", "off"])
    t.steady()
    lead = _leader_or_fail(t)
    t.fault_begin("sigstop", lead.id, l2=True, s2p=True, expect_rejects=True,
                  expect=[{"type": "leader_change"}])
    t.rec.emit("paused", target=lead.id)
    lead.sigstop()
    time.sleep(2.5 * T_MS / 1000.0)
    t.rec.emit("resumed", target=lead.id)     # before SIGCONT: nothing of lead's can precede it
    lead.sigcont()
    t.fault_end("sigstop")
    t.wait_stable(timeout=3 * T_MS / 1000.0 + 5, record=True)


def sc_leader_sigstop_guarded(t, daemonize=False, marker=False):
    """The agent alone frozen, with the fail-stop watcher at its default
    (`agent`): the watcher, which is not stopped, SIGKILLs the term's groups
    (the duty, fence_writer) and the agent at the term's hard end, before
    the successor can lead. No overlap (zero bound), no duty overlap, and
    the successor leads once the watcher, the agent gone, closed c1's
    session (its "is closed" line; or once a server expired it, if the close
    came too late)."""
    if "--fail-stop" not in t.run_.flags:
        t.problems.append("%s has no --fail-stop (the watchdog guard): the pause is not guarded"
                          % h.ZKELECT_BIN)
    t.start_candidates(daemonize=daemonize, marker=marker, fence=marker)
    t.steady()
    lead = _leader_or_fail(t)
    more = _marker_set(t, lead) if marker else []
    t.fault_begin("sigstop", lead.id, l2=True, s2_bound_ms=0, duty_bound_ms=0,
                  expect=[{"type": "leader_change"}, {"type": "gap_positive", "target": lead.id},
                          {"type": "exited", "target": lead.id}] + more)
    t.rec.emit("paused", target=lead.id)
    lead.sigstop()
    others = [c for c in t.cands if c is not lead]
    T = T_MS / 1000.0
    try:
        h.wait_until(lambda: any(_leads(c) for c in others), timeout=3 * T + 5,
                     desc="a successor leads")
    except h.Timeout:
        t.problems.append("no successor led within %.0f s of the pause" % (3 * T + 5))
    try:
        h.wait_until(lambda: not lead.alive(), timeout=5, desc="the frozen leader killed")
    except h.Timeout:
        t.problems.append("the frozen leader was not killed by its watcher")
        t.rec.emit("resumed", target=lead.id)
        lead.sigcont()
    t.notes["c1_exit_rc"] = lead.proc.poll()
    t.fault_end("sigstop")
    t.wait_stable(timeout=3 * T + 5, record=True)
    if marker:
        _fence_outcome(t, lead)


def sc_daemon_escape(t):
    """The duty is a daemon (`setsid -f fence_writer`: out of the spawned
    process's group and session, as nginx, `pg_ctl start` or sudo leave
    theirs): the leader SIGKILLed, its watcher kills the term's cgroup at
    once. A daemon that outlived the term would write after the kill (S1:
    a fence accept from the term of a killed candidate) and outlive its
    agent. The final graceful stop checks the step-down's end of it."""
    _kill9(t, daemonize=True)


def sc_daemon_escape_frozen(t):
    """The same daemon, the agent alone frozen: the watcher ends the
    term's cgroup at the hard end, before the successor can lead."""
    sc_leader_sigstop_guarded(t, daemonize=True)


def sc_state_duty(t):
    """The term's duty is state, not a process: on_leader sets the
    candidate's marker in the fence's marker table (a VIP, say), on_stepdown
    removes it, and the agents run with --fence, a command that removes it.
    The leader SIGKILLed: no on_stepdown runs, the watcher runs the fence
    (reason agent_gone). The checker (S8) sees no two terms' markers at
    once, and the killed term's marker removed by the fence (E)."""
    _kill9(t, marker=True)


def sc_state_duty_frozen(t):
    """The same state duty, the agent alone frozen (SIGSTOP): its watcher
    SIGKILLs the term and the agent at the hard end, then runs the fence
    (reason hard_end), before the successor can lead: S8 as above, and the
    guarded freeze's S2 and S7 bound 0."""
    sc_leader_sigstop_guarded(t, marker=True)


def _watcher_of(c):
    """The pid of c's fail-stop watcher (its child named zkelect-guard)."""
    return (h.watchers(ppid=c.pid) or [None])[0]


def sc_keeper_stop(t):
    """The leader's fail-stop watcher stopped (SIGSTOP): the keeper fails
    closed: the leader has no lease while its watcher does not watch, so it
    steps down at once (reason guard), the next in line leads (no overlap,
    the duty ended first), and the agent kills the stopped watcher and
    starts another (it rejoins, guarded again)."""
    t.start_candidates()
    t.steady()
    lead = _leader_or_fail(t)
    w = _watcher_of(lead)
    if w is None:
        t.problems.append("%s has no watcher process (zkelect-guard)" % lead.id)
        return
    t.fault_begin("keeper_stop", lead.id, expect=[{"type": "stepdown_reason", "target": lead.id,
                                                   "reasons": ["guard"]},
                                                  {"type": "leader_change"}])
    os.kill(w, signal.SIGSTOP)
    others = [c for c in t.cands if c is not lead]
    try:
        h.wait_until(lambda: any(_leads(c) for c in others), timeout=5,
                     desc="a successor leads once the leader's watcher is stopped")
    except h.Timeout:
        t.problems.append("no successor led within 5 s of the watcher's SIGSTOP")
    try:
        h.wait_until(lambda: _watcher_of(lead) not in (None, w), timeout=5,
                     desc="another watcher")
    except h.Timeout:
        t.problems.append("%s did not start another watcher" % lead.id)
        try:
            os.kill(w, signal.SIGKILL)
        except ProcessLookupError:
            pass
    t.fault_end("keeper_stop")
    t.wait_stable(timeout=3 * T_MS / 1000.0 + 5, record=True)


def sc_partition(t, factor, long_):
    t.start_candidates()
    t.steady()
    lead = _leader_or_fail(t)
    if long_:
        f = dict(l2=True, expect=[{"type": "stepdown_reason", "target": lead.id, "reasons": ["lease"]},
                                  {"type": "gap_positive", "target": lead.id},
                                  {"type": "leader_change"}])
    else:
        f = dict(no_change=True, expect=[{"type": "no_leader_change"},
                                         {"type": "no_expiry", "target": lead.id}])
    t.fault_begin("partition", lead.id, duration_ms=int(factor * T_MS), **f)
    lead.netns.partition(t.client_ports())
    time.sleep(factor * T_MS / 1000.0)
    lead.netns.heal()
    t.fault_end("partition")
    t.wait_stable(timeout=3 * T_MS / 1000.0 + 5, record=True)


def sc_partition_short(t):
    # 0.25 T: what the default renewal schedule rides out wherever in its
    # cycle the cut falls, with 0.1 T for the answer and a late loop
    # (docs/operations.md, "A lease that rides out more costs a slower crash
    # failover"); half a session timeout only sometimes
    sc_partition(t, 0.25, False)


def sc_partition_long(t):
    sc_partition(t, 2.5, True)


def sc_zk_leader_kill(t):
    t.start_candidates()
    t.steady()
    zi = t.ens.leader_index()
    if zi is None:
        raise AssertionError("no ZooKeeper leader")
    t.fault_begin("zk_leader_kill", "zk%d" % (zi + 1))
    t.ens.kill(zi)
    t0 = time.monotonic()
    h.wait_until(lambda: t.ens.leader_index() is not None, timeout=30, desc="new ZooKeeper leader",
                 interval=0.05)
    t.notes["zk_reelection_s"] = round(time.monotonic() - t0, 2)
    time.sleep(max(0.0, 2.0 - (time.monotonic() - t0)))
    t.ens.restart(zi)
    t.ens.wait_healthy(60)
    t.notes["zk_restart_s"] = round(time.monotonic() - t0, 2)
    t.fault_end("zk_leader_kill")
    t.wait_stable(timeout=3 * T_MS / 1000.0 + 5, record=True)


def sc_quorum_loss(t):
    t.start_candidates()
    t.steady()
    zi = t.ens.leader_index()
    victims = [zi, (zi + 1) % 3]
    t.fault_begin("quorum_loss", ",".join("zk%d" % (i + 1) for i in victims),
                  duration_ms=int(2.5 * T_MS), expect=[{"type": "epoch_up"}])
    for i in victims:
        t.ens.kill(i)
    time.sleep(2.5 * T_MS / 1000.0)
    t0 = time.monotonic()
    for i in victims:
        t.ens.restart(i)
    t.ens.wait_healthy(60)
    t.notes["zk_restore_s"] = round(time.monotonic() - t0, 2)
    t.fault_end("quorum_loss")
    t.wait_stable(timeout=3 * T_MS / 1000.0 + 5, record=True)


def sc_server_restart(t):
    t.start_candidates()
    t.steady()
    lead = _leader_or_fail(t)
    zl = t.ens.leader_index()
    si = t.server_of(lead)
    if si is None or si == zl:      # not a ZooKeeper follower: take any follower
        si = [i for i in range(3) if i != zl][0]
    t.notes["leader_on_restarted_server"] = t.server_of(lead) == si
    t.fault_begin("server_restart", "zk%d" % (si + 1), no_change=True,
                  expect=[{"type": "no_leader_change"}, {"type": "no_expiry", "target": lead.id}])
    t0 = time.monotonic()
    t.ens.restart(si)
    t.ens.wait_healthy(60)
    t.notes["zk_restart_s"] = round(time.monotonic() - t0, 2)
    t.fault_end("server_restart")
    t.wait_stable(timeout=3 * T_MS / 1000.0 + 5, record=True)


def _proxy_cuts(t):
    return P.control(t.proxy_ctl, "status").get("cuts", 0)


def sc_cut_after_create(t):
    # the folder must exist: zkelect creates its node first and parents only
    # on NONODE, and the cut must hit the create of the candidate node
    t.ens.ensure_path(t.path)
    P.control(t.proxy_ctl, "arm 1 %s/" % t.path)
    t.fault_begin("cut_after_create", "c1", phase="join")
    t.start_candidates(proxied=(1,))
    h.wait_until(lambda: _proxy_cuts(t) >= 1, timeout=10, desc="the cut at join")
    t.fault_end("cut_after_create")
    t.steady()
    # rejoin: cut c1 (the leader) off past its session, so it comes back
    # with a new session and creates a new node: cut that create too
    c1 = t.cands[0]
    t.fault_begin("cut_after_create", "c1", phase="rejoin", l2=c1.role() == "leader")
    c1.netns.partition(t.client_ports())
    P.control(t.proxy_ctl, "arm 1 %s/" % t.path)
    time.sleep(2.5 * T_MS / 1000.0)
    mark = c1.mark()
    c1.netns.heal()
    try:
        h.wait_until(lambda: _proxy_cuts(t) >= 2, timeout=10, desc="the cut at rejoin")
        c1.wait_for("joined", timeout=10, since=mark)
    except h.Timeout as e:
        t.problems.append("rejoin cut not observed: %s" % str(e).splitlines()[0])
    t.fault_end("cut_after_create")
    t.wait_stable(timeout=3 * T_MS / 1000.0 + 5, record=True)
    cuts = _proxy_cuts(t)
    t.notes["proxy_cuts"] = cuts
    joins = [e.get("reason") for e in c1.events("joined")]
    t.notes["c1_joined_reasons"] = joins
    if cuts < 2:
        t.problems.append("fault not injected: %d proxy cuts (expected 2)" % cuts)


def sc_hook_hang(t):
    t.fault_begin("hook_hang", "c1", expect=[{"type": "hook_killed", "target": "c1"},
                                             {"type": "no_expiry", "target": "c1"},
                                             {"type": "stepped_down", "target": "c1"}])
    c1 = t.new_candidate(1, hang=True)
    c1.wait_for("joined", timeout=15)
    for n in (2, 3):                       # join while c1's on_leader hangs
        t.new_candidate(n).wait_for("joined", timeout=15)
    try:
        c1.wait_for("stepdown", timeout=H_MS / 1000.0 + 5)
    except h.Timeout:
        t.problems.append("c1 did not step down after its on_leader hung")
    t.fault_end("hook_hang")
    t.wait_stable(timeout=3 * T_MS / 1000.0 + 5, record=True)


def sc_folder_delete(t):
    t.start_candidates()
    t.steady()
    lead = _leader_or_fail(t)
    t.fault_begin("folder_delete", t.path, expect=[{"type": "epoch_up"}],
                  leader=lead.id)
    dt = t.ens.deleteall(t.path)
    t.notes["deleteall_s"] = round(dt, 2)
    t.fault_end("folder_delete")
    t.wait_stable(timeout=3 * T_MS / 1000.0 + 5, record=True)


# hand_delete's bounds (docs/design.md, assumption 4), at the candidates'
# defaults: the step-down budget B = T/10, the margin m = T/25, drift 0.01;
# plus the checker's own slack for the stamps (eps_ms)
STEPDOWN_MS = T_MS // 10
MARGIN_MS = max(T_MS // 25, 50)
HAND_EPS_MS = 50
HAND_DELETE_MS = STEPDOWN_MS + HAND_EPS_MS                 # a live loop: its step-down, B
HAND_DELETE_FROZEN_MS = int(T_MS * 0.99 - MARGIN_MS / 2) + HAND_EPS_MS   # H - s1


def _leader_node(lead):
    ev = [e for e in lead.events() if e.get("event") == "leader"]
    if not ev or not ev[-1].get("node"):
        raise AssertionError("%s's leader line names no node" % lead.id)
    return ev[-1]["node"]


def _ended(c):
    """c's exit stamped by its own thread (_stamp_exit, a waitid that leaves
    the zombie): waiting on c.alive() instead reaps it (Popen.poll), which
    can come between the death and that thread's look, which then finds no
    child and stamps nothing (2 of 5 trials of hand_delete_frozen)."""
    return c.exit_rec is not None


def _delete_by_hand(t, lead):
    """Deletes lead's node with a client of the harness's own (MiniZK,
    open ACL): what an operator's `delete` or `deleteall` does."""
    zk = t.ens.client()
    try:
        t0 = time.monotonic()
        if not zk.delete("%s/%s" % (t.path, _leader_node(lead))):
            t.problems.append("fault not injected: %s's node was gone already" % lead.id)
        t.notes["delete_ms"] = round((time.monotonic() - t0) * 1000, 1)
    finally:
        zk.close()


def sc_hand_delete(t):
    """The leader's node deleted by hand (outside assumption 4), its loop
    running: the leader's own watch and the successor's fire together, the
    successor leads on its fast path, and the old leader's step-down (at
    most the step-down budget B) ends its term: S2 and S7 within B plus
    the checker's slack (HAND_DELETE_MS, the documented bound); the old
    leader rejoins at the back."""
    t.start_candidates()
    t.steady()
    lead = _leader_or_fail(t)
    t.fault_begin("hand_delete", lead.id, s2_bound_ms=HAND_DELETE_MS,
                  duty_bound_ms=HAND_DELETE_MS,
                  expect=[{"type": "leader_change"}, {"type": "epoch_up"},
                          {"type": "stepped_down", "target": lead.id}])
    _delete_by_hand(t, lead)
    t.fault_end("hand_delete")
    # the steady window begins once the old leader has heard of the delete
    # (beside a CPU hog its watch fired after the harness's delete
    # returned, and the change fell inside the window: L3)
    h.wait_until(lambda: lead.role() != "leader", timeout=5,
                 desc="%s stepped down after the delete" % lead.id)
    t.wait_stable(timeout=3 * T_MS / 1000.0 + 5, record=True)


def sc_hand_delete_frozen(t):
    """The leader frozen (SIGSTOP of the agent alone: why an operator
    reaches for a delete), then its node deleted by hand: the successor
    leads within milliseconds, while the frozen term's duty writes on until
    its keeper kills it and the agent at the term's hard end: S2 and S7
    within H - s1 = T x (1 - drift) - m/2 plus the checker's slack
    (HAND_DELETE_FROZEN_MS, the documented bound: it is the overlap that
    resign --force avoids, resign_force_frozen)."""
    t.start_candidates()
    t.steady()
    lead = _leader_or_fail(t)
    t.fault_begin("hand_delete", lead.id, s2_bound_ms=HAND_DELETE_FROZEN_MS,
                  duty_bound_ms=HAND_DELETE_FROZEN_MS,
                  expect=[{"type": "leader_change"}, {"type": "epoch_up"},
                          {"type": "exited", "target": lead.id}])
    t.rec.emit("paused", target=lead.id)
    lead.sigstop()
    if not _stopped(lead.pid):
        t.problems.append("%s did not stop within 2 s of its SIGSTOP" % lead.id)
    _delete_by_hand(t, lead)
    try:
        h.wait_until(lambda: _ended(lead), timeout=T_MS / 1000.0 + 5,
                     desc="the frozen leader killed by its keeper")
    except h.Timeout:
        t.problems.append("the frozen leader was not killed by its keeper")
        t.rec.emit("resumed", target=lead.id)
        lead.sigcont()
    t.fault_end("hand_delete")
    t.wait_stable(timeout=3 * T_MS / 1000.0 + 5, record=True)


COUNTER = "/gcounter"


def _counter_values(t):
    """The counter as ZooKeeper holds it: (values, final). values: the audit
    trail, (czxid, value, epoch, name) per node in sequence (commit) order,
    those committed up to the final value only; final: (value, epoch) of the
    counter's node (None: not a counter: another writer's bytes)."""
    def parse(data):
        try:
            v, e = data.decode().split(" ")
            return int(v), int(e)
        except (AttributeError, UnicodeDecodeError, ValueError):
            return None, None
    zk = t.ens.client()
    try:
        data, st = zk.get_data(COUNTER + "/value")
        fv, fe = parse(data)
        out = []
        for name in zk.get_children(COUNTER + "/log") or []:
            data, nst = zk.get_data("%s/log/%s" % (COUNTER, name))
            if nst["czxid"] <= st["mzxid"]:     # the same multi set the node
                out.append((int(name[2:]), nst["czxid"]) + parse(data) + (name,))
        return [x[1:] for x in sorted(out)], (fv, fe) if fv is not None else None
    finally:
        zk.close()


def _zxid_now(t):
    """A zxid after every transaction committed before the call: a
    sequential node's creation (czxid)."""
    zk = t.ens.client()
    try:
        return zk.exists(zk.create_node(COUNTER + "/cut-", sequential=True))["czxid"]
    finally:
        zk.close()


def sc_guarded_counter(t):
    """The duty is a counter in ZooKeeper (tests/chaos/policy.lua): each
    leader's policy reads the counter's node (zkelect.zk.get: value,
    version) and, 0.1 s later, sets value + 1 with the version read, in one
    guarded multi that also appends to the audit trail. The leader is cut
    off (its namespace drops what it sends to the servers; what they send
    comes in) while it counts, most likely between a read and its write, its
    node is deleted by hand, the successor leads (and counts 1.5 s into its
    term), and the drop ends 0.5 s after the delete: TCP delivers the deposed
    leader's write then, carrying a version that still matches. The checker
    (checker.check_counter): each value applied once, consecutive, by a
    term that led, epochs non-decreasing, the node's value the number of
    values applied, and no value of the deposed term committed after its
    node was deleted. With the guard's check op removed from the build
    (agent_write.c build_ops) that last one fails: the held write lands
    (docs/design.md "Guarded writes")."""
    t.ens.ensure_path(COUNTER + "/log")
    zk = t.ens.client()
    try:
        for name in zk.get_children(COUNTER + "/log") or []:
            zk.delete("%s/log/%s" % (COUNTER, name))  # a trial's own trail (one ensemble)
        if not zk.create(COUNTER + "/value", b"0 0"):
            zk.set_data(COUNTER + "/value", b"0 0")
    finally:
        zk.close()
    t.start_candidates(extra=["--zk-write-prefixes", COUNTER], counter=COUNTER)
    t.steady()
    lead = _leader_or_fail(t)
    _wait_counting(t, lead)
    epoch = max(int(e["epoch"]) for e in lead.events()
                if e.get("event") == "leader" and e.get("epoch") is not None)
    t.fault_begin("hand_delete", lead.id, s2_bound_ms=HAND_DELETE_FROZEN_MS,
                  duty_bound_ms=HAND_DELETE_FROZEN_MS,
                  expect=[{"type": "leader_change"}, {"type": "epoch_up"}])
    # its requests dropped, the servers' bytes let in: a write it sends
    # after a read answered goes into the drop. The node is deleted once
    # the policy says it sent a write after the drop began (its "counter
    # sending" line: mono_ns after it); a drop that began while a read was
    # on its way holds that read, and no write follows: then the drop is
    # lifted (TCP delivers the read), the policy counts on, and the drop
    # begins again (at most three times)
    ns = lead.netns
    h_ports = ", ".join(str(p) for p in sorted(set(t.client_ports())))

    def sent_since(ns0):
        return any(str(e.get("msg") or "").startswith("counter sending ") and
                   int(e.get("mono_ns") or 0) > ns0 for e in lead.events())
    for attempt in range(3):
        net.sh(ns.exec_prefix() + ["nft", "-f", "-"], input=(
            "flush chain inet chaos out\nadd rule inet chaos out ip daddr %s tcp dport { %s } "
            "drop\n" % (ns.host_ip, h_ports)))
        ns.partitioned = True
        ns0 = time.monotonic_ns()
        if _polled(lambda: sent_since(ns0), 0.5):
            break
        lead.netns.heal()
        ns1 = time.monotonic_ns()
        _polled(lambda: sent_since(ns1), 2.0)
    t0 = time.monotonic()
    _delete_by_hand(t, lead)
    ends = {epoch: _zxid_now(t)}
    time.sleep(max(0.0, 0.5 - (time.monotonic() - t0)))
    lead.netns.heal()
    t.fault_end("hand_delete")
    t.wait_stable(timeout=3 * T_MS / 1000.0 + 5, record=True)
    _wait_counting(t, t.leader() or lead, after=epoch)
    claims = []
    led = set()
    for c in t.cands:
        for e in c.events():
            m = re.match(r"counter epoch=(\d+) value=(\d+)$", str(e.get("msg") or ""))
            if m:
                claims.append((c.id, int(m.group(1)), int(m.group(2))))
            if e.get("event") == "leader" and e.get("epoch") is not None:
                led.add(int(e["epoch"]))
    vals, final = _counter_values(t)    # after the claims: it holds every claimed value
    refused = sum(1 for c in t.cands for e in c.events()
                  if str(e.get("msg") or "").startswith("guarded write") and
                  (": deposed:" in e["msg"] or ": late:" in e["msg"]))
    bad = CK.check_counter(vals, final, [c for c in claims if final and c[2] <= final[0]],
                           led, ends)
    t.notes["counter"] = {"values": len(vals), "terms": len(set(v[2] for v in vals)),
                          "refused_in_zookeeper": refused, "violations": bad[:5]}
    if len(set(v[2] for v in vals)) < 2:
        t.problems.append("fault not injected: the counter has values of %d term(s)"
                          % len(set(v[2] for v in vals)))
    if refused == 0 and not bad:
        t.problems.append("fault not injected: no write of the deposed leader reached ZooKeeper "
                          "after its node was deleted (the cut fell between a write and a read)")
    t.problems.extend("counter: " + b for b in bad[:10])


def _polled(cond, timeout, interval=0.01):
    """cond() polled until true (True) or timeout seconds (False)."""
    deadline = time.monotonic() + timeout
    for _ in range(int(timeout / interval) + 10):
        if cond():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
    return False


def _wait_counting(t, c, after=0):
    """Waits (bounded) for c's policy to apply a value in a term newer than
    after."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        for e in c.events():
            m = re.match(r"counter epoch=(\d+) ", str(e.get("msg") or ""))
            if m and int(m.group(1)) > after:
                return
        time.sleep(0.05)
    t.problems.append("%s applied no counter value (after epoch %d) within 5 s" % (c.id, after))


def sc_resign_force_frozen(t):
    """The leader frozen (SIGSTOP of the agent alone), then `zkelect ctl
    resign --force` on its control socket instead of a delete: no answer
    within 2 s, so ctl has the agent's keeper end the term (the duty and
    the agent SIGKILLed, the fence, then the session closed), and only then
    does the next in line lead: no overlap (S2 and S7 bound 0), the term
    over before the successor (`gap_positive`), the agent gone (`exited`),
    the keeper's close seen by a server (`session_closed`)."""
    socks = {}
    for n in (1, 2, 3):
        socks[n] = os.path.join(t.run_.sockdir, "ctl-%d-c%d.sock" % (t.trial, n))
        c = t.new_candidate(n, extra=["--control", socks[n]])
        c.wait_for("joined", timeout=15)
    t.wait_stable(timeout=15, settle=0)
    t.steady()
    lead = _leader_or_fail(t)
    sock = socks[int(lead.id[1:])]
    t.fault_begin("resign_force", lead.id, l2=True, s2_bound_ms=0, duty_bound_ms=0,
                  expect=[{"type": "leader_change"}, {"type": "epoch_up"},
                          {"type": "gap_positive", "target": lead.id},
                          {"type": "exited", "target": lead.id},
                          {"type": "session_closed", "within_ms": 5000}])
    t.rec.emit("paused", target=lead.id)
    lead.sigstop()
    if not _stopped(lead.pid):
        t.problems.append("%s did not stop within 2 s of its SIGSTOP" % lead.id)
    t0 = time.monotonic()
    code, out, err, _ = h.run([h.ZKELECT_BIN, "ctl", "--control", sock, "resign", "--force"],
                              timeout=40)
    t.notes["ctl_ms"] = round((time.monotonic() - t0) * 1000)
    t.notes["ctl"] = (out or err).strip()[:300]
    if code != 0:
        t.problems.append("ctl resign --force exited %s: %s" % (code, (err or out).strip()[:300]))
    try:
        h.wait_until(lambda: _ended(lead), timeout=5, desc="the frozen leader ended")
    except h.Timeout:
        t.problems.append("the frozen leader lived on after ctl resign --force")
        t.rec.emit("resumed", target=lead.id)
        lead.sigcont()
    try:
        h.wait_until(lambda: _keeper_lines(lead, "end of the agent's terms was asked"), timeout=5,
                     desc="the keeper's line on the forced end")
    except h.Timeout:
        t.problems.append("no keeper line on a forced end: the term ended some other way (%s)"
                          % [e.get("msg") for e in _keeper_lines(lead, "fail-stop")][:3])
    t.fault_end("resign_force")
    t.wait_stable(timeout=3 * T_MS / 1000.0 + 5, record=True)


def _leads(c):
    return c.alive() and c.role() == "leader"


def _follower_isolated(t, sync_limit):
    """Candidate A (c1) connected only to a ZooKeeper follower F, B (c2)
    only to the other follower; F's links to the other two servers are
    black-holed (net.QuorumFirewall: every packet dropped, both ways,
    connections left open; A's client connection to F untouched). F serves A
    until its syncLimit x tickTime read timeout, while the quorum leader,
    hearing nothing of A's session, expires it after T: B leads then. A must
    stop acting as leader (reason `lease`, as its renewals can no longer be
    confirmed by the quorum leader) before B starts: S2 with a zero bound."""
    assert t.ens.sync_limit == sync_limit, (t.ens.sync_limit, sync_limit)
    zl = t.ens.leader_index()
    if zl is None:
        raise AssertionError("no ZooKeeper leader")
    fi, oi = [i for i in range(3) if i != zl]
    a = t.new_candidate(1, servers=[fi])
    a.wait_for("joined", timeout=15)
    h.wait_until(lambda: _leads(a), timeout=15, desc="c1 leads")
    b = t.new_candidate(2, servers=[oi])
    b.wait_for("joined", timeout=15)
    t.wait_stable(timeout=15, settle=0)
    t.steady()
    modes = t.ens.modes()
    t.notes["modes_at_fault"] = modes
    if modes[fi] != "follower" or t.server_of(a) != fi:
        raise AssertionError("c1 is not on a ZooKeeper follower at fault time: modes %s, c1 on %s"
                             % (modes, t.server_of(a)))
    lead = _leader_or_fail(t)
    if lead is not a:
        raise AssertionError("c1 does not lead before the fault: %s" % t.roles())
    tick_s = TICK_MS / 1000.0
    T = T_MS / 1000.0
    t.fault_begin("follower_isolated", "c1", server="zk%d" % (fi + 1), sync_limit=sync_limit,
                  l2=True, s2_bound_ms=0, duty_bound_ms=0,
                  expect=[{"type": "stepdown_reason", "target": "c1", "reasons": ["lease"]},
                          {"type": "gap_positive", "target": "c1"},
                          {"type": "leader_change"}])
    t0 = time.monotonic()
    t.run_.qfw.isolate(fi + 1, {s.index: s.quorum_ports() for s in t.ens.servers})
    # hold: until B leads and A no longer does, bounded by what the old code
    # needed to show its overlap (A led on until F dropped it, syncLimit
    # ticks, plus its lease)
    bound = sync_limit * tick_s + 2 * T + 2.0
    mode_f = set()
    for _ in range(int(bound / POLL) + 10):
        mode_f.add(t.ens.servers[fi].mode(timeout=0.2))
        if _leads(b) and not _leads(a):
            break
        if time.monotonic() - t0 > bound:
            break
        time.sleep(POLL)
    t.notes["hold_s"] = round(time.monotonic() - t0, 2)
    t.notes["isolated_server_modes"] = sorted(str(m) for m in mode_f)
    t.notes["quorum_packets_dropped"] = t.run_.qfw.counters()
    if not t.notes["quorum_packets_dropped"]:
        t.problems.append("fault not injected: no quorum packet dropped")
    t.run_.qfw.heal()
    t.fault_end("follower_isolated")
    t1 = time.monotonic()
    t.ens.wait_healthy(60)
    t.notes["ensemble_healthy_after_heal_s"] = round(time.monotonic() - t1, 2)
    t.wait_stable(timeout=3 * T + 5, record=True)


def sc_follower_isolated_s5(t):
    _follower_isolated(t, 5)


def sc_follower_isolated_s20(t):
    _follower_isolated(t, 20)


def _renewal_answers(c, since):
    """CLOCK_MONOTONIC ns of c's renewal answers logged since event index
    `since`, a follow-up (answered within 50 ms of the one before) left out."""
    out = []
    for e in c.events()[since:]:
        if "renewal answered" in (e.get("msg") or "") and e.get("mono_ns"):
            ns = int(e["mono_ns"])
            if not out or ns - out[-1] > 50 * 10 ** 6:
                out.append(ns)
    return out


def _rtts_ms(c, since):
    """The round trips of c's renewal answers logged since `since`, in ms."""
    rtts = []
    for e in c.events()[since:]:
        m = re.match(r"renewal answered in (\d+) us", e.get("msg") or "")
        if m:
            rtts.append(int(m.group(1)) / 1000.0)
    return rtts


def sc_quorum_link_stall(t):
    """Candidate A (c1) on a ZooKeeper follower F only, B (c2) on the other
    follower only (as in follower_isolated). At one of A's renewal answers
    after a long gap of its schedule (so its next renewal comes about T/6
    later) what the quorum leader L sends F stalls (net.QuorumFirewall.stall:
    L's data segments dropped, everything F sends L passes): the ping that
    would report that renewal's touch is held. Once F forwards A's next
    renewal (counted at the firewall), which L commits with the other
    follower, and STALL_S (0.7 s) after the stall's start, F is cut off but
    that direction, which TCP then delivers at once (L's next segment past
    the hole brings a selective acknowledgement, and the hole is sent again;
    F gives L up after 1 s of silence, tickTime 200 x syncLimit 5): F reads
    the held pings, replies
    (dropped: the touch is lost), and answers A's renewal. A renewal paired
    one tick back and counted at its own answer (the base commit's rule)
    then confirms a request L never heard of, and A leads past L's expiry of
    its session; a pairing that counts only once a renewal sent after its
    answer is answered confirms nothing more (that renewal never reaches
    L). Held until B leads and A does not; S2 bound 0."""
    assert t.ens.sync_limit == SYNC_LIMIT, t.ens.sync_limit
    zl = t.ens.leader_index()
    if zl is None:
        raise AssertionError("no ZooKeeper leader")
    fi, oi = [i for i in range(3) if i != zl]
    a = t.new_candidate(1, servers=[fi])
    a.wait_for("joined", timeout=15)
    h.wait_until(lambda: _leads(a), timeout=15, desc="c1 leads")
    b = t.new_candidate(2, servers=[oi])
    b.wait_for("joined", timeout=15)
    t.wait_stable(timeout=15, settle=0)
    t.steady()
    modes = t.ens.modes()
    if modes[fi] != "follower" or t.server_of(a) != fi or _leader_or_fail(t) is not a:
        raise AssertionError("c1 does not lead on a ZooKeeper follower at fault time: modes %s, "
                             "c1 on %s, roles %s" % (modes, t.server_of(a), t.roles()))
    ports = {s.index: s.quorum_ports() for s in t.ens.servers}
    L, F = zl + 1, fi + 1
    fw = t.run_.qfw
    lined_up = False
    for tries in range(1, 4):
        m = a.mark()
        # an answer after a long gap: the next renewal goes a short gap later
        got = h.wait_until(lambda: (lambda r: len(r) >= 2 and r[-1] - r[-2] > 500 * 10 ** 6 and
                                    time.monotonic_ns() - r[-1] < 50 * 10 ** 6)(
                                        _renewal_answers(a, m)),
                           timeout=6, desc="a renewal answer after a long gap", interval=0.002)
        if tries == 1:
            t.fault_begin("quorum_link_stall", "c1", server="zk%d" % F, l2=True, s2_bound_ms=0,
                          duty_bound_ms=0,
                          expect=[{"type": "stepdown_reason", "target": "c1", "reasons": ["lease"]},
                                  {"type": "gap_positive", "target": "c1"},
                                  {"type": "leader_change"}])
        t0 = time.monotonic()
        t0_ns = time.monotonic_ns()
        fw.stall(L, F, ports)
        t.notes["stall_after_answer_ms"] = round((time.monotonic_ns() - _renewal_answers(a, m)[-1])
                                                 / 1e6, 1) if got else None
        m_rtt = a.mark()
        while time.monotonic() - t0 < 0.5 and fw.forwarded() == 0:
            time.sleep(0.002)
        t.notes["tries"] = tries
        if fw.forwarded() == 0:
            fw.heal()                   # the stall ends with TCP's next try
            time.sleep(1.0)
            continue
        t.notes["forwarded_after_ms"] = round((time.monotonic() - t0) * 1000, 1)
        # L reads it and commits it with the other follower; the stall goes
        # on until STALL_S after its start
        time.sleep(max(0.02, STALL_S - (time.monotonic() - t0)))
        fw.isolate_but(F, L, ports)
        t.notes["healed_after_ms"] = round((time.monotonic() - t0) * 1000, 1)
        lined_up = True
        break
    if not lined_up:
        t.problems.append("fault not lined up: no renewal forwarded within 0.5 s of the stall's "
                          "start in 3 tries")
    t1 = time.monotonic()
    T = T_MS / 1000.0
    bound = SYNC_LIMIT * TICK_MS / 1000.0 + 2 * T + 2.0
    for _ in range(int(bound / POLL) + 10):
        if (_leads(b) and not _leads(a)) or time.monotonic() - t1 > bound:
            break
        time.sleep(POLL)
    rtts = _rtts_ms(a, m_rtt) if lined_up else []
    t.notes["stalled_answer_ms"] = max(rtts) if rtts else None
    late = _renewal_answers(a, m_rtt) if lined_up else []
    # the stall as A saw it: from its start to the stalled renewal's answer
    t.notes["stall_ms"] = round((late[0] - t0_ns) / 1e6, 1) if late else None
    t.notes["hold_s"] = round(time.monotonic() - t1, 2)
    t.notes["quorum_packets_dropped"] = fw.counters()
    if not t.notes["quorum_packets_dropped"]:
        t.problems.append("fault not injected: no quorum packet dropped")
    fw.heal()
    t.fault_end("quorum_link_stall")
    t.ens.wait_healthy(60)
    t.wait_stable(timeout=3 * T + 5, record=True)


def _first_after(cands, name, since, pred=lambda e: True):
    """The earliest event `name` of any of cands after their marks `since`
    ({candidate: mark}): (mono_ns, candidate id, event), or None."""
    best = None
    for c in cands:
        for e in c.events()[since[c]:]:
            if e.get("event") == name and e.get("mono_ns") and pred(e):
                if best is None or int(e["mono_ns"]) < best[0]:
                    best = (int(e["mono_ns"]), c.id, e)
                break
    return best


def sc_zk_leader_blackhole(t):
    """The quorum leader's host lost silently: its links to the other
    servers (net.QuorumFirewall.isolate) and to every candidate (each
    candidate's partition of its client port) black-holed. The followers
    give it up after syncLimit x tickTime (1 s) and elect another; no write
    or sync is answered anywhere meanwhile, so the zkelect leader's lease
    runs out and it steps down (reason `lease`), and a term starts again
    once a renewal is answered. Measured: the leaderless time (the old
    term's step-down to the next term's start) and the ensemble's
    re-election; held until a candidate leads again (at most 10 s)."""
    t.start_candidates()
    t.steady()
    lead = _leader_or_fail(t)
    zl = t.ens.leader_index()
    if zl is None:
        raise AssertionError("no ZooKeeper leader")
    ports = {s.index: s.quorum_ports() for s in t.ens.servers}
    marks = {c: c.mark() for c in t.cands}
    t.notes["leader_on_zk_leader"] = t.server_of(lead) == zl
    t.fault_begin("zk_leader_blackhole", "zk%d" % (zl + 1),
                  expect=[{"type": "gap_positive", "target": lead.id}])
    t0 = time.monotonic()
    t.run_.qfw.isolate(zl + 1, ports)
    for c in t.cands:
        c.netns.partition([t.ens.servers[zl].client_port])
    new_zk = None
    nxt = None
    for _ in range(int(10.0 / POLL) + 10):
        if new_zk is None:
            zi = t.ens.leader_index()
            if zi is not None and zi != zl:
                new_zk = time.monotonic() - t0
        nxt = _first_after(t.cands, "leader", marks)
        if (new_zk is not None and nxt is not None) or time.monotonic() - t0 > 10.0:
            break
        time.sleep(POLL)
    down = _first_after([lead], "stepdown", {lead: marks[lead]})
    t.notes["zk_reelection_s"] = round(new_zk, 2) if new_zk is not None else None
    t.notes["stepdown_reason"] = down[2].get("reason") if down else None
    if down and nxt:
        t.notes["leaderless_ms"] = round((nxt[0] - down[0]) / 1e6, 1)
        t.notes["next_leader"] = nxt[1]
        t.notes["stepdown_after_fault_ms"] = round((down[0] - int(t0 * 1e9)) / 1e6, 1)
    t.notes["quorum_packets_dropped"] = t.run_.qfw.counters()
    t.run_.qfw.heal()
    for c in t.cands:
        c.netns.heal()
    t.fault_end("zk_leader_blackhole")
    t.ens.wait_healthy(60)
    t.wait_stable(timeout=3 * T_MS / 1000.0 + 5, record=True)


HOSTILE_PREFIX = "n_%016x-"


def _forge(zk, path, t):
    """Writes leader data claiming the epoch of the node's own czxid (what
    only a zkelect leader's own term writes) into path."""
    st = zk.exists(path)
    if st is None:
        raise AssertionError("forged node %s vanished" % path)
    data = json.dumps({"zkelect": 1, "id": "evil", "data": "x", "epoch": st["czxid"]},
                      separators=(",", ":")).encode()
    zk.set_data(path, data)
    t.notes.setdefault("forged", []).append({"node": path.rsplit("/", 1)[-1], "czxid": st["czxid"]})


def _wait_pinging(zk, cond, timeout, desc):
    """h.wait_until that keeps the hostile session (and its nodes) alive."""
    end = time.monotonic() + timeout
    for _ in range(int(timeout / 0.05) + 10):
        if cond():
            return
        if time.monotonic() > end:
            raise h.Timeout("timed out after %.1fs waiting for %s" % (timeout, desc))
        zk.ping()
        time.sleep(0.05)


def sc_hostile_peer(t):
    """A plain client (open ACL, no zkelect) forges a leader claim in the
    election folder. Phase 1: an EPHEMERAL|SEQUENTIAL node with the
    candidates' name style, sorting between c1 (the leader) and c2, holds
    {"zkelect":1,"id":"evil","data":"x","epoch":<its own czxid>}; c2 joins
    behind it, then it is deleted. Phase 2: a spacer node, then c3 joins
    behind it; a forged node (named with the spacer's sequence, sorting after
    it) is created after c3 joined, the spacer deleted (c3 relists and finds
    the forged claim ahead), then the forged node deleted. Neither c2 nor c3
    may lead while c1 leads: no leadership change at all, S2 bound 0."""
    a = t.new_candidate(1)
    a.wait_for("joined", timeout=15)
    h.wait_until(lambda: _leads(a), timeout=15, desc="c1 leads")
    zk = t.ens.client()
    try:
        # phase 1: forged before the victim joins
        t.fault_begin("hostile_peer", "c2", phase="before_join", leader="c1", no_change=True,
                      s2_bound_ms=0, duty_bound_ms=0, expect=[{"type": "no_leader_change"}])
        n1 = zk.create_node(t.path + "/" + HOSTILE_PREFIX % 0xe71e71e71e71e71e, b"x",
                            ephemeral=True, sequential=True)
        _forge(zk, n1, t)
        b = t.new_candidate(2)
        _wait_pinging(zk, lambda: b.events("joined"), 15, "c2 joined")
        _wait_pinging(zk, lambda: b.role() == "follower", 10, "c2 follows")
        zk.keepalive(0.5)                   # c2 may check the claim meanwhile
        zk.delete(n1)
        zk.keepalive(1.5)
        t.fault_end("hostile_peer")
        t.rec.emit("steady_begin")          # L1: a stable leader between the phases
        zk.keepalive(1.2)
        t.rec.emit("steady_end")
        # phase 2: forged after the victim joined
        sp = zk.create_node(t.path + "/" + HOSTILE_PREFIX % 0x5a5a5a5a5a5a5a5a, b"x",
                            ephemeral=True, sequential=True)
        c = t.new_candidate(3)
        _wait_pinging(zk, lambda: c.events("joined"), 15, "c3 joined")
        _wait_pinging(zk, lambda: c.role() == "follower", 10, "c3 follows")
        t.fault_begin("hostile_peer", "c3", phase="after_join", leader="c1", no_change=True,
                      s2_bound_ms=0, duty_bound_ms=0, expect=[{"type": "no_leader_change"}])
        seq = sp.rsplit("-", 1)[1]
        n2 = zk.create_node(t.path + "/" + (HOSTILE_PREFIX % 0xfefefefefefefefe) + seq, b"x",
                            ephemeral=True)
        _forge(zk, n2, t)
        zk.delete(sp)                       # c3's predecessor goes: c3 relists
        zk.keepalive(0.7)
        zk.delete(n2)
        zk.keepalive(1.5)
        t.fault_end("hostile_peer")
    finally:
        zk.close()
    t.notes["roles_after"] = t.roles()
    t.wait_stable(timeout=3 * T_MS / 1000.0 + 5, record=True)


STALL_MS = 3 * T_MS             # loop_stall: about 3 x the session timeout
STALL_AFTER_S = 3.0             # into c1's first term (the others joined, a steady window)


def sc_loop_stall(t):
    """c1's policy, 3 s into its first term (its duty, fence_writer, running),
    blocks the agent's loop in one C call for about 3 T (policy.lua: a
    pathological string.find). With the fail-stop watcher (--fail-stop,
    default `agent`) the term's process groups and the agent are SIGKILLed at
    the lease's hard end: the successor leads once the watcher closed c1's
    session (or a server expired it), no stale write is accepted by the fence, and the duties of the two terms do
    not overlap (S7 with a zero bound)."""
    if "--fail-stop" not in t.run_.flags:
        t.problems.append("%s has no --fail-stop (the watchdog guard): the stall is not guarded"
                          % h.ZKELECT_BIN)
    a = t.new_candidate(1, stall_ms=STALL_MS, stall_after=STALL_AFTER_S)
    a.wait_for("joined", timeout=15)
    for n in (2, 3):
        t.new_candidate(n).wait_for("joined", timeout=15)
    t.wait_stable(timeout=STALL_AFTER_S, settle=0)
    if a.role() != "leader":
        raise AssertionError("c1 does not lead: %s" % t.roles())
    t.rec.emit("steady_begin")
    ev = a.wait_for(lambda e: e.get("event") == "script" and
                    (e.get("msg") or "").startswith("stall begin"), timeout=STALL_AFTER_S + 10)
    t.rec.emit("steady_end", t=int(ev["mono_ns"]) - 1)
    t.notes["stall"] = ev.get("msg")
    t.fault_begin("loop_stall", "c1", t=int(ev["mono_ns"]), stall_ms=STALL_MS, l2=True,
                  s2_bound_ms=0, duty_bound_ms=0,
                  expect=[{"type": "leader_change"}, {"type": "gap_positive", "target": "c1"},
                          {"type": "exited", "target": "c1"}])
    others = [c for c in t.cands if c is not a]
    T = T_MS / 1000.0
    try:
        h.wait_until(lambda: any(_leads(c) for c in others), timeout=3 * T + 5, desc="a successor leads")
    except h.Timeout:
        t.problems.append("no successor led within %.0f s of the stall" % (3 * T + 5))
    # the stall's own end, or c1's death, bounds the fault
    try:
        h.wait_until(lambda: not a.alive() or a.events("stepdown"), timeout=STALL_MS / 1000.0 + 5,
                     desc="c1 gone or stepped down")
    except h.Timeout:
        t.problems.append("c1 neither died nor stepped down after its stall")
    t.notes["c1_exit_rc"] = a.proc.poll()
    t.fault_end("loop_stall")
    t.wait_stable(timeout=3 * T + 5, record=True)


def _pipe_full(c, quiet_s=0.5, timeout=10.0):
    """Waits (bounded) until c's stalled log pipe takes no more lines: its
    unread bytes unchanged for quiet_s while c logs an action line every
    50 ms (a leader). Returns the unread bytes, or None."""
    t0 = time.monotonic()
    last, since = None, t0
    for _ in range(int(timeout / POLL) + 10):
        n = c.pipe_unread()
        now = time.monotonic()
        if n != last:
            last, since = n, now
        elif n and now - since >= quiet_s:
            return n
        if now - t0 > timeout:
            break
        time.sleep(POLL)
    return None


LOG_STALL_STEADY_S = 1.5 * T_MS / 1000.0    # log_stall: leading on with a full log pipe
LOG_STALL_PARTITION = 2.5                   # log_stall: then the partition, x T


def sc_log_stall(t):
    """The leader's stderr stops being read: c1 logs (JSON, debug) into a
    pipe of one page that a `cat` copies to its log file; the harness
    SIGSTOPs the cat. Once the pipe takes no more lines, c1 leads on for
    1.5 T (a steady window: its renewals must go on), then is partitioned
    from ZooKeeper for 2.5 T (partition_long) with the pipe still full: it
    must step down (reason lease) before the successor leads, its duty
    ended (S7 bound 0) and its marker removed by its on_stepdown (E:
    marker_cleared via hook; S8). Healed, the cat resumes: the lines the
    agent kept arrive with their own stamps, and the history is whole.
    Checked beyond the checker: the pipe was full; renewals and the
    step-down were logged (stamped) while it was; the step-down's line
    arrived only after the resume."""
    c1 = t.new_candidate(1, marker=True, fence=True, log_pipe=True)
    c1.wait_for("joined", timeout=15)
    for n in (2, 3):
        t.new_candidate(n, marker=True, fence=True).wait_for("joined", timeout=15)
    t.wait_stable(timeout=15, settle=0)
    t.steady()
    lead = _leader_or_fail(t)
    if lead is not c1:
        raise AssertionError("c1 does not lead: %s" % t.roles())
    _marker_set(t, c1)
    others = [c for c in t.cands if c is not c1]
    T = T_MS / 1000.0
    mark = c1.mark()
    t.fault_begin("log_stall", "c1")
    os.kill(c1.reader.pid, signal.SIGSTOP)
    t_stop = time.monotonic_ns()
    unread = _pipe_full(c1)
    t_full = time.monotonic_ns()
    t.notes["pipe_unread"] = unread
    t.notes["pipe_full_after_ms"] = round((t_full - t_stop) / 1e6, 1)
    if unread is None:
        t.problems.append("fault not injected: c1's log pipe did not fill (unread %s)"
                          % c1.pipe_unread())
    t.rec.emit("log_pipe_full", target="c1", unread=unread)
    # c1 leads on with a full pipe: no change in this window (L3), seen
    # live from the others' logs; c1's own lines come after the resume
    t.rec.emit("steady_begin")
    time.sleep(LOG_STALL_STEADY_S)
    t.rec.emit("steady_end")
    if any(_leads(c) for c in others):
        t.problems.append("another candidate led while c1's log pipe was full")
    t_part = time.monotonic_ns()
    t.fault_begin("partition", "c1", duration_ms=int(LOG_STALL_PARTITION * T_MS), l2=True,
                  duty_bound_ms=0,
                  expect=[{"type": "stepdown_reason", "target": "c1", "reasons": ["lease"]},
                          {"type": "gap_positive", "target": "c1"}, {"type": "leader_change"},
                          {"type": "marker_cleared", "target": "c1", "via": ["hook"]}])
    c1.netns.partition(t.client_ports())
    time.sleep(LOG_STALL_PARTITION * T)
    c1.netns.heal()
    t.fault_end("partition")
    t.notes["pipe_unread_at_heal"] = c1.pipe_unread()
    t_resume, w_resume = time.monotonic_ns(), time.time()
    os.kill(c1.reader.pid, signal.SIGCONT)
    t.fault_end("log_stall")
    try:
        sd = h.wait_until(lambda: c1.find("stepdown", since=mark), timeout=10,
                          desc="c1's step-down line")[0]
    except h.Timeout:
        sd = None
        t.problems.append("c1's step-down line did not arrive within 10 s of the resume")
    t.wait_stable(timeout=3 * T + 5, record=True)
    # what c1 logged while its pipe was full, known only now
    evs = c1.events()
    made = [e for e in evs if t_full <= int(e.get("mono_ns") or 0) <= t_resume]
    renewals = [e for e in made if int(e["mono_ns"]) < t_part and
                (e.get("msg") or "").startswith("renewal answered")]
    t.notes["lines_while_full"] = len(made)
    t.notes["renewals_while_full"] = len(renewals)
    dropped = [e.get("msg") for e in evs if e.get("event") == "log_dropped"]
    t.notes["log_dropped"] = dropped
    if len(renewals) < 2:
        t.problems.append("c1 logged %d renewals while its log pipe was full (expected 2 or more "
                          "in %.1f s)" % (len(renewals), LOG_STALL_STEADY_S))
    if sd is not None:
        t.notes["stepdown"] = {"reason": sd.get("reason"),
                               "after_partition_ms": round((int(sd["mono_ns"]) - t_part) / 1e6, 1),
                               "seen_after_resume_ms": round((sd["_seen"] - w_resume) * 1000, 1)}
        if not t_full <= int(sd["mono_ns"]) <= t_resume:
            t.problems.append("c1's step-down was not made while its log pipe was full")
        if sd["_seen"] < w_resume:
            t.problems.append("c1's step-down line was read before the resume: the sink was "
                              "not stalled")


def sc_http_flood(t):
    """Held and half-open connections to every candidate's --status (a
    flooder in each candidate's namespace) while the leader hands over
    (SIGTERM). The election does not wait for the endpoint: the handover is
    as fast as without the flood, every live endpoint answers within a
    second after the flood ends, and nothing else changes (no overlap)."""
    t.start_candidates(extra=["--status", "127.0.0.1:0"])
    t.steady()
    lead = _leader_or_fail(t)
    floods = {}
    for c in t.cands:
        port = int(c.wait_for("status_listen", timeout=5)["addr"].rsplit(":", 1)[1])
        floods[c.id] = subprocess.Popen(c.netns.exec_prefix() + [sys.executable, HTTP_FLOOD_PY,
                                                                  str(port), "4"],
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        preexec_fn=_preexec)
    time.sleep(1.5)                 # the endpoints are full of held connections
    others = [c for c in t.cands if c is not lead]
    marks = {c: c.mark() for c in others}
    t.fault_begin("sigterm", lead.id, l2=True,
                  expect=[{"type": "leader_change"}, {"type": "epoch_up"}])
    t.rec.emit("terminated", target=lead.id)
    t_term = time.monotonic_ns()
    lead.term()
    try:
        nl = h.wait_until(lambda: [e for c in others for e in c.events()[marks[c]:]
                                   if e.get("event") == "leader"], timeout=5)
        # compared with "handover_ms", the same SIGTERM handover at the end
        # of the trial without a flood (stop_all)
        t.notes["flood_handover_ms"] = round((nl[0]["mono_ns"] - t_term) / 1e6, 1)
        if t.notes["flood_handover_ms"] > 1000:
            t.problems.append("handover took %.0f ms under the flood" % t.notes["flood_handover_ms"])
    except h.Timeout:
        t.problems.append("no handover within 5 s of SIGTERM under the flood")
    t.fault_end("sigterm")
    t.wait_stable(timeout=3 * T_MS / 1000.0 + 5, record=True)
    for cid, p in floods.items():
        try:
            out, _ = p.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            t.run_.kill_proc(p, signal.SIGKILL)
            t.problems.append("the flooder of %s did not end" % cid)
            continue
        try:
            r = json.loads(out.decode("utf-8", "replace").strip().splitlines()[-1])
        except (ValueError, IndexError):
            t.problems.append("the flooder of %s said %r" % (cid, out[-300:]))
            continue
        t.notes["flood_%s" % cid] = r
        if cid == lead.id:
            continue                # it stopped: refusals are its right
        if r["answer_ms"] is None or r["answer_ms"] > 1000:
            t.problems.append("%s's endpoint answered %s ms after the flood (%s)"
                              % (cid, r["answer_ms"], r["error"]))


class GroupProc:
    """One bench_many process of a balance group (bench/many.c with
    BENCH_MANY_GROUP, its keeper on: BENCH_MANY_GUARD) in the run's own
    namespace, its stdout and stderr in files of the trial, read as they
    grow (one write(2) per line: a line is whole once its newline is in)."""

    def __init__(self, t, name):
        if not os.access(BENCH_MANY_BIN, os.X_OK):
            raise SetupError("bench_many not found: %s (set BENCH_MANY_BIN)" % BENCH_MANY_BIN)
        self.name = name
        self.out = os.path.join(t.tdir, name + ".out")
        self.err = os.path.join(t.tdir, name + ".err")
        env = dict(h._child_env(), BENCH_MANY_GROUP=t.path + "-group", BENCH_MANY_ID=name,
                   BENCH_MANY_SETTLE_MS=str(GROUP_SETTLE_MS), BENCH_MANY_GUARD="1")
        with open(self.out, "wb") as o, open(self.err, "wb") as e:
            self.proc = subprocess.Popen(
                [BENCH_MANY_BIN, t.ens.connect_string(), t.path, str(GROUP_E), str(T_MS),
                 str(TICK_MS)], stdin=subprocess.PIPE, stdout=o, stderr=e, env=env,
                preexec_fn=_preexec)
        self.pid = self.proc.pid
        self.off = 0
        self.recs = []          # GroupChecker's records of its lines
        self.state = None       # its last group line
        self.state_ns = 0       # its stamp
        self.led = set()        # the elections it leads, by its lines
        self.killed = self.leaving = False
        self.exit_ns = None

    def poll(self):
        try:
            with open(self.out, "rb") as f:
                f.seek(self.off)
                data = f.read()
        except OSError:
            return
        end = data.rfind(b"\n") + 1
        self.off += end
        for line in data[:end].decode(errors="replace").splitlines():
            p = line.split()
            if len(p) < 3 or not p[0].isdigit():
                continue
            r = {"mono_ns": int(p[0]) * 1000, "wall": None, "src": self.name, "pid": self.pid}
            if p[1] == "-":
                if p[2] != "group":
                    continue
                try:
                    kv = {k: int(v) for k, v in (x.split("=", 1) for x in p[3:] if "=" in x)}
                except ValueError:
                    continue
                self.state, self.state_ns = kv, r["mono_ns"]
                r.update(kv, ev="g_group")
            elif p[1].isdigit() and p[2] in ("leader", "stepdown", "follower", "stopped"):
                r.update(ev="g_" + p[2], e=int(p[1]))
                (self.led.add if p[2] == "leader" else self.led.discard)(int(p[1]))
            else:
                continue
            self.recs.append(r)

    def leads(self):
        self.poll()
        return len(self.led)

    def moving(self):
        self.poll()
        return (self.state or {}).get("moving", 0)

    def send(self, cmd):
        try:
            self.proc.stdin.write((cmd + "\n").encode())
            self.proc.stdin.flush()
        except OSError:
            pass

    def stderr(self):
        try:
            with open(self.err, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def watchers(self):
        return [int(m) for m in re.findall(r"^guard watcher (\d+)$", self.stderr(), re.M)]


def _group_wait(t, cond, timeout, desc):
    """Polls cond every ms (a move is a few ms: the fault must land inside
    it); a timeout is a fault not injected (the harness's problem)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.001)
    t.problems.append("fault not injected: no %s within %.0f s" % (desc, timeout))
    return False


def _group_joined(t, gs, members):
    """The stamp of the latest of gs's first group lines with `members`
    members (each has joined the group and sees it whole), or None."""
    def stamp():
        got = []
        for g in gs:
            g.poll()
            got.append(next((r["mono_ns"] for r in g.recs if r["ev"] == "g_group" and
                             r.get("members") == members), None))
        return None if None in got else max(got)
    return stamp() if _group_wait(t, lambda: stamp() is not None, 8, "%s in the group" % ", ".join(
        g.name for g in gs)) else None


def sc_balance_kill9(t):
    """A balance group of GROUP_E elections over bench_many processes
    (each with its keeper), the shares moving while processes die and
    come back: b1 SIGKILLed as the first elections move to it from a1;
    once a1 leads all again, c1 and b2 join and a1 (the donor) is
    SIGKILLed as soon as its group line says it hands elections over; a2
    joins and, as soon as c1's or b2's says it hands elections over (to
    a2), that one leaves gracefully (stdin "leave"). Checked
    (checker.GroupChecker): no two processes' terms of one election meet
    (G1), the group settles afterwards (G2: every process at its target,
    every election led once), no line after a process's end (G3); the
    leave exits 0."""
    t.rec.emit("config", group=True, E=GROUP_E, settle_ms=GROUP_SETTLE_MS)
    a1 = t.group_start("a1")
    _group_wait(t, lambda: a1.leads() == GROUP_E, 10, "a1 leading all")
    b1 = t.group_start("b1")
    if _group_wait(t, lambda: b1.leads() >= 1, 8, "move to b1"):
        t.group_kill(b1)            # the receiver, the hand-overs to it under way
    _group_wait(t, lambda: a1.leads() == GROUP_E, 8, "a1 leading all again")
    c1, b2 = t.group_start("c1"), t.group_start("b2")
    t_in = _group_joined(t, (c1, b2), 3)
    if t_in and _group_wait(t, lambda: a1.moving() > 0 and a1.state_ns > t_in, 8, "move from a1"):
        t.group_kill(a1)            # the donor, its hand-overs under way
    a2 = t.group_start("a2")
    t_in = _group_joined(t, (a2,), 3)
    if t_in and _group_wait(t, lambda: any(g.moving() > 0 and g.state_ns > t_in for g in (c1, b2)),
                            8, "move to a2"):
        leaver = max((c1, b2), key=lambda g: g.moving() if g.state_ns > t_in else -1)
        t.rec.emit("leave", target=leaver.name, moving=leaver.state.get("moving"))
        leaver.leaving = True
        leaver.send("leave")        # a graceful leave while the shares move
        rc = h._wait_proc(leaver.proc, 10.0)
        if rc != 0:
            t.problems.append("%s's leave: exit %s (expected 0 within 10 s)" % (leaver.name, rc))
        else:
            leaver.exit_ns = time.monotonic_ns()
    try:
        h.wait_until(t.group_settled, timeout=10, desc="the group settled")
        t.rec.emit("settled")
    except h.Timeout:
        t.rec.emit("unsettled", states={g.name: g.state for g in t.group_live()})
    t.notes["leads"] = {g.name: len(g.led) for g in t.group_live()}


SCENARIOS = [
    {"name": "leader_kill9", "fn": sc_leader_kill9},
    {"name": "agent_kill9_keeper", "fn": sc_agent_kill9_keeper},
    {"name": "host_kill9", "fn": sc_host_kill9},
    {"name": "leader_sigstop", "fn": sc_leader_sigstop},
    {"name": "leader_sigstop_guarded", "fn": sc_leader_sigstop_guarded},
    {"name": "partition_short", "fn": sc_partition_short},
    {"name": "partition_long", "fn": sc_partition_long},
    {"name": "zk_leader_kill", "fn": sc_zk_leader_kill},
    {"name": "quorum_loss", "fn": sc_quorum_loss},
    {"name": "server_restart", "fn": sc_server_restart},
    {"name": "cut_after_create", "fn": sc_cut_after_create, "proxy": True},
    {"name": "hook_hang", "fn": sc_hook_hang},
    {"name": "folder_delete", "fn": sc_folder_delete},
    {"name": "hostile_peer", "fn": sc_hostile_peer},
    {"name": "loop_stall", "fn": sc_loop_stall},
    {"name": "daemon_escape", "fn": sc_daemon_escape},
    {"name": "daemon_escape_frozen", "fn": sc_daemon_escape_frozen},
    {"name": "keeper_stop", "fn": sc_keeper_stop},
    {"name": "state_duty", "fn": sc_state_duty},
    {"name": "state_duty_frozen", "fn": sc_state_duty_frozen},
    {"name": "log_stall", "fn": sc_log_stall},
    {"name": "http_flood", "fn": sc_http_flood},
    {"name": "hand_delete", "fn": sc_hand_delete},
    {"name": "hand_delete_frozen", "fn": sc_hand_delete_frozen},
    {"name": "guarded_counter", "fn": sc_guarded_counter},
    {"name": "resign_force_frozen", "fn": sc_resign_force_frozen},
    {"name": "quorum_link_stall", "fn": sc_quorum_link_stall},
    {"name": "zk_leader_blackhole", "fn": sc_zk_leader_blackhole},
    {"name": "balance_kill9", "fn": sc_balance_kill9, "group": True},
    {"name": "follower_isolated_s5", "fn": sc_follower_isolated_s5},
    # last: it restarts the ensemble with syncLimit 20 (the next trial's first
    # scenario restarts it with the default again)
    {"name": "follower_isolated_s20", "fn": sc_follower_isolated_s20, "sync_limit": 20},
]


def fmt_result(r):
    takes = ",".join("%.2fs" % (x / 1000.0) for x in r["t_take_ms"]) or "-"
    worst = "-" if r["overlap_ms_max"] is None else "%.1fms" % r["overlap_ms_max"]
    ck = r.get("checker") or {}
    if ck and ck["properties"].get("S2p", {}).get("status") == "pass" and r["overlap_ms_max"]:
        worst += "(pause, S2p ok)"
    line = "%s %-21s #%d  overlaps=%s worst=%s new_leader=%s flaps=%s orphans=%s rejects=%s  [%.1fs]" % (
        "PASS" if r["verdict"] == "pass" else "FAIL", r["scenario"], r["trial"], r["overlaps"],
        worst, takes, r["flaps"], r["orphans"], r["fence_rejects"], r["seconds"])
    if r["verdict"] != "pass":
        why = list(r["failed_properties"]) + r["harness_problems"]
        if r["error"]:
            why.append("error: " + r["error"].strip().splitlines()[-1])
        line += "\n     failed: %s\n     logs: %s" % ("; ".join(str(w) for w in why), r["dir"])
        if r.get("checker"):
            for k in r["failed_properties"]:
                for v in r["checker"]["properties"][k]["violations"][:3]:
                    line += "\n     %s: %s" % (k, v.get("why"))
    return line


# Seconds a scenario took in CI's quiet runs: how run_jobs() splits the
# scenarios (longest first onto the part with the least so far); a scenario
# not listed counts as 8.
EST_S = {"log_stall": 15, "quorum_loss": 14, "http_flood": 13, "cut_after_create": 12,
         "follower_isolated_s20": 12, "partition_long": 11, "leader_sigstop": 10,
         "zk_leader_kill": 10, "quorum_link_stall": 10, "zk_leader_blackhole": 10,
         "hostile_peer": 9, "follower_isolated_s5": 8}


def split_parts(names, jobs):
    """names (in SCENARIOS order) into at most jobs parts of about equal
    estimated time; each part keeps the SCENARIOS order (so a scenario that
    restarts the ensemble with other settings stays where it was: last)."""
    load = [0.0] * jobs
    part_of = {}
    for n in sorted(names, key=lambda n: -EST_S.get(n, 8)):
        k = load.index(min(load))
        part_of[n] = k
        load[k] += EST_S.get(n, 8)
    return [p for p in ([n for n in names if part_of[n] == k] for k in range(jobs)) if p]


def run_jobs(args, names):
    """--jobs N: N runs of this script at once, each with a part of the
    scenarios, its own private namespaces, ensemble and logs (OUT/part-K);
    their lines go to our stdout as they come (one write each); the summary
    is theirs merged. Exit: the first non-zero of theirs, else 0."""
    base = args.out or tempfile.mkdtemp(prefix="zkechaos-")
    t0 = time.monotonic()
    procs = []
    for k, part in enumerate(split_parts(names, args.jobs)):
        out = os.path.join(base, "part-%d" % (k + 1))
        os.makedirs(out, exist_ok=True)
        cmd = [sys.executable, os.path.abspath(__file__), "--trials", str(args.trials),
               "--out", out, "--json", os.path.join(out, "summary.json")]
        cmd += ["--keep"] if args.keep else []
        cmd += ["--allow-degraded"] if args.allow_degraded else []
        for n in part:
            cmd += ["--scenario", n]
        print("chaos: part %d: %s" % (k + 1, " ".join(part)), flush=True)
        procs.append((out, subprocess.Popen(cmd)))

    def forward(signum, frame):
        for _, p in procs:
            if p.poll() is None:
                p.send_signal(signum)
    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)
    rcs = [p.wait() for _, p in procs]
    merged = {"passed": 0, "failed": 0, "degraded": False, "trials": [], "logs": base}
    for out, _ in procs:
        try:
            with open(os.path.join(out, "summary.json")) as f:
                d = json.load(f)
        except (OSError, ValueError) as e:
            print("chaos: no summary from %s: %s" % (out, e), flush=True)
            merged["failed"] += 1
            continue
        for k in ("passed", "failed"):
            merged[k] += d[k]
        merged["degraded"] = merged["degraded"] or d["degraded"]
        merged["zkelect"] = d["zkelect"]
        merged["trials"] += d["trials"]
    merged["seconds"] = round(time.monotonic() - t0, 1)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(merged, f, indent=1, default=str)
    where = "logs under %s" % base
    if merged["failed"] == 0 and not any(rcs) and not args.keep and not args.out:
        shutil.rmtree(base, ignore_errors=True)
        where = "logs removed; --keep keeps them"
    print("%d passed, %d failed (%.0fs in %d parts; %s)"
          % (merged["passed"], merged["failed"], merged["seconds"], len(procs), where), flush=True)
    bad = [r for r in rcs if r != 0]
    if bad:
        return bad[0] if bad[0] > 0 else 2
    return 1 if merged["failed"] else 0


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=1)
    ap.add_argument("--scenario", action="append", default=[], metavar="NAME",
                    help="run only these (repeatable); default all")
    ap.add_argument("--keep", action="store_true", help="keep the logs of passing trials too")
    ap.add_argument("--json", metavar="FILE", help="write a JSON summary of all trials")
    ap.add_argument("--out", metavar="DIR", help="directory for logs (default: a new temp dir)")
    ap.add_argument("--allow-degraded", action="store_true",
                    help="accept an agent without zkelect.every/spawn (no duty process)")
    ap.add_argument("--list", action="store_true", help="list the scenarios and exit")
    ap.add_argument("--jobs", type=int, default=1, metavar="N",
                    help="run the scenarios in N runs at once, each in its own namespaces with its "
                         "own ensemble (default 1)")
    try:
        args = ap.parse_args(argv[1:])
    except SystemExit as e:
        return 64 if e.code else 0
    names = [s["name"] for s in SCENARIOS]
    if args.list:
        print("\n".join(names))
        return 0
    for n in args.scenario:
        if n not in names:
            print("chaos: unknown scenario %r (known: %s)" % (n, ", ".join(names)), file=sys.stderr)
            return 64
    if args.trials < 1:
        print("chaos: --trials must be >= 1", file=sys.stderr)
        return 64
    if args.jobs < 1:
        print("chaos: --jobs must be >= 1", file=sys.stderr)
        return 64
    if args.jobs > 1:
        return run_jobs(args, [s["name"] for s in SCENARIOS
                               if not args.scenario or s["name"] in args.scenario])

    net.reexec_private([os.path.abspath(__file__)] + argv[1:])    # exits in the host namespace

    chosen = [s for s in SCENARIOS if not args.scenario or s["name"] in args.scenario]
    run = Run(args)

    def on_signal(signum, frame):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise Interrupted("signal %d" % signum)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    t_all = time.monotonic()
    rc = 0
    try:
        run.setup()
        for trial in range(1, args.trials + 1):
            for sc in chosen:
                r = run.run_trial(sc, trial)
                print(fmt_result(r), flush=True)
    except SetupError as e:
        print("chaos: setup error: %s" % e, flush=True)
        rc = 2
    except Interrupted as e:
        print("chaos: interrupted (%s); tearing down" % e, flush=True)
        rc = 130
    except Exception:
        traceback.print_exc()
        rc = 2
    finally:
        run.teardown()
    passed = sum(1 for r in run.results if r["verdict"] == "pass")
    failed = len(run.results) - passed
    total_s = time.monotonic() - t_all
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"passed": passed, "failed": failed, "seconds": round(total_s, 1),
                       "zkelect": h.ZKELECT_BIN, "degraded": run.degraded, "logs": run.base,
                       "trials": run.results}, f, indent=1, default=str)
    if run.degraded:
        print("chaos: WARNING: degraded run (agent without zkelect.every/spawn: no duty process)")
    where = "logs under %s" % run.base
    if run.ens_dir:
        where += ", the ensemble's under %s" % run.ens_dir
    if failed == 0 and not args.keep and rc == 0:
        if run.ens_dir:
            shutil.rmtree(run.ens_dir, ignore_errors=True)
        where = "logs under %s" % run.base
        if not args.out:
            shutil.rmtree(run.base, ignore_errors=True)
            where = "logs removed; --keep keeps them"
    print("%d passed, %d failed (%.0fs; %s)" % (passed, failed, total_s, where), flush=True)
    if rc:
        return rc
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
