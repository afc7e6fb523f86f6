#!/usr/bin/python3
"""`cmake --install` into a staging prefix, and run from there: the files are
where docs/operations.md "Installing" says; pkg-config finds the library and a small C program
compiles and links with it; examples/embed builds against the staging prefix with
find_package(zkelect) and with pkg-config, each with the shared and the static
library, and leads a real ZooKeeper election; the installed binary runs, and a candidate with a
policy that does `require "zke"` leads against a real ZooKeeper with the Lua
modules of the staging prefix (not the source tree's lua/), also when the
tree was installed with DESTDIR; the man page is rendered; the example units
pass `systemd-analyze verify` (when it is there); the alerting rules, their unit
tests (run with promtool where it is there), the dashboard and the HAProxy
configuration are under share/zkelect.

Environment: ZKELECT_BUILD_DIR (the CMake build directory to install from).
"""
import os
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zkharness as h  # noqa: E402
import embedbuild  # noqa: E402

BUILD = os.environ.get("ZKELECT_BUILD_DIR") or os.path.join(h.REPO, "build")
PATH = "/app/installed"

FILES = [
    "bin/zkelect",
    "lib/libzkelect.a",
    "lib/libzkelect.so.0.1.0",
    "lib/libzkelect.so.0",
    "lib/libzkelect.so",
    "include/zkelect.h",
    "lib/pkgconfig/zkelect.pc",
    "lib/pkgconfig/zkelect-static.pc",
    "lib/cmake/zkelect/zkelectConfig.cmake",
    "lib/cmake/zkelect/zkelectConfigVersion.cmake",
    "lib/systemd/system/zkelect.service",
    "lib/systemd/system/zkelect@.service",
    "share/zkelect/lua/zke.lua",
    "share/zkelect/prometheus/zkelect.rules.yml",
    "share/zkelect/prometheus/zkelect.rules.test.yml",
    "share/zkelect/grafana/zkelect.json",
    "share/zkelect/haproxy.cfg",
    "share/man/man1/zkelect.1",
    "share/doc/zkelect/examples/policy.lua",
    "share/doc/zkelect/examples/singleton.lua",
    "share/doc/zkelect/examples/vip.lua",
    "share/doc/zkelect/examples/upstream.lua",
    "share/doc/zkelect/examples/preferred.lua",
    "share/doc/zkelect/examples/embed/embed_libev.c",
    "share/doc/zkelect/examples/embed/embed_policy.c",
    "share/doc/zkelect/examples/embed/CMakeLists.txt",
    "share/doc/zkelect/examples/embed/Makefile",
    # the documents the man page names by their installed paths
    "share/doc/zkelect/design.md",
    "share/doc/zkelect/operations.md",
    "share/doc/zkelect/policy.md",
    "share/doc/zkelect/embedding.md",
    "share/doc/zkelect/benchmarks.md",
]

HOST_C = r"""
#include <stdio.h>
#include <string.h>
#include <ev.h>
#include <zkelect.h>

int main(void)
{
    char err[256];
    struct ev_loop *loop = ev_default_loop(0);
    struct zke_settings s;
    struct zke_callbacks cb;
    memset(&s, 0, sizeof s);
    memset(&cb, 0, sizeof cb);
    s.zk = "127.0.0.1:1";
    s.path = "/app/x";
    s.id = "host";
    if (zke_check_id("a/b", err, sizeof err) == 0)
        return 1;
    zke_agent *a = zke_agent_new(loop, &s, &cb, NULL);
    if (a == NULL)
        return 2;
    zke_agent_free(a);
    printf("zkelect %s\n", zke_version());
    return 0;
}
"""

# Only the staging prefix has this module: a policy that loads it proves
# which directory require() searched.
PROBE = 'return { where = "staging" }\n'
POLICY = """
local zke = require("zke")
local probe = require("zke_stage_probe")
assert(type(zke.try) == "function" and probe.where == "staging")
function on_leader(ev)
  local ok, out = zke.try({ "echo", "epoch", tostring(ev.epoch) })
  zkelect.log("info", "installed " .. probe.where .. " " .. tostring(ok) .. " " .. out)
end
"""


def install(prefix, destdir=None):
    env = dict(os.environ)
    env.pop("DESTDIR", None)
    if destdir:
        env["DESTDIR"] = destdir
    p = subprocess.run(["cmake", "--install", BUILD, "--prefix", prefix], capture_output=True,
                       text=True, timeout=120, env=env)
    assert p.returncode == 0, "cmake --install failed (%d):\n%s%s" % (p.returncode, p.stdout, p.stderr)
    return os.path.join(destdir, prefix.lstrip("/")) if destdir else prefix


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def test_install_tree_pkgconfig_and_man_page():
    stage = install(os.path.join(h.mkdtemp("install"), "stage"))
    missing = [f for f in FILES if not os.path.isfile(os.path.join(stage, f))]
    assert not missing, "not installed: %s" % missing
    assert os.access(os.path.join(stage, "bin/zkelect"), os.X_OK)
    # the monitoring examples as installed: the rules' unit tests find the rules beside them
    if shutil.which("promtool"):
        p = subprocess.run(["promtool", "test", "rules", "zkelect.rules.test.yml"],
                           cwd=os.path.join(stage, "share/zkelect/prometheus"),
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0 and "SUCCESS" in p.stdout, (p.stdout, p.stderr)
    # only the public header
    assert os.listdir(os.path.join(stage, "include")) == ["zkelect.h"], os.listdir(
        os.path.join(stage, "include"))

    code, out, err, _ = h.run([os.path.join(stage, "bin/zkelect"), "--version"])
    assert code == 0 and out.startswith("zkelect "), (code, out, err)
    version = out.split()[1]

    # pkg-config from the staging prefix: a host program compiles, links, runs
    env = {"PKG_CONFIG_PATH": os.path.join(stage, "lib/pkgconfig")}
    code, flags, err, _ = h.run(["pkg-config", "--cflags", "--libs", "zkelect"], env=env)
    assert code == 0, err
    assert os.path.join(stage, "lib/pkgconfig/../../include") in flags or stage in flags, flags
    code, modver, err, _ = h.run(["pkg-config", "--modversion", "zkelect"], env=env)
    assert code == 0 and modver.strip() == version, (modver, version, err)
    d = h.mkdtemp("install-host")
    src = write(os.path.join(d, "host.c"), HOST_C)
    exe = os.path.join(d, "host")
    code, out, err, _ = h.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", src, "-o", exe]
                              + flags.split(), timeout=120)
    assert code == 0, "host.c did not build with `%s`:\n%s" % (flags.strip(), err)
    code, out, err, _ = h.run([exe], env={"LD_LIBRARY_PATH": os.path.join(stage, "lib")})
    assert code == 0 and out.strip() == "zkelect " + version, (code, out, err)
    embedbuild.check_links(exe, shared=True, libdir=os.path.join(stage, "lib"),
                           env={"LD_LIBRARY_PATH": os.path.join(stage, "lib")})

    # the man page: roff with tbl tables, the reference sections of docs/operations.md and docs/policy.md
    page = open(os.path.join(stage, "share/man/man1/zkelect.1")).read()
    assert page.startswith("'\\\" t\n"), page[:80]
    assert '.TH "zkelect" "1"' in page, page[:300]
    for section in ("NAME", "SYNOPSIS", "RUNNING A CANDIDATE", "THE LOG", "RUNNING UNDER SYSTEMD",
                    "INSTALLING"):
        assert "\n.SH\n%s\n" % section in page, "no section %s in zkelect.1" % section
    assert "<!--" not in page and "&lt;!--" not in page, "a marker leaked into the page"
    if shutil.which("man"):
        p = subprocess.run(["man", "-l", os.path.join(stage, "share/man/man1/zkelect.1")],
                           capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, MANWIDTH="100", MANPAGER="cat", PAGER="cat"))
        assert p.returncode == 0, p.stderr
        assert "--connect-timeout" in p.stdout and "\u2013connect" not in p.stdout, \
            "flags must keep two hyphens"


def test_installed_binary_leads_with_staged_lua_modules():
    stage = install(os.path.join(h.mkdtemp("install"), "stage"))
    write(os.path.join(stage, "share/zkelect/lua/zke_stage_probe.lua"), PROBE)
    # the policy sits alone in a directory of its own: require() can only
    # find zke in the staging prefix (the harness drops $ZKELECT_LUA_PATH)
    pol = write(os.path.join(h.mkdtemp("install-policy"), "policy.lua"), POLICY)
    zkelect = os.path.join(stage, "bin/zkelect")

    # a missing module names the directories searched: the staging one
    bad = write(os.path.join(os.path.dirname(pol), "bad.lua"), 'require("no_such_mod")\n')
    code, out, err, _ = h.run([zkelect, "check", "--script", bad])
    assert code == 78, (code, err)
    assert os.path.realpath(os.path.join(stage, "share/zkelect/lua")) in err, err
    assert os.path.join(h.REPO, "lua") not in err, err
    code, out, err, _ = h.run([zkelect, "check", "--script", pol])
    assert code == 0 and "on_leader" in out, (code, out, err)

    saved = h.ZKELECT_BIN
    h.ZKELECT_BIN = zkelect
    try:
        with h.ZooKeeper() as zk:
            a = h.Agent(zk, "inst", path=PATH, script=pol)
            lead = a.wait_for("leader", timeout=10)
            line = a.wait_for("script", timeout=10)
            assert line["msg"] == "installed staging true epoch %d\n" % lead["epoch"], line
            a.term()
            assert a.wait_exit(10) == 0
    finally:
        h.ZKELECT_BIN = saved

    # DESTDIR + another prefix: the tree is relocatable
    root = h.mkdtemp("install-destdir")
    tree = install("/opt/zkelect-test", destdir=root)
    write(os.path.join(tree, "share/zkelect/lua/zke_stage_probe.lua"), PROBE)
    code, out, err, _ = h.run([os.path.join(tree, "bin/zkelect"), "check", "--script", pol])
    assert code == 0, (code, out, err)


def configured_guard():
    """The units' zkelect-guard: its configured path, and the same relative
    to the prefix (ZKELECT_INSTALL_GUARDDIR)."""
    with open(os.path.join(BUILD, "CMakeCache.txt")) as f:
        cache = dict(l.rstrip("\n").split("=", 1) for l in f if "=" in l and not l.startswith(("#", "//")))
    prefix = cache["CMAKE_INSTALL_PREFIX:PATH"]
    rel = os.path.join(cache.get("ZKELECT_INSTALL_GUARDDIR:STRING", "libexec/zkelect"), "zkelect-guard")
    assert not rel.startswith("/"), rel
    return os.path.join(prefix, rel), rel


def configured_bindir():
    """CMAKE_INSTALL_FULL_BINDIR of the build: the path the units name."""
    with open(os.path.join(BUILD, "CMakeCache.txt")) as f:
        cache = dict(l.rstrip("\n").split("=", 1) for l in f if "=" in l and not l.startswith(("#", "//")))
    prefix = cache["CMAKE_INSTALL_PREFIX:PATH"]
    bindir = cache.get("CMAKE_INSTALL_BINDIR:PATH", "bin")
    return bindir if bindir.startswith("/") else os.path.join(prefix, bindir)


def test_units_name_the_configured_binary_and_verify():
    """The units installed under the prefix's lib/systemd/system name the
    configured bindir's zkelect and guard directory's zkelect-guard (not a
    hard-coded /usr/local/bin), and with those paths pointing at the staged
    programs pass `systemd-analyze verify` (unknown keys, bad values, a
    missing binary...)."""
    stage = install(os.path.join(h.mkdtemp("install"), "stage"))
    binary = os.path.join(configured_bindir(), "zkelect")
    guard, guard_rel = configured_guard()
    d = h.mkdtemp("units")
    names = []
    for name, as_name in (("zkelect.service", "zkelect.service"),
                          ("zkelect@.service", "zkelect@db.service")):
        text = open(os.path.join(stage, "lib/systemd/system", name)).read()
        assert "ExecStart=%s run" % binary in text.splitlines(), text
        assert "ExecStartPre=%s check --strict" % binary in text.splitlines(), text
        assert "ExecStopPost=%s --stop" % guard in text.splitlines(), text
        execs = [l for l in text.splitlines() if l.startswith("Exec") and "zkelect" in l
                 and not l.startswith("ExecStopPost=")]
        assert all(binary in l for l in execs), execs
        write(os.path.join(d, as_name), text.replace(binary, os.path.join(stage, "bin/zkelect"))
              .replace(guard, os.path.join(stage, guard_rel)))
        names.append(os.path.join(d, as_name))
    tool = shutil.which("systemd-analyze")
    assert tool, "systemd-analyze not found (scripts/setup.sh installs systemd)"
    p = subprocess.run([tool, "verify", "--man=no"] + names, capture_output=True, text=True,
                       timeout=120, cwd=d)
    complaints = [l for l in (p.stdout + p.stderr).splitlines()
                  if "zkelect.service" in l or "zkelect@" in l]
    assert not complaints, "systemd-analyze verify:\n" + "\n".join(complaints)
    assert p.returncode == 0, p.stderr


def test_embed_example_builds_against_the_install_both_ways():
    """examples/embed, outside the tree: its CMakeLists.txt with
    find_package(zkelect 0.1) and its Makefile with pkg-config, each with
    libzkelect.so and libzkelect.a; every build leads a real election."""
    root = h.mkdtemp("install-embed")
    stage = install(os.path.join(root, "stage"))
    # a moved tree: the CMake package and zkelect.pc are relocatable
    moved = os.path.join(root, "moved")
    os.rename(stage, moved)
    lib = os.path.join(moved, "lib")
    run_env = {"LD_LIBRARY_PATH": lib}
    pc_path = os.path.join(lib, "pkgconfig")
    builds = [
        ("find_package zkelect::zkelect", embedbuild.cmake_build(moved, static=False), True),
        ("find_package zkelect::zkelect_static", embedbuild.cmake_build(moved, static=True), False),
        ("pkg-config zkelect", embedbuild.make_build(pc_path, "zkelect"), True),
        ("pkg-config zkelect-static", embedbuild.make_build(pc_path, "zkelect-static"), False),
    ]
    with h.ZooKeeper() as zk:
        for i, (what, d, shared) in enumerate(builds):
            exe = os.path.join(d, "embed_libev")
            embedbuild.check_links(exe, shared, libdir=lib if shared else None, env=run_env)
            embedbuild.lead_and_stop(exe, zk, "/embed/install%d" % i, env=run_env)
            print("  info: %s: built, leads, stops" % what, flush=True)
    # find_package asks for the version: 0.1 is met, a newer major is not
    src = os.path.join(h.mkdtemp("embed-version"), "CMakeLists.txt")
    write(src, "cmake_minimum_required(VERSION 3.18)\nproject(v LANGUAGES C)\n"
               "find_package(zkelect 1.0 REQUIRED)\n")
    p = subprocess.run(["cmake", "-S", os.path.dirname(src), "-B", os.path.dirname(src) + "/b",
                        "-DCMAKE_PREFIX_PATH=" + moved], capture_output=True, text=True, timeout=120)
    assert p.returncode != 0 and "zkelectConfig.cmake, version: 0.1.0" in p.stderr, p.stderr


if __name__ == "__main__":
    h.run_tests(globals())
