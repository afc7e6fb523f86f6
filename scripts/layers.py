#!/usr/bin/env python3
"""Checks the include graph of src/ and include/ against the layering rule
(HACKING.md "Layout"); run by scripts/lint.sh. Exit 0 when it holds, 1 with
one line per violation.

  scripts/layers.py            check
  scripts/layers.py --graph    print the module graph (one "a -> b, c" line
                               per module) and check

The rule:
  - layers, one direction: cli -> lua -> lib. A file in src/lib includes only
    include/zkelect.h and src/lib headers; src/lua also src/lib headers;
    src/cli only include/zkelect.h and src/cli headers (the public API).
  - inside lib: agent -> {conn, election} -> session. session reaches no
    other of the three, conn and election do not reach agent nor each other;
    term (pure, like election) reaches none of them.
  - no cycle between modules. A module is a .c/.h pair; files named
    <module>_<part>.c/.h belong to <module> (agent_int.h to agent).
  - only the session module's files (src/lib/session.c, session_*.c/.h)
    include zookeeper.h.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYERS = {"include": "api", "src/lib": "lib", "src/lua": "lua", "src/cli": "cli"}
MAY_INCLUDE = {"api": {"api"}, "lib": {"api", "lib"}, "lua": {"api", "lib", "lua"},
               "cli": {"api", "cli"}}
# inside lib: module -> the modules it must never reach (directly or not)
LIB_ORDER = {"session": {"agent", "conn", "election"},
             "conn": {"agent", "election"},
             "election": {"agent", "conn"},
             # the term is pure, like the election: the agent asks it
             "term": {"agent", "conn", "session", "election", "scope", "guard"}}
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def files():
    out = []
    for d in LAYERS:
        full = os.path.join(ROOT, d)
        for name in sorted(os.listdir(full)):
            if name.endswith((".c", ".h")):
                out.append(os.path.join(d, name))
    return out


def module_of(path, stems):
    d, name = os.path.split(path)
    stem = os.path.splitext(name)[0]
    if "_" in stem and stem.split("_")[0] in stems.get(d, ()):
        stem = stem.split("_")[0]
    return LAYERS[d] + ":" + stem


def main():
    graph_out = "--graph" in sys.argv[1:]
    all_files = files()
    stems = {}
    for f in all_files:
        d, name = os.path.split(f)
        stems.setdefault(d, set()).add(os.path.splitext(name)[0])
    where = {}                                 # header name -> its path
    for f in all_files:
        if f.endswith(".h"):
            name = os.path.basename(f)
            if name in where:
                print(f"layers: two headers named {name}: {where[name]} and {f}")
                return 1
            where[name] = f
    bad = []
    edges = {}
    for f in all_files:
        src_layer = LAYERS[os.path.dirname(f)]
        me = module_of(f, stems)
        edges.setdefault(me, set())
        text = open(os.path.join(ROOT, f), encoding="utf-8").read()
        for kind, inc in INCLUDE_RE.findall(text):
            if "zookeeper" in inc and not re.fullmatch(r"src/lib/session(_\w+)?\.[ch]", f):
                bad.append(f"{f}: includes <{inc}>; only the session module's files may")
            if kind != '"':
                continue
            target = where.get(os.path.basename(inc))
            if target is None:
                bad.append(f'{f}: includes "{inc}", which is no header of include/ or src/')
                continue
            dst_layer = LAYERS[os.path.dirname(target)]
            if dst_layer not in MAY_INCLUDE[src_layer]:
                bad.append(f"{f}: includes {target} ({src_layer} may not include {dst_layer})")
            other = module_of(target, stems)
            if other != me:
                edges[me].add(other)

    def reach(start):
        seen, todo = set(), [start]
        while todo:
            for n in edges.get(todo.pop(), ()):
                if n not in seen:
                    seen.add(n)
                    todo.append(n)
        return seen

    for low, never in LIB_ORDER.items():
        r = reach("lib:" + low)
        for high in sorted(never):
            if "lib:" + high in r:
                bad.append(f"src/lib: {low} reaches {high} (the rule: agent -> {{conn, election}} -> session)")
    cycles = set()
    for m in sorted(edges):
        if m in reach(m):
            # name the cycle: a path from m back to m
            path, prev, todo = None, {m: None}, [m]
            while todo and path is None:
                n = todo.pop(0)
                for o in sorted(edges.get(n, ())):
                    if o == m:
                        path = [n]
                        while prev[path[-1]] is not None:
                            path.append(prev[path[-1]])
                        path = [m] + list(reversed(path[:-1])) + [m] if len(path) > 1 else [m, m]
                        break
                    if o not in prev:
                        prev[o] = n
                        todo.append(o)
            key = frozenset(path or [m])
            if key not in cycles:
                cycles.add(key)
                bad.append("cycle: " + " -> ".join(path or [m]))
    if graph_out:
        for m in sorted(edges):
            print(f"{m} -> {', '.join(sorted(edges[m])) or '(nothing)'}")
    for b in bad:
        print("layers: " + b)
    if bad:
        print(f"layers: {len(bad)} violation(s) of the rule (scripts/layers.py)")
        return 1
    print(f"layers: {len(edges)} modules, the rule holds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
