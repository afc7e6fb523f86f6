#!/usr/bin/python3
"""Bad command lines and bad scripts: the documented sysexits code and a
single stderr line naming the offending value; never a crash or a Lua
traceback. Also --help and --version."""
import os
import re
import sys
import time

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


def expect(args, code, *names, timeout=10.0, one_line=True):
    """Runs args; checks exit code, one stderr line naming every `names`, no
    crash. With one_line=False earlier (log) lines are allowed and the last
    line must name the values."""
    rc, out, err, dt = h.run(args, timeout=timeout)
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


def test_missing_script_file():
    missing = os.path.join(h.mkdtemp("bad"), "no-such-policy.lua")
    expect(argv(script=missing), 66, missing)


def test_script_is_a_directory():
    d = h.mkdtemp("dir-as-script")
    expect(argv(script=d), (66, 78), d)


def test_script_syntax_error():
    _, line, _ = expect(argv(script=SYNTAX), 78, "syntax_error.lua:4")


def test_path_not_absolute():
    expect(argv(path="app/election"), 64, "app/election")


def test_path_empty_component():
    expect(argv(path="/a//b"), 64, "/a//b")


def test_unknown_flag():
    expect(argv() + ["--bogus"], 64, "--bogus")


def test_session_timeout_not_a_number():
    expect(argv(session_timeout="abc"), 64, "abc")


def test_compat_unknown():
    expect(argv(compat="zookeeper"), 64, "--compat", "zookeeper", "curator", "kazoo")
    rc, out, err, _ = h.run(argv(), timeout=10, env={"ZKELECT_COMPAT": "Curator"})
    assert rc == 64 and "ZKELECT_COMPAT" in err and "Curator" in err, (rc, err)


def test_missing_id():
    expect(argv(drop=("--id",)), 64, "--id")


def test_zookeeper_unreachable():
    t0 = time.monotonic()
    rc, line, dt = expect(argv(script=GOOD), 69, "127.0.0.1:1", timeout=15, one_line=False)
    assert dt < 10.0, "took %.1fs to give up" % dt
    assert dt >= 1.0, "gave up after %.2fs, before the 1.5 s connect timeout" % dt
    assert time.monotonic() - t0 < 15


def test_help_and_version():
    rc, out, err, _ = h.run([h.ZKELECT_BIN, "--help"], timeout=10)
    assert rc == 0, (rc, out, err)
    assert "--zk" in out + err and "--path" in out + err, (out, err)
    assert not h.crash_markers(out + err)
    rc, out, err, _ = h.run([h.ZKELECT_BIN, "--version"], timeout=10)
    assert rc == 0, (rc, out, err)
    assert re.search(r"\d+\.\d+\.\d+", out + err), (out, err)
    assert not h.crash_markers(out + err)



def test_missing_chroot_and_hook_budget():
    with h.ZooKeeper() as zk:
        # the chroot in the connect string does not exist: a configuration error
        expect(argv(zk=zk.hostport + "/nochroot", connect_timeout="10000"), 78, "chroot",
               timeout=20, one_line=False)
    # a hook budget that would starve the session's pings is refused up front
    expect(argv(session_timeout="3000", hook_timeout="2500"), 78, "--hook-timeout", "2500", "3000")

if __name__ == "__main__":
    h.run_tests(globals())
