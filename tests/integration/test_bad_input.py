#!/usr/bin/python3
"""Bad command lines and bad scripts: the documented sysexits code and a
single stderr line naming the offending value; never a crash or a Lua
traceback. Also --help and --version. Every row of docs/operations.md's "Bad input"
table is checked here, except two that have their own tests: authentication
rejected (test_auth.py: test_unknown_scheme_rejected, test_enforced_auth_*,
exit 77) and a missing chroot for status/watch (test_auth.py, test_status.py;
`run` is checked below)."""
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zkharness as h  # noqa: E402

# Nothing listens on port 1; every case that should fail before connecting
# gets a short connect timeout, so a missing check shows as a wrong code, not
# as a hang.
BASE = {"--zk": "127.0.0.1:1", "--path": "/app/election", "--id": "bad", "--connect-timeout": "1500"}
SYNTAX = os.path.join(h.POLICIES, "syntax_error.lua")
GOOD = os.path.join(h.POLICIES, "log_hooks.lua")


def argv(drop=(), **over):
    opts = dict(BASE)
    for k in drop:
        opts.pop(k)
    for k, v in over.items():
        opts["--" + k.replace("_", "-")] = v
    out = [h.ZKELECT_BIN, "run"]
    for k, v in opts.items():
        out += [k, v]
    return out


_wrapped_kinds = set()


def expect(args, code, *names, timeout=10.0, one_line=True, kind=None):
    """Runs args; checks exit code, one stderr line naming every `names`, no
    crash. With one_line=False earlier (log) lines are allowed and the last
    line must name the values. Under ZKELECT_WRAP (valgrind: ~1 s a process)
    only the first case of each `kind` of a long table runs wrapped; every
    case is checked the same way."""
    nowrap = kind is not None and kind in _wrapped_kinds
    if kind is not None:
        _wrapped_kinds.add(kind)
    rc, out, err, dt = h.run(args, timeout=timeout, nowrap=nowrap)
    lines = [l for l in err.splitlines() if l.strip()]
    ctx = "command: %s\nexit %s after %.2fs\nstdout: %r\nstderr: %r" % (" ".join(args), rc, dt, out[-2000:],
                                                                      err[-2000:])
    assert not h.crash_markers(out + err), "crash output\n" + ctx
    assert rc == code if isinstance(code, int) else rc in code, "expected exit %s\n%s" % (code, ctx)
    if one_line:
        assert len(lines) == 1, "expected exactly one line on stderr\n" + ctx
    assert lines, "nothing on stderr\n" + ctx
    for n in names:
        assert n in lines[-1], "stderr does not name %r\n%s" % (n, ctx)
    return rc, lines[-1], dt


def test_priorities_refused():
    expect(argv(priority="5", compat="kazoo"), 78, "priorities need zkelect's own node data")
    expect(argv(priority="1000001"), 64, "--priority 1000001", "0..1000000")
    expect(argv(preempt_check="50"), 64, "--preempt-check 50")


def test_missing_script_file():
    missing = os.path.join(h.mkdtemp("bad"), "no-such-policy.lua")
    expect(argv(script=missing), 66, missing)


def test_script_is_a_directory():
    d = h.mkdtemp("dir-as-script")
    _, line, _ = expect(argv(script=d), 66, d, "directory")
    expect([h.ZKELECT_BIN, "check", "--script", d], 66, d)
    expect([h.ZKELECT_BIN, "watch", "--zk", "127.0.0.1:1", "--path", "/e", "--script", d], 66, d)


def test_script_binary_huge_or_failing():
    d = h.mkdtemp("bad-scripts")
    cases = []
    # Lua bytecode (the header of a 5.4 chunk): load() only takes text
    p = os.path.join(d, "bytecode.luac")
    with open(p, "wb") as f:
        f.write(b"\x1bLua\x54\x00\x19\x93\r\n\x1a\n\x04\x08\x08" + bytes(64))
    cases.append((p, 78, ["bytecode.luac", "binary"]))
    # random bytes (not text, no shebang line)
    p = os.path.join(d, "random.bin")
    data = bytearray(random.Random(7).randbytes(4096))
    data[0] = 0x80
    with open(p, "wb") as f:
        f.write(bytes(data))
    cases.append((p, 78, ["random.bin"]))
    # huge: 100 MiB (sparse), refused from its size without being read
    p = os.path.join(d, "huge.lua")
    with open(p, "wb") as f:
        f.truncate(100 << 20)
    cases.append((p, 78, ["huge.lua", "104857600 bytes", "4 MiB"]))
    # the top level raises
    p = os.path.join(d, "raises.lua")
    with open(p, "w") as f:
        f.write("function on_leader() end\nerror('boom: VIP_DEV is not set')\n")
    cases.append((p, 78, ["raises.lua", "boom: VIP_DEV is not set"]))
    # the top level returns an error (nil, message)
    p = os.path.join(d, "returns.lua")
    with open(p, "w") as f:
        f.write("function on_leader() end\nreturn nil, 'not configured: set UPSTREAM_FILE'\n")
    cases.append((p, 78, ["returns.lua", "not configured: set UPSTREAM_FILE"]))
    p = os.path.join(d, "false.lua")
    with open(p, "w") as f:
        f.write("return false\n")
    cases.append((p, 78, ["false.lua", "returned false"]))
    for path, code, names in cases:
        t0 = time.monotonic()
        for cmd in (argv(script=path), [h.ZKELECT_BIN, "check", "--script", path]):
            expect(cmd, code, *names)
        assert time.monotonic() - t0 < 10, "%s took %.1fs" % (path, time.monotonic() - t0)
    # a script that returns a value (a table, true) still loads
    p = os.path.join(d, "returns_table.lua")
    with open(p, "w") as f:
        f.write("function on_leader() end\nreturn { ok = true }\n")
    rc, out, err, _ = h.run([h.ZKELECT_BIN, "check", "--script", p], timeout=10)
    assert rc == 0 and "on_leader" in out, (rc, out, err)


def test_check_strict_refuses_warnings():
    d = h.mkdtemp("strict")
    p = os.path.join(d, "typo.lua")
    with open(p, "w") as f:
        f.write("function on_leader(ev) end\nfunction on_message(ev) end\nfunction on_stepdown(ev) end\n"
                "function on_stepdwon(ev) end\n")
    rc, line, _ = expect([h.ZKELECT_BIN, "check", "--strict", "--script", p], 78, p, "2 warnings (--strict)",
                         one_line=False)
    rc, out, err, _ = h.run([h.ZKELECT_BIN, "check", "--script", p], timeout=10)
    assert rc == 0 and "on_stepdwon" in err and "on_message" in err, (rc, out, err)


def test_misspelt_hook_refused():
    d = h.mkdtemp("misspelt")
    p = os.path.join(d, "typo.lua")
    with open(p, "w") as f:
        f.write("function on_leader(ev) end\nfunction on_stepdwon(ev) end\nfunction health_check() end\n")
    for cmd in (argv(script=p), [h.ZKELECT_BIN, "check", "--script", p]):
        expect(cmd, 78, p, "'on_stepdwon' is not a hook and on_stepdown is not defined: did you mean "
               "on_stepdown?", "'health_check' is not a hook and health is not defined", "not_hooks")


def test_script_syntax_error():
    _, line, _ = expect(argv(script=SYNTAX), 78, "syntax_error.lua:4")


def test_status_takeover_delay_needs_status():
    expect(argv() + ["--status-takeover-delay", "2000"], 64, "--status-takeover-delay", "--status")


def test_path_not_absolute():
    expect(argv(path="app/election"), 64, "app/election")


def test_path_empty_component():
    expect(argv(path="/a//b"), 64, "/a//b")


def test_paths_with_invalid_characters():
    bad = ["/a/b/", "/", "/a/../b", "/a/./b", "/a/..", "/zookeeper", "/zookeeper/quota/e",
           "/a/b\nc", "/a/\x01b", "/a/b\x7f", "a/b", ""]
    for cmd in ("run", "status", "watch"):
        for p in bad:
            args = argv(path=p) if cmd == "run" else \
                [h.ZKELECT_BIN, cmd, "--zk", "127.0.0.1:1", "--path", p, "--connect-timeout", "1500"]
            shown = re.sub(r"[\x00-\x1f\x7f]", lambda m: "\\x%02x" % ord(m.group()), p)
            expect(args, 64, *(["--path"] if p == "" else [shown]), kind="path " + cmd)
    for i in ["", "a/b", "x" * 129, "a\nb", "tab\there"]:
        shown = re.sub(r"[\x00-\x1f\x7f]", lambda m: "\\x%02x" % ord(m.group()), i)
        expect(argv(id=i), 64, *(["--id"] if i == "" else [shown[:30]]), kind="id")


# Every flag that takes a value: (flag, [bad values], commands that read it).
# The parser is shared, so each is refused by every command.
_NUM = ["abc", "", "1.5", "-5", "99999999999999999999", "12ms"]
FLAG_CASES = [
    ("--session-timeout", _NUM + ["0", "600001"]),
    ("--connect-timeout", _NUM + ["2147483648"]),
    ("--hook-timeout", _NUM + ["0", "3600001"]),
    ("--hook-budget", _NUM + ["0", "86400001"]),
    ("--stepdown-budget", _NUM + ["0", "600001"]),
    ("--lease-margin", _NUM + ["0", "600001"]),
    ("--renew-interval", _NUM + ["9", "300001"]),
    ("--health-interval", _NUM + ["9", "86400001"]),
    ("--health-fails", _NUM + ["0", "1001"]),
    ("--health-passes", _NUM + ["0", "1001"]),
    ("--notify-timeout", _NUM + ["0", "3600001"]),
    ("--status-takeover-delay", _NUM + ["3600001"]),
    ("--drift", ["abc", "", "0", "0.5", "-0.01", "1e9", "nan"]),
    ("--log", ["xml", "", "JSON"]),
    ("--log-level", ["loud", "", "INFO"]),
    ("--on-disconnect", ["panic", ""]),
    ("--compat", ["zookeeper", ""]),
    ("--on-leader-error", ["explode", ""]),
    ("--acl", ["everyone", ""]),
    ("--fail-stop", ["never", "", "Agent"]),
    ("--restart", ["sometimes", "", "on_failure"]),
    ("--on-exit", ["explode", "", "Resign"]),
]


def every_flag_malformed_or_out_of_range(cmd):
    # only options the command reads (the others are refused: test_options_a_command_does_not_read)
    reads = {"run": ["--zk", "127.0.0.1:1", "--path", "/e", "--id", "x", "--connect-timeout", "1500"],
             "status": ["--zk", "127.0.0.1:1", "--path", "/e", "--connect-timeout", "1500"],
             "watch": ["--zk", "127.0.0.1:1", "--path", "/e", "--id", "x", "--connect-timeout", "1500"],
             "check": ["--path", "/e", "--id", "x"]}
    base = [h.ZKELECT_BIN, cmd] + reads[cmd]
    for flag, values in FLAG_CASES:
        for v in values:
            # the flag under test comes last, so it wins over base's
            expect(base + [flag, v], 64, *([flag] + ([v] if v else [])), kind=flag)
        # and without its value
        expect(base + [flag], 64, flag, "needs a value", kind="novalue")
    expect(base + ["--no-such-flag"], 64, "--no-such-flag", kind="unknown")
    expect(base + ["stray"], 64, "stray", kind="stray")


# one test per command: each stays well inside the per-test bound under ASan
def test_every_flag_malformed_or_out_of_range_run():
    every_flag_malformed_or_out_of_range("run")


def test_every_flag_malformed_or_out_of_range_status():
    every_flag_malformed_or_out_of_range("status")


def test_every_flag_malformed_or_out_of_range_watch():
    every_flag_malformed_or_out_of_range("watch")


def test_every_flag_malformed_or_out_of_range_check():
    every_flag_malformed_or_out_of_range("check")


def test_string_flags_malformed():
    zk_bad = ["", "localhost", "host:", ":2181", "h:port", "h:65536", "a:1,,b:2", "h:1/", "h:1/a/../b"]
    for cmd in ("run", "status", "watch"):
        for z in zk_bad:
            args = argv(zk=z) if cmd == "run" else [h.ZKELECT_BIN, cmd, "--zk", z, "--path", "/e"]
            expect(args, 64, *(["--zk"] if z == "" else [z]), kind="zk " + cmd)
    for s in ["notaport", "127.0.0.1:99999", "127.0.0.1:", "300.1.1.1:80", "[::1"]:
        expect(argv(status=s), 64, "--status", s, kind="status")
    d = h.mkdtemp("session-file")
    for f in ["/nonexistent/dir/f", d + "/", ""]:
        expect(argv(session_file=f), 64, "--session-file", *([f] if f else []), kind="session-file")
    for a in ["nocolon", "digest:", ":secret"]:
        rc, line, _ = expect(argv(auth=a), 64, "--auth", kind="auth")
        assert "secret" not in line, line
    missing = os.path.join(d, "no-such-auth")
    expect(argv(auth_file=missing), 66, missing)
    expect(argv(auth_file=d), 66, d)
    empty = os.path.join(d, "empty.auth")
    open(empty, "w").close()
    os.chmod(empty, 0o600)
    expect(argv(auth_file=empty), 78, empty, "empty")
    expect(argv(acl="creator-all"), 64, "--acl", "creator-all")


def test_notify_not_an_executable_file():
    """--notify: a missing file or a directory (66), a file we may not execute (77),
    an empty value (64); refused before joining, one line naming the file."""
    d = h.mkdtemp("notify-bad")
    missing = os.path.join(d, "no-such-notify.sh")
    expect(argv(notify=missing), 66, "--notify", missing, "No such file")
    expect(argv(notify=d), 66, "--notify", d, "directory")
    plain = os.path.join(d, "not-executable.sh")
    with open(plain, "w") as f:
        f.write("#!/bin/sh\n")
    os.chmod(plain, 0o644)
    expect(argv(notify=plain), 77, "--notify", plain, "not executable")
    expect(argv(notify=""), 64, "--notify")


def test_options_a_command_does_not_read():
    """An option that means nothing for the command (`status --script`,
    `watch --notify`, `run --json`, `check --json`...) is refused (64), naming
    the option, the command and the commands that read it; it was accepted
    and ignored. The ZKELECT_* variables are not refused for a command that
    ignores them (a unit's environment file serves check and run), and what
    each command reads is still taken."""
    zk = ["--zk", "127.0.0.1:1", "--path", "/e"]
    cases = [
        (["status"] + zk + ["--script", GOOD], "--script", "status", "run, check and watch read it"),
        (["status"] + zk + ["--id", "x"], "--id", "status", None),
        (["status"] + zk + ["--log", "json"], "--log", "status", None),
        (["watch"] + zk + ["--notify", "/bin/true"], "--notify", "watch", "run and check read it"),
        (["watch"] + zk + ["--data", "d"], "--data", "watch", None),
        (["watch"] + zk + ["--json"], "--json", "watch", None),
        (["check", "--script", GOOD, "--json"], "--json", "check", "status, ctl and history read it"),
        (["check", "--script", GOOD, "-i", "db"], "--instance", "check", "ctl reads it"),
        (["run"] + zk + ["--id", "x", "--json"], "--json", "run", "status, ctl and history read it"),
        (["run"] + zk + ["--id", "x", "-i", "db"], "--instance", "run", "ctl reads it"),
        (["run"] + zk + ["--id", "x", "--strict"], "--strict", "run", "check reads it"),
        (["ctl", "--control", "/nonexistent.sock", "--script", GOOD, "status"], "--script", "ctl", None),
        (["demo", "--zk", "127.0.0.1:1"], "--zk", "demo", None),
        (["demo", "--log", "json"], "--log", "demo", None),
    ]
    for args, flag, cmd, who in cases:
        rc, line, _ = expect([h.ZKELECT_BIN] + args, 64, flag + " means nothing for zkelect " + cmd,
                             *([who] if who else []), kind="foreign")
    # a malformed value is said first, whoever reads the option
    expect([h.ZKELECT_BIN, "status"] + zk + ["--hook-timeout", "abc"], 64, "--hook-timeout", "abc")
    # the variables of a shared environment file: ignored, not refused
    env = {"ZKELECT_SCRIPT": GOOD, "ZKELECT_NOTIFY": "/bin/true", "ZKELECT_ID": "x",
           "ZKELECT_DATA": "d", "ZKELECT_SESSION_TIMEOUT": "4000", "ZKELECT_ZK": "127.0.0.1:1",
           "ZKELECT_PATH": "/e"}
    rc, out, err, _ = h.run([h.ZKELECT_BIN, "status", "--path", "/e", "--connect-timeout", "500"],
                            env=env, timeout=15)
    assert rc == 69 and "means nothing" not in err, (rc, err)
    rc, out, err, _ = h.run([h.ZKELECT_BIN, "check"], env=env, timeout=15)
    assert rc == 0 and GOOD in out, (rc, out, err)
    # what each reads is taken (documented forms)
    rc, out, err, _ = h.run([h.ZKELECT_BIN, "check", "--strict", "--script", GOOD, "--id", "x",
                             "--path", "/e"], timeout=15)
    assert rc == 0, (rc, out, err)
    rc, out, err, _ = h.run([h.ZKELECT_BIN, "ctl", "--control", "/nonexistent.sock", "status",
                             "--json"], timeout=15)
    assert rc == 69 and "means nothing" not in err, (rc, err)


def test_unknown_flag():
    expect(argv() + ["--bogus"], 64, "--bogus")


def test_session_timeout_not_a_number():
    expect(argv(session_timeout="abc"), 64, "abc")


def test_compat_unknown():
    expect(argv(compat="zookeeper"), 64, "--compat", "zookeeper", "curator", "kazoo")
    rc, out, err, _ = h.run(argv(), timeout=10, env={"ZKELECT_COMPAT": "Curator"})
    assert rc == 64 and "ZKELECT_COMPAT" in err and "Curator" in err, (rc, err)


def test_fail_stop_unknown():
    expect(argv() + ["--fail-stop", "kill"], 64, "--fail-stop", "kill", "agent", "groups", "off")
    rc, out, err, _ = h.run(argv(), timeout=10, env={"ZKELECT_FAIL_STOP": "never"})
    assert rc == 64 and "ZKELECT_FAIL_STOP" in err and "never" in err, (rc, err)


def test_session_file_password():
    """--session-file-password (the password in the session file) needs
    --session-file, for run and check alike (64); ZKELECT_SESSION_FILE_PASSWORD
    is 1 or 0 (64 otherwise, naming it and the value); check reads the flag as
    run does, status does not read it."""
    d = h.mkdtemp("session-file-password")
    check = [h.ZKELECT_BIN, "check", "--zk", "127.0.0.1:1", "--path", "/e", "--id", "x"]
    for args in (argv() + ["--session-file-password"], check + ["--session-file-password"]):
        expect(args, 64, "--session-file-password", "give --session-file FILE too")
    for v in ("yes", "", "2"):
        rc, out, err, _ = h.run(argv(session_file=os.path.join(d, "f")), timeout=10,
                                env={"ZKELECT_SESSION_FILE_PASSWORD": v})
        assert rc == 64 and "ZKELECT_SESSION_FILE_PASSWORD '%s'" % v in err \
            and "expected 1 (on) or 0 (off)" in err and len(err.strip().splitlines()) == 1, (v, rc, err)
    rc, out, err, _ = h.run(check, timeout=10, env={"ZKELECT_SESSION_FILE_PASSWORD": "1"})
    assert rc == 64 and "give --session-file FILE too" in err, (rc, out, err)
    for env in ({}, {"ZKELECT_SESSION_FILE_PASSWORD": "0"}, {"ZKELECT_SESSION_FILE_PASSWORD": "1"}):
        rc, out, err, _ = h.run(check + ["--session-file", os.path.join(d, "f"), "--session-file-password"],
                                timeout=10, env=env)
        assert rc == 0 and "settings: ok" in out, (env, rc, out, err)
    rc, out, err, _ = h.run(check, timeout=10, env={"ZKELECT_SESSION_FILE_PASSWORD": "0"})
    assert rc == 0 and "settings: ok" in out, (rc, out, err)
    expect([h.ZKELECT_BIN, "status", "--zk", "127.0.0.1:1", "--path", "/e", "--session-file-password"],
           64, "--session-file-password means nothing for zkelect status", "run and check read it")


def test_zk_scheme_extra_colon_and_unresolvable_name():
    """--zk mistakes: a scheme (not "an invalid chroot"), a second ':' in one element
    (64, for run, status and watch); a host name that does not resolve is said to
    be one, at every retry and in the final error (69), never "No such file or
    directory". A bare IPv6 address is still a host."""
    for cmd in ("run", "status", "watch"):
        base = argv() if cmd == "run" else [h.ZKELECT_BIN, cmd, "--zk", "127.0.0.1:1", "--path", "/e",
                                            "--connect-timeout", "1500"]
        for z, names in (("http://127.0.0.1:2181", ["'http://'", "no scheme: HOST:PORT[,HOST:PORT...][/chroot]"]),
                         ("zk://zk1:2181,zk2:2181/app", ["'zk://'", "no scheme"]),
                         ("zk1:2181:2182", ["'zk1:2181:2182'", "more than one ':'"]),
                         ("zk1:2181,zk2:2181:2182", ["'zk2:2181:2182'", "more than one ':'"])):
            _, line, _ = expect(base + ["--zk", z], 64, *names, kind="zk-mistake " + cmd)
            assert "chroot '" not in line, line
    # the name that does not resolve: the three commands at once (each waits
    # out its connect timeout)
    name = "no-such-host.invalid"
    res = h.run_together([(argv() if cmd == "run" else
                           [h.ZKELECT_BIN, cmd, "--zk", "127.0.0.1:1", "--path", "/e",
                            "--connect-timeout", "1500"]) + ["--zk", name + ":2181"]
                          for cmd in ("run", "status", "watch")], timeout=15)
    for cmd, (rc, out, err, _) in zip(("run", "status", "watch"), res):
        lines = [l for l in err.splitlines() if l.strip() and "ZOO_ERROR" not in l]
        assert rc == 69, (cmd, rc, err)
        assert "No such file or directory" not in err, err
        assert "'%s'" % name in lines[-1] and "does not resolve" in lines[-1], lines[-1]
        if cmd != "status":     # status tries once; run and watch retry and say so
            assert any("does not resolve" in l and "retrying" in l for l in lines[:-1]), err
    # an IPv6 literal has colons of its own: accepted (then unreachable: 69)
    expect(argv(zk="::1:1", connect_timeout="1000"), 69, "::1:1", one_line=False)


def test_missing_id():
    expect(argv(drop=("--id",)), 64, "--id")


def test_zookeeper_unreachable():
    t0 = time.monotonic()
    rc, line, dt = expect(argv(script=GOOD), 69, "127.0.0.1:1", timeout=15, one_line=False)
    assert dt < 10.0, "took %.1fs to give up" % dt
    assert dt >= 1.0, "gave up after %.2fs, before the 1.5 s connect timeout" % dt
    assert time.monotonic() - t0 < 15


def test_zookeeper_refused_said_once_and_alike():
    """A port where nothing listens: run, watch and status end with the same
    line, naming the socket's error ("connection refused"); the client's own
    lines (one a second, then: "ZOO_ERROR@check_events ... errno=111") are
    folded into one warning; status gives up after its short default (5 s,
    not the 15 s of run and watch). The four commands run at once, each
    waiting out its own time."""
    zkhosts = "127.0.0.1:1"
    want = ("cannot connect to ZooKeeper at '%s' within 3000 ms: ZooKeeper %s: connection refused"
            % (zkhosts, zkhosts))
    cmds = ("run", "watch", "status")
    default = [h.ZKELECT_BIN, "status", "--zk", zkhosts, "--path", "/e"]
    res = h.run_together([argv(connect_timeout="3000") if cmd == "run" else
                          [h.ZKELECT_BIN, cmd, "--zk", zkhosts, "--path", "/e", "--connect-timeout", "3000"]
                          for cmd in cmds] + [default], timeout=20)
    for cmd, (rc, out, err, dt) in zip(cmds, res):
        lines = [l for l in err.splitlines() if l.strip()]
        assert rc == 69 and lines and lines[-1] == "zkelect: error: " + want, (cmd, rc, err)
        assert "ZOO_" not in err and "zookeeper:" not in err, (cmd, err)
        warned = [l for l in lines if "connection refused; retrying" in l]
        assert len(warned) <= 1, (cmd, err)
    rc, out, err, dt = res[-1]
    lines = [l for l in err.splitlines() if l.strip()]
    assert not h.crash_markers(out + err) and rc == 69 and len(lines) == 1, (rc, out, err)
    assert "within 5000 ms" in lines[0] and "connection refused" in lines[0], err
    assert 4.5 <= dt < 10, "status gave up after %.1f s (default 5000 ms)" % dt


def test_help_and_version():
    rc, out, err, _ = h.run([h.ZKELECT_BIN, "--help"], timeout=10)
    assert rc == 0, (rc, out, err)
    assert "--zk" in out + err and "--path" in out + err, (out, err)
    assert not h.crash_markers(out + err)
    rc, out, err, _ = h.run([h.ZKELECT_BIN, "--version"], timeout=10)
    assert rc == 0, (rc, out, err)
    assert re.search(r"\d+\.\d+\.\d+", out + err), (out, err)
    assert not h.crash_markers(out + err)



class SilentServer:
    """Accepts TCP connections and reads what comes, never answers: a
    ZooKeeper that takes the connection but is stuck."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.hostport = "127.0.0.1:%d" % self.sock.getsockname()[1]
        self.conns = []
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            self.conns.append(c)
            threading.Thread(target=self._drain, args=(c,), daemon=True).start()

    @staticmethod
    def _drain(c):
        try:
            while c.recv(4096):
                pass
        except OSError:
            pass

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)   # wakes the accept
        except OSError:
            pass
        self.sock.close()
        for c in self.conns:
            c.close()


def test_zookeeper_that_never_answers():
    """run, status and watch (at once) against a server that takes the
    connection and never answers: exit 69 naming it, after the connect timeout."""
    srv = SilentServer()
    try:
        cmds = ("run", "status", "watch")
        res = h.run_together([argv(zk=srv.hostport, connect_timeout="2000") if cmd == "run" else
                              [h.ZKELECT_BIN, cmd, "--zk", srv.hostport, "--path", "/e", "--connect-timeout",
                               "2000"] for cmd in cmds], timeout=30)
        for cmd, (rc, out, err, dt) in zip(cmds, res):
            lines = [l for l in err.splitlines() if l.strip()]
            assert not h.crash_markers(out + err) and rc == 69 and lines, (cmd, rc, out, err)
            assert srv.hostport in lines[-1], (cmd, err)
            assert 1.9 <= dt < 15, "%s gave up after %.2fs (--connect-timeout 2000)" % (cmd, dt)
        assert srv.accepted >= 3, "the server saw %d connections" % srv.accepted
    finally:
        srv.close()


def test_election_path_under_an_ephemeral_node():
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "holder", path="/app/e")
        node = a.wait_for("leader")["node"]
        eph = "/app/e/" + node
        # the election path is a candidate's (ephemeral) node, or lies below one
        for p in (eph, eph + "/sub", eph + "/sub/deeper"):
            rc, line, dt = expect(argv(zk=zk.hostport, path=p, connect_timeout="10000"), 78,
                                  eph, "ephemeral", timeout=30, one_line=False)
            assert dt < 10, dt
        # nothing was created, and the holder still leads
        rc, out, err, _ = h.run([h.ZKELECT_BIN, "status", "--zk", zk.hostport, "--path", "/app/e"])
        assert rc == 0 and "leader: holder" in out and "1 candidate" in out, (rc, out, err)
        assert a.alive()


STALL_POLICY = """
-- 600 lines of 1 KiB: more than the pipe (64 KiB) and the 256 KiB the agent
-- keeps for a sink that is full
local function flood(what)
  local pad = string.rep("x", 1000)
  for i = 1, 600 do zkelect.log("info", what .. " " .. i .. " " .. pad) end
end
function on_leader(ev) flood("flood") end
function on_stepdown(ev) flood("down") end
"""


def test_a_log_pipe_nobody_reads():
    """stderr on a pipe that is full and not read (journald under pressure,
    Docker's blocking log mode, a stopped `| logger`; here a stopped `cat`):
    the agent still joins, leads and renews through two session timeouts;
    the lines that did not fit are counted, and once the pipe is read one
    line says how many were lost; a step-down that logs 600 KiB into a
    stalled pipe still hands over at once (the successor's fast path), and
    the agent exits, waiting at most 1 s for the sink. Every line that comes
    out is whole, and the lines are in order."""
    with h.ZooKeeper() as zk:
        port = h.free_port()
        d = h.mkdtemp("logstall")
        pol = os.path.join(d, "flood.lua")
        with open(pol, "w") as f:
            f.write(STALL_POLICY)
        out = os.path.join(d, "stderr")
        r, w = os.pipe()
        os.set_blocking(w, False)
        try:                        # full before the agent writes anything
            while True:
                os.write(w, b"#" * 4096)
        except BlockingIOError:
            pass
        os.set_blocking(w, True)
        with open(out, "wb") as o:
            reader = subprocess.Popen(["cat"], stdin=r, stdout=o, preexec_fn=h._pdeathsig)
        os.close(r)
        reader.send_signal(signal.SIGSTOP)
        T = 4000
        p = subprocess.Popen(h.wrap([h.ZKELECT_BIN, "run", "--zk", zk.hostport, "--path", "/app/stall",
                                     "--id", "stall", "--session-timeout", str(T), "--log", "json",
                                     "--log-level", "debug", "--script", pol,
                                     "--status", "127.0.0.1:%d" % port]),
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=w,
                             preexec_fn=h._pdeathsig)
        os.close(w)

        def metric(name):
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=2) as resp:
                    body = resp.read().decode()
            except OSError:
                return None
            m = re.search(r"^%s (\S+)$" % name, body, re.M)
            return float(m.group(1)) if m else None

        def read_out():
            with open(out, "rb") as f:
                return f.read().replace(b"#", b"").decode()
        try:
            h.wait_until(lambda: metric("zkelect_is_leader") == 1, 20, "the agent whose log nobody reads leads")
            b = h.Agent(zk, "b", path="/app/stall", session_timeout=T)
            b.wait_for("follower")
            time.sleep(2 * T / 1000)        # the claim: it renews, so it still leads after 2 T
            assert p.poll() is None and metric("zkelect_is_leader") == 1, "it lost its lead"
            assert not b.find("leader"), b.describe()
            lost = metric("zkelect_log_dropped_lines_total")
            assert lost >= 100, lost
            reader.send_signal(signal.SIGCONT)
            h.wait_until(lambda: '"log_dropped"' in read_out(), 10, "the line that counts the lost ones")
            reader.send_signal(signal.SIGSTOP)
            mb = b.mark()
            t0 = time.monotonic()
            p.send_signal(signal.SIGTERM)   # its on_stepdown floods the stopped pipe
            b.wait_for("leader", timeout=T / 1000, since=mb)    # a hand-over, not an expiry
            took = time.monotonic() - t0
            assert took < T / 1000 / 2, took
            assert p.wait(10) == 0, p.returncode
            reader.send_signal(signal.SIGCONT)
            assert reader.wait(10) == 0
            recs = [json.loads(l) for l in read_out().splitlines() if l]   # every line whole
            assert "start" in [x["event"] for x in recs[:3]], recs[:3]
            for what in ("flood", "down"):
                n = [int(x["msg"].split()[1]) for x in recs
                     if x.get("msg", "").startswith(what + " ")]
                assert n and n == sorted(n) and n[0] == 1, (what, n[:5])
            print("  info: %d lines dropped while the pipe was full; the hand-over took %.0f ms"
                  % (lost, took * 1000), flush=True)
        finally:
            for x in (p, reader):
                if x.poll() is None:
                    x.send_signal(signal.SIGCONT)
                    x.kill()
                    x.wait(10)


def test_log_on_a_full_disk():
    """stderr on /dev/full (ENOSPC on every write): the agent keeps its
    election going, counts the lost lines, and hands over cleanly."""
    with h.ZooKeeper() as zk:
        port = h.free_port()
        full = open("/dev/full", "wb")
        p = subprocess.Popen(h.wrap([h.ZKELECT_BIN, "run", "--zk", zk.hostport, "--path", "/app/full",
                                     "--id", "full", "--session-timeout", "4000", "--log-level", "debug",
                                     "--status", "127.0.0.1:%d" % port]),
                             stdin=subprocess.DEVNULL, stdout=full, stderr=full, preexec_fn=h._pdeathsig)
        full.close()
        try:
            def metric(name):
                try:
                    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=2) as r:
                        body = r.read().decode()
                except OSError:
                    return None
                m = re.search(r"^%s (\S+)$" % name, body, re.M)
                return float(m.group(1)) if m else None
            h.wait_until(lambda: metric("zkelect_is_leader") == 1, 20, "the agent on /dev/full leads")
            assert metric("zkelect_log_dropped_lines_total") >= 3, metric("zkelect_log_dropped_lines_total")
            b = h.Agent(zk, "b", path="/app/full")
            b.wait_for("follower")
            time.sleep(1.0)
            assert p.poll() is None, "exited with %s" % p.returncode
            p.send_signal(15)
            assert p.wait(20) == 0, p.returncode
            b.wait_for("leader", timeout=5)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait(10)


def test_missing_chroot_and_hook_budget():
    with h.ZooKeeper() as zk:
        # the chroot in the connect string does not exist: a configuration error
        expect(argv(zk=zk.hostport + "/nochroot", connect_timeout="10000"), 78, "chroot",
               timeout=20, one_line=False)
    # a hook budget that would starve the session's pings is refused up front
    expect(argv(session_timeout="3000", hook_timeout="2500"), 78, "--hook-timeout", "2500", "3000")

def test_control_socket():
    """run --control at a path that is no socket (never followed or
    replaced), or too long; ctl with no agent (exit 69), no command, an
    unknown one, --to with another command, -i NAME that is none. The
    refusals of a live agent (resign --to an unknown id: 65, not next in
    line: 75, a socket still served: 75) are in integration.ctl."""
    d = h.mkdtemp("bad-ctl")
    plain = os.path.join(d, "file")
    with open(plain, "w") as f:
        f.write("keep me\n")
    expect(argv(control=plain), 78, plain, "not a socket")
    with open(plain) as f:
        assert f.read() == "keep me\n"
    expect(argv(control=d), 78, d, "not a socket")
    target = os.path.join(d, "target.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(target)
    s.close()
    link = os.path.join(d, "link")
    os.symlink(target, link)
    expect(argv(control=link), 78, link, "symbolic link")
    assert os.path.islink(link)
    expect(argv(control="/tmp/" + "x" * 120), 78, "longer than")
    ctl = [h.ZKELECT_BIN, "ctl"]
    missing = os.path.join(d, "none.sock")
    expect(ctl + ["--control", missing, "status"], 69, missing, "no agent")
    expect(ctl + ["--control", target, "status"], 69, target, "no agent")     # stale: nobody listens
    expect(ctl + ["--control", target, "resign", "--to", "x"], 69, target)
    expect(ctl + ["--control", target], 64, "missing ctl command")
    expect(ctl + ["--control", target, "stop"], 64, "'stop'")
    expect(ctl + ["--control", target, "status", "--to", "x"], 64, "--to")
    expect(ctl + ["--control", target, "status", "extra"], 64, "'extra'")
    # -i NAME: an instance's name (no socket named at all: integration.units,
    # which has a /run of its own)
    expect(ctl + ["-i", "../db", "status"], 64, "'../db'", "not an instance name")
    expect(ctl + ["--control", target, "-i", "db", "status"], 64, "--control and --instance")
    expect(argv() + ["-i", "db"], 64, "--instance means nothing for zkelect run", "ctl reads it")


def test_command_after_double_dash():
    """run ... -- CMD: a missing, empty, unknown or unusable command, and
    --restart/--on-exit that make no sense, are refused before joining."""
    expect(argv() + ["--"], 64, "'--'", "no command")
    expect(argv() + ["--", ""], 64, "'--'", "empty command")
    d = h.mkdtemp("bad-cmd")
    missing = os.path.join(d, "no-such-cmd")
    expect(argv() + ["--", missing, "arg"], 66, missing)
    expect(argv() + ["--", "zkelect-no-such-command"], 66, "zkelect-no-such-command", "$PATH")
    expect(argv() + ["--", d], 66, d)
    plain = os.path.join(d, "not-executable")
    with open(plain, "w") as f:
        f.write("#!/bin/sh\n")
    os.chmod(plain, 0o644)
    expect(argv() + ["--", plain], 77, plain)
    # --restart / --on-exit without a command, or combined into nonsense
    expect(argv(restart="always"), 64, "--restart", "-- CMD")
    expect(argv(on_exit="resign"), 64, "--on-exit", "-- CMD")
    rc, _, err, _ = h.run(argv(), env=dict(os.environ, ZKELECT_RESTART="always"), timeout=10)
    assert rc == 64 and "ZKELECT_RESTART" in err and len(err.strip().splitlines()) == 1, (rc, err)
    expect(argv(on_exit="resign", restart="on-failure") + ["--", "true"], 64, "--on-exit resign",
           "--restart on-failure")
    expect(argv(on_exit="exit", restart="always") + ["--", "true"], 64, "--on-exit exit", "--restart always")
    expect(argv(restart="never") + ["--", "true"], 64, "--restart never", "--on-exit")
    # only run takes a command (check checks it); a "--" that is an option's value is no separator
    for cmd in ("status", "watch"):
        expect([h.ZKELECT_BIN, cmd, "--zk", "127.0.0.1:1", "--path", "/e", "--", "true"], 64,
               "only zkelect run", kind="cmd " + cmd)
    expect([h.ZKELECT_BIN, "check", "--zk", "127.0.0.1:1", "--path", "/e", "--id", "x", "--",
            "/nonexistent/cmd"], 66, "/nonexistent/cmd")
    # its environment form, for the shell: one it cannot parse is refused by run and check
    bad = "exec sleep '600"
    for args in (argv(), [h.ZKELECT_BIN, "check"] + argv()[2:8]):
        rc, _, err, _ = h.run(args, env=dict(ZKELECT_COMMAND=bad), timeout=10)
        assert rc == 78 and "ZKELECT_COMMAND '%s'" % bad in err and "Unterminated quoted string" in err, \
            (args, rc, err)
        assert len(err.strip().splitlines()) == 1, err
    expect(argv(data="--") + ["--"], 64, "no command")


if __name__ == "__main__":
    h.run_tests(globals())
