#!/usr/bin/python3
"""The Debian packages, as a user gets them: the tree (the files of the
source directory, committed or not, without build directories) is copied
and built with `dpkg-buildpackage -b -us -uc` (lintian: no errors); zkelect, libzkelect0 and
libzkelect-dev are installed with `apt-get install ./*.deb`; /usr/bin/zkelect
runs (`--version`, `check` with the packaged Lua modules, `demo`); examples/embed
builds against libzkelect-dev with find_package(zkelect) and with pkg-config
and leads a real ZooKeeper election; the alerting rules, their unit tests, the
dashboard and the HAProxy configuration are in /usr/share/zkelect; the units in /lib/systemd/system pass
`systemd-analyze verify` and are not enabled; then the packages are purged and
every path they installed is gone. Runs as root (it installs packages);
purges in any case, and reinstalls whatever version of the packages was
installed before (saved with dpkg-repack).

Prints how long the package build took and the packages' sizes.
"""
import os
import shutil
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zkharness as h  # noqa: E402
import embedbuild  # noqa: E402

PACKAGES = ["zkelect", "libzkelect0", "libzkelect-dev"]
APT_ENV = {"DEBIAN_FRONTEND": "noninteractive"}
APT = ["apt-get", "-y", "-q", "-o", "DPkg::Lock::Timeout=120"]
# top-level entries of the source directory that are build outputs
SKIP_TOP = ("build", "obj-", ".git")


def sh(args, timeout=600, cwd=None, env=None, what=None):
    p = subprocess.run(args, capture_output=True, text=True, timeout=timeout, cwd=cwd,
                       env=h._child_env(env), stdin=subprocess.DEVNULL)
    assert p.returncode == 0, "%s failed (%d):\n%s\n%s" % (what or " ".join(args), p.returncode,
                                                          p.stdout[-6000:], p.stderr[-6000:])
    return p.stdout


def installed_version(pkg):
    p = subprocess.run(["dpkg-query", "-W", "-f", "${db:Status-Status} ${Version}", pkg],
                       capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        return None
    status, _, version = p.stdout.partition(" ")
    return version if status == "installed" else None


def source_files():
    """The source directory's files, relative: git's view (tracked and
    untracked, not ignored) when it is a checkout, else every file outside
    the build directories."""
    p = subprocess.run(["git", "-C", h.REPO, "ls-files", "-co", "--exclude-standard", "-z"],
                       capture_output=True, timeout=60)
    if p.returncode == 0 and p.stdout:
        return [f for f in p.stdout.decode().split("\0") if f and os.path.lexists(os.path.join(h.REPO, f))]
    files = []
    for top, dirs, names in os.walk(h.REPO):
        rel = os.path.relpath(top, h.REPO)
        if rel == ".":
            dirs[:] = [d for d in dirs if not d.startswith(SKIP_TOP)]
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        files += [os.path.normpath(os.path.join(rel, n)) for n in names if not n.endswith(".pyc")]
    return files


def copy_tree(dest):
    for f in source_files():
        target = os.path.join(dest, f)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(os.path.join(h.REPO, f), target, follow_symlinks=False)


def build_packages(root):
    src = os.path.join(root, "zkelect-0.1.0")
    copy_tree(src)
    t0 = time.monotonic()
    sh(["dpkg-buildpackage", "-b", "-us", "-uc", "-j2"], timeout=900, cwd=src,
       what="dpkg-buildpackage -b -us -uc")
    took = time.monotonic() - t0
    debs = {}
    for name in os.listdir(root):
        if name.endswith(".deb") and "-dbgsym_" not in name:
            debs[name.split("_")[0]] = os.path.join(root, name)
    assert sorted(debs) == sorted(PACKAGES), sorted(os.listdir(root))
    print("  info: dpkg-buildpackage took %.1f s" % took, flush=True)
    # lintian: no errors (its warnings are listed in docs/operations.md "Installing")
    changes = [os.path.join(root, n) for n in os.listdir(root) if n.endswith(".changes")]
    p = subprocess.run(["lintian", "--fail-on", "error"] + changes, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, "lintian found errors:\n" + p.stdout + p.stderr
    for pkg in PACKAGES:
        size = sh(["dpkg-deb", "-f", debs[pkg], "Installed-Size"]).strip()
        print("  info: %s: %d bytes, Installed-Size %s KiB" % (os.path.basename(debs[pkg]),
                                                             os.path.getsize(debs[pkg]), size), flush=True)
    return debs


def listed_paths():
    """Every path the packages installed (dpkg -L); prints each package's
    files' size on disk (du) beside its Installed-Size."""
    paths = set()
    for pkg in PACKAGES:
        files = [l for l in sh(["dpkg", "-L", pkg]).splitlines() if l.startswith("/") and l != "/."]
        paths.update(files)
        regular = [f for f in files if os.path.isfile(f) and not os.path.islink(f)]
        du = sh(["du", "-skc"] + regular).splitlines()[-1].split()[0]
        print("  info: %s installed: %d files, du %s KiB" % (pkg, len(regular), du), flush=True)
    return paths


def check_installed_files(paths):
    want = ["/usr/bin/zkelect", "/usr/share/man/man1/zkelect.1.gz", "/usr/share/zkelect/lua/zke.lua",
            "/lib/systemd/system/zkelect.service", "/lib/systemd/system/zkelect@.service",
            "/usr/include/zkelect.h", "/usr/share/doc/zkelect/examples/policy.lua",
            "/usr/share/doc/zkelect/design.md",
            "/usr/share/zkelect/prometheus/zkelect.rules.yml",
            "/usr/share/zkelect/prometheus/zkelect.rules.test.yml",
            "/usr/share/zkelect/grafana/zkelect.json", "/usr/share/zkelect/haproxy.cfg"]
    missing = [p for p in want if p not in paths]
    assert not missing, "not in the packages: %s" % missing
    for pattern in ("libzkelect.so.0", "libzkelect.so.0.1.0", "libzkelect.so", "libzkelect.a",
                    "pkgconfig/zkelect.pc", "pkgconfig/zkelect-static.pc", "cmake/zkelect/zkelectConfig.cmake"):
        assert any(p.endswith("/" + pattern) for p in paths), "no %s in the packages" % pattern
    assert not any(p.startswith("/usr/local") for p in paths), sorted(paths)


def check_units():
    for unit in ("zkelect.service", "zkelect@.service"):
        text = open("/lib/systemd/system/" + unit).read()
        execs = [l for l in text.splitlines() if l.startswith("Exec") and "zkelect" in l
                 and not l.startswith("ExecStopPost=")]
        assert execs and all("=/usr/bin/zkelect " in l for l in execs), execs
        assert "ExecStopPost=/usr/lib/zkelect/zkelect-guard --stop" in text.splitlines(), text
    # installed, not enabled (they need /etc/zkelect/*.env first)
    enabled = [os.path.join(top, n) for top, _, names in os.walk("/etc/systemd")
               for n in names if n.startswith("zkelect")]
    assert not enabled, "enabled on install: %s" % enabled
    d = h.mkdtemp("pkg-units")
    shutil.copy("/lib/systemd/system/zkelect@.service", os.path.join(d, "zkelect@db.service"))
    p = subprocess.run(["systemd-analyze", "verify", "--man=no", "/lib/systemd/system/zkelect.service",
                        os.path.join(d, "zkelect@db.service")],
                       capture_output=True, text=True, timeout=120, cwd=d)
    complaints = [l for l in (p.stdout + p.stderr).splitlines() if "zkelect" in l]
    assert not complaints and p.returncode == 0, "systemd-analyze verify (%d):\n%s" % (
        p.returncode, p.stdout + p.stderr)


def check_embed(zk):
    libdir = "/usr/lib/" + sh(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"]).strip()
    for i, (what, d) in enumerate((("find_package(zkelect)", embedbuild.cmake_build()),
                                   ("pkg-config zkelect", embedbuild.make_build()))):
        exe = os.path.join(d, "embed_libev")
        embedbuild.check_links(exe, shared=True, libdir=libdir)
        embedbuild.lead_and_stop(exe, zk, "/embed/package%d" % i)
        print("  info: examples/embed with %s against libzkelect-dev: built, leads, stops" % what,
              flush=True)


def purge_and_check(paths, existed):
    sh(APT + ["purge"] + PACKAGES, timeout=300, env=APT_ENV, what="apt-get purge")
    left = installed_after_purge()
    assert not left, "still installed after the purge: %s" % left
    # every path the packages brought (not there before the install) is gone
    stay = sorted(p for p in paths if p not in existed and os.path.lexists(p))
    assert not stay, "left behind by the purge: %s" % stay


def installed_after_purge():
    return [p for p in PACKAGES if installed_version(p) is not None]


def save_installed(root):
    """The packages installed before the test, as .deb files (dpkg-repack),
    to put back afterwards."""
    d = os.path.join(root, "saved")
    os.makedirs(d)
    for pkg in PACKAGES:
        if installed_version(pkg) is not None:
            print("  info: %s %s was installed: saved, put back at the end"
                  % (pkg, installed_version(pkg)), flush=True)
            sh(["dpkg-repack", pkg], cwd=d, timeout=300, what="dpkg-repack " + pkg)
    return [os.path.join(d, n) for n in sorted(os.listdir(d)) if n.endswith(".deb")]


def deb_paths(debs):
    paths = set()
    for deb in debs.values():
        for line in sh(["dpkg-deb", "-c", deb]).splitlines():
            name = line.split(None, 5)[5].split(" -> ")[0]
            paths.add(os.path.normpath(name.lstrip(".")) or "/")
    return paths


def test_packages_build_install_run_and_purge():
    assert os.geteuid() == 0, "integration.package installs Debian packages: run it as root"
    for tool in ("dpkg-buildpackage", "dh", "lintian", "systemd-analyze", "dpkg-repack", "make"):
        assert shutil.which(tool), "%s not found (scripts/setup.sh --dev installs it)" % tool
    root = h.mkdtemp("package")
    saved = save_installed(root)
    try:
        if saved:
            sh(APT + ["purge"] + installed_after_purge(), timeout=300, env=APT_ENV)
        debs = build_packages(root)
        # the paths there before the install (shared directories): the purge keeps them
        existed = {p for p in deb_paths(debs) if os.path.lexists(p)}
        sh(APT + ["install", "--no-install-recommends"] + ["./" + os.path.basename(d) for d in debs.values()],
           cwd=root, timeout=600, env=APT_ENV, what="apt-get install ./*.deb")
        for pkg in PACKAGES:
            assert installed_version(pkg) == "0.1.0-1", (pkg, installed_version(pkg))
        paths = listed_paths()
        check_installed_files(paths)

        out = sh(["/usr/bin/zkelect", "--version"])
        assert out.startswith("zkelect 0.1.0"), out
        # the packaged Lua modules: a policy that requires zke, alone in its directory
        pol = os.path.join(h.mkdtemp("pkg-policy"), "p.lua")
        with open(pol, "w") as f:
            f.write('local zke = require("zke")\nassert(type(zke.try) == "function")\n'
                    'function on_leader(ev) end\n')
        out = sh(["/usr/bin/zkelect", "check", "--script", pol])
        assert "on_leader" in out, out
        check_units()
        with h.ZooKeeper() as zk:
            check_embed(zk)
        # the demo: Debian's ZooKeeper, four candidates, three failovers, exit 0
        out = sh(["/usr/bin/zkelect", "demo"], timeout=240, what="/usr/bin/zkelect demo")
        print("  info: zkelect demo:\n    " + "\n    ".join(out.strip().splitlines()[-8:]), flush=True)
        purge_and_check(paths, existed)
    finally:
        if installed_after_purge():
            subprocess.run(APT + ["purge"] + PACKAGES, capture_output=True, timeout=300,
                           env=h._child_env(APT_ENV))
        if saved:
            sh(["dpkg", "-i"] + saved, timeout=300, what="putting back the saved packages")


if __name__ == "__main__":
    h.run_tests(globals(), timeout=900)
