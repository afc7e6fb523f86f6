"""Builds examples/embed against an installed zkelect, the way a host project
would, and runs it against a real ZooKeeper (integration.install with a
staging prefix, integration.package with the Debian packages):

  cmake_build(prefix, static)  its CMakeLists.txt: find_package(zkelect 0.1 REQUIRED)
  make_build(pc_path, pc)      its Makefile: pkg-config zkelect / zkelect-static
  check_links(exe, shared)     libzkelect.so.0 is (or is not) among what it loads
  lead_and_stop(exe, zk)       one candidate leads, stops on SIGINT, exit 0
"""
import os
import shutil
import signal
import subprocess

import zkharness as h

SOURCE = os.path.join(h.REPO, "examples", "embed")


def _copy_source():
    """The example in a directory of its own (builds never write into the tree)."""
    d = os.path.join(h.mkdtemp("embed-src"), "embed")
    shutil.copytree(SOURCE, d, ignore=shutil.ignore_patterns("build*", "embed_libev", "embed_policy"))
    return d


def _check(p, what):
    assert p.returncode == 0, "%s failed (%d):\n%s\n%s" % (what, p.returncode, p.stdout[-4000:],
                                                          p.stderr[-4000:])


def cmake_build(prefix=None, static=False):
    """examples/embed built with CMake and find_package(zkelect); prefix: a
    staging prefix for CMAKE_PREFIX_PATH (None: the system's). Returns the
    directory of embed_libev and embed_policy."""
    src = _copy_source()
    build = os.path.join(src, "build")
    args = ["cmake", "-S", src, "-B", build, "-DEMBED_STATIC=%s" % ("ON" if static else "OFF")]
    if prefix:
        args.append("-DCMAKE_PREFIX_PATH=%s" % prefix)
    env = h._child_env()
    p = subprocess.run(args, capture_output=True, text=True, timeout=120, env=env)
    _check(p, "cmake configure of examples/embed (find_package(zkelect))")
    p = subprocess.run(["cmake", "--build", build, "-j2"], capture_output=True, text=True,
                       timeout=300, env=env)
    _check(p, "cmake --build of examples/embed")
    return build


def make_build(pc_path=None, pc="zkelect"):
    """examples/embed built with its Makefile and pkg-config (pc: zkelect
    for the .so, zkelect-static for the .a); pc_path: PKG_CONFIG_PATH."""
    src = _copy_source()
    env = h._child_env({"PKG_CONFIG_PATH": pc_path} if pc_path else None)
    p = subprocess.run(["make", "-C", src, "PC=%s" % pc], capture_output=True, text=True,
                       timeout=300, env=env)
    _check(p, "make PC=%s in examples/embed" % pc)
    return src


def check_links(exe, shared, libdir=None, env=None):
    """shared: the program loads libzkelect.so.0 (from libdir, when given);
    else it has libzkelect.a linked in and loads no libzkelect."""
    p = subprocess.run(["ldd", exe], capture_output=True, text=True, timeout=30,
                       env=h._child_env(env))
    _check(p, "ldd " + exe)
    lines = [l.strip() for l in p.stdout.splitlines() if "libzkelect" in l]
    if not shared:
        assert not lines, "%s should have libzkelect.a linked in, but loads:\n%s" % (exe, p.stdout)
        return
    assert len(lines) == 1 and lines[0].startswith("libzkelect.so.0 => "), p.stdout
    if libdir:
        got = lines[0].split("=>")[1].split("(")[0].strip()
        assert os.path.realpath(os.path.dirname(got)) == os.path.realpath(libdir), (got, libdir)
    for dep in ("liblua5.4.so", "libzookeeper_st.so", "libev.so", "libcjson.so"):
        assert dep in p.stdout, "%s does not load %s:\n%s" % (exe, dep, p.stdout)


def lead_and_stop(exe, zk, path, env=None):
    """embed_libev leads the election PATH on zk, then SIGINT stops it:
    one stepdown (shutdown), one stopped, exit 0."""
    out = os.path.join(h.mkdtemp("embed-run"), "out.log")
    with open(out, "wb") as f:
        proc = subprocess.Popen([exe, zk.hostport, path, "pkg-host"], stdin=subprocess.DEVNULL,
                                stdout=f, stderr=subprocess.STDOUT, env=h._child_env(env),
                                preexec_fn=h._pdeathsig)

    def lines():
        with open(out, errors="replace") as f:
            return f.read().splitlines()

    try:
        h.wait_until(lambda: any(l.startswith("event leader ") for l in lines()), timeout=15,
                     desc="%s to lead %s:\n%s" % (exe, path, "\n".join(lines()[-20:])))
        proc.send_signal(signal.SIGINT)
        assert proc.wait(15) == 0, lines()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    got = lines()
    assert len([l for l in got if l.startswith("event stopped ")]) == 1, got
    assert any(l.startswith("event stepdown ") and "reason=shutdown" in l for l in got), got
    return got
