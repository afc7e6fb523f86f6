#!/usr/bin/env python3
"""Checks the include graph of src/ and include/ against the layering rule
(HACKING.md "Layout"); run by scripts/lint.sh. Exit 0 when it holds, 1 with
one line per violation.

  scripts/layers.py            check
  scripts/layers.py --graph    print the module graph (one "a -> b, c" line
                               per module) and check
  scripts/layers.py --files    print the file edges of each module cut into
                               files ("a.c -> b.c: f, g" lines) and check

Inside a module cut into files (FILE_ORDER: the agent, the Lua core), a file
names (calls, or takes the address of) a function another of its files
defines only where the module's table allows it; with one_way the table has
no cycle, so no two files call each other. Edges are found by functions, not
includes: every file of such a module includes its shared private header.

The rule:
  - layers, one direction: cli -> lua -> lib. A file in src/lib includes only
    include/zkelect.h and src/lib headers; src/lua also src/lib headers;
    src/cli only include/zkelect.h and src/cli headers (the public API).
  - inside lib: agent -> {conn, election} -> zkclient. zkclient reaches no
    other of the three, conn and election do not reach agent nor each other;
    term (pure, like election) reaches none of them.
  - the pure modules (PURE: election, term, touch, leasewatch, renewplan)
    include no ev.h and reach no module with I/O (IMPURE).
  - no cycle between modules. A module is a .c/.h pair; files named
    <module>_<part>.c/.h belong to <module> (agent_int.h to agent).
  - only the zkclient module's files (src/lib/zkclient.c, session_*.c/.h)
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
LIB_ORDER = {"zkclient": {"agent", "conn", "election"},
             "conn": {"agent", "election"},
             "election": {"agent", "conn"},
             # the term is pure, like the election: the agent asks it
             "term": {"agent", "conn", "zkclient", "election", "scope", "guard"}}
# The pure modules: the promise's arithmetic and state machines, no I/O,
# the time passed in (tests/unit drives them, test_sim in virtual time).
# None includes ev.h or zookeeper.h, and none reaches these modules.
PURE = ("election", "term", "touch", "leasewatch", "renewplan", "srvconf", "balance", "history",
        "writepath")
IMPURE = {"agent", "conn", "zkclient", "scope", "guard", "dispatch", "census", "observer", "probe",
          "srvask", "bootwait", "histread"}
for _m in PURE:
    LIB_ORDER[_m] = LIB_ORDER.get(_m, set()) | IMPURE
# The Lua core's files, one way, each calling only files below it:
#   policy.c (zke_policy_*) > script.c (script.h: load, dispatch, free)
#   > warm.c (the standby's warm-up) > sandbox.c (the zkelect.* library)
#   > hookrun.c (the hook queue, runs, waits) > registrar.c (scopes, the
#   term handed with on_leader) > budget.c, health.c (hysteresis);
#   sandbox.c also opens json.c, timer.c and proc.c (> termcg.c, handle.c).
# script_int.h's inline accessors (script_of, script_id, script_path,
# script_log) read struct script and call no file.
LUA_ALLOWED = {
    "policy.c": {"script.c"},
    "script.c": {"warm.c", "sandbox.c", "hookrun.c", "registrar.c", "budget.c", "health.c"},
    "warm.c": {"sandbox.c", "hookrun.c"},
    "sandbox.c": {"hookrun.c", "json.c", "timer.c", "proc.c", "zkwrite.c"},
    "hookrun.c": {"registrar.c", "budget.c", "health.c"},
    "registrar.c": {"budget.c"},
    "budget.c": set(),
    "health.c": set(),
    "json.c": set(),
    "timer.c": {"handle.c"},
    "proc.c": {"handle.c", "termcg.c"},
    "termcg.c": set(),
    "handle.c": set(),
    "zkwrite.c": set(),
}
# Modules cut into files: which file may call which (by the functions each
# defines, not static). A file missing from its table is a violation: a new
# file is placed in the order when it is added.
FILE_ORDER = {
    # The agent: agent_core.c is what every file may call, and it calls none
    # of them (it reaches up only through the hooks agent.c registers,
    # struct agent_hooks); each feature calls the core and the features
    # listed for it; agent.c, the top, assembles them (zke_agent_new, start,
    # free, the conn's ops table, the hooks).
    "agent": {
        "dir": "src/lib",
        "files": r"agent(_\w+)?\.c",
        "one_way": True,
        "allowed": {
            "agent_core.c": set(),
            "agent_dupe.c": {"agent_core.c"},
            "agent_lease.c": {"agent_core.c"},
            "agent_history.c": {"agent_core.c"},
            "agent_term.c": {"agent_core.c", "agent_lease.c", "agent_history.c"},
            "agent_session.c": {"agent_core.c", "agent_lease.c"},
            "agent_request.c": {"agent_core.c", "agent_dupe.c"},
            "agent_status.c": {"agent_core.c", "agent_dupe.c", "agent_lease.c"},
            "agent_resign.c": {"agent_core.c", "agent_status.c"},
            "agent_prio.c": {"agent_core.c", "agent_resign.c"},
            "agent_handover.c": {"agent_core.c", "agent_prio.c", "agent_resign.c"},
            "agent_write.c": {"agent_core.c", "agent_term.c"},
            "agent_queue.c": {"agent_core.c", "agent_lease.c", "agent_term.c", "agent_request.c",
                              "agent_status.c"},
            "agent.c": {"agent_core.c", "agent_dupe.c", "agent_lease.c", "agent_term.c",
                        "agent_session.c", "agent_request.c", "agent_status.c",
                        "agent_resign.c", "agent_prio.c", "agent_handover.c", "agent_queue.c",
                        "agent_history.c", "agent_write.c"},
        },
    },
    # The conn: conn.c (the handle's lifecycle, the public zke_conn_*) calls
    # its parts; no part calls conn.c (conn_int.h).
    "conn": {
        "dir": "src/lib",
        "files": r"conn(_\w+)?\.c",
        "one_way": True,
        "allowed": {
            "conn_log.c": set(),
            "conn_index.c": set(),
            "conn_pump.c": {"conn_log.c"},
            "conn_guard.c": {"conn_log.c"},
            "conn_renew.c": {"conn_pump.c", "conn_log.c", "conn_lease.c"},
            "conn_lease.c": {"conn_pump.c", "conn_guard.c", "conn_log.c"},
            "conn.c": {"conn_log.c", "conn_index.c", "conn_pump.c", "conn_guard.c",
                       "conn_renew.c", "conn_lease.c"},
        },
    },
    # The Lua core (LUA_ALLOWED): every file of src/lua.
    "lua": {
        "dir": "src/lua",
        "files": r"\w+\.c",
        "one_way": True,
        "allowed": LUA_ALLOWED,
    },
}
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


COMMENT_RE = re.compile(r"/\*.*?\*/|//[^\n]*|\"(?:\\\\.|[^\"\\\\\n])*\"|'(?:\\\\.|[^'\\\\\n])*'", re.S)
# a definition: at the start of a line, not static, a parameter list, a body
DEF_RE = re.compile(r"^(?!static\b)[A-Za-z_][\w \t\*]*?\b(\w+)\s*\([^;{}()]*(?:\([^;{}]*\)[^;{}()]*)*\)\s*\{", re.M)
IDENT_RE = re.compile(r"\b[A-Za-z_]\w*\b")


def file_edges(rule):
    """{(a, b): {functions}}: file a names a function that file b defines."""
    d = os.path.join(ROOT, rule["dir"])
    names = sorted(n for n in os.listdir(d) if re.fullmatch(rule["files"], n))
    text = {}
    for n in names:
        raw = open(os.path.join(d, n), encoding="utf-8").read()
        text[n] = COMMENT_RE.sub(lambda m: " " if m.group(0)[0] == "/" else '""', raw)
    defs = {}
    for n in names:
        for m in DEF_RE.finditer(text[n]):
            defs.setdefault(m.group(1), n)
    edges = {}
    for n in names:
        for ident in set(IDENT_RE.findall(text[n])):
            owner = defs.get(ident)
            if owner is not None and owner != n:
                edges.setdefault((n, owner), set()).add(ident)
    return names, edges


def check_files(bad, show):
    for mod, rule in FILE_ORDER.items():
        names, edges = file_edges(rule)
        allowed = rule["allowed"]
        where = rule["dir"]
        for n in names:
            if n not in allowed:
                bad.append(f"{where}/{n}: not in FILE_ORDER[{mod!r}] (place it in the order)")
        for (a, b), fns in sorted(edges.items()):
            if show:
                print(f"{mod}: {a} -> {b}: {', '.join(sorted(fns))}")
            if a in allowed and b not in allowed[a]:
                bad.append(f"{where}/{a}: calls {b} ({', '.join(sorted(fns))}); FILE_ORDER[{mod!r}] "
                           f"does not allow it")
        if show:
            pairs = {tuple(sorted(e)) for e in edges if (e[1], e[0]) in edges}
            print(f"{mod}: {len(edges)} file edges, {len(pairs)} two-way pairs")
        if rule["one_way"]:
            # the table itself: no cycle (so no two files call each other)
            state = {}

            def visit(n, path):
                state[n] = 1
                for m in sorted(allowed.get(n, ())):
                    if state.get(m) == 1:
                        cycle = path[path.index(m):] + [m]
                        bad.append(f"FILE_ORDER[{mod!r}] has a cycle: " + " -> ".join(cycle))
                    elif m not in state:
                        visit(m, path + [m])
                state[n] = 2
            for n in sorted(allowed):
                if n not in state:
                    visit(n, [n])


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
    files_out = "--files" in sys.argv[1:]
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
            if inc == "ev.h" and me.startswith("lib:") and me[4:] in PURE:
                bad.append(f"{f}: includes <ev.h>; {me[4:]} is pure (no loop, the time passed in)")
            if "zookeeper" in inc and not re.fullmatch(r"src/lib/zkclient(_\w+)?\.[ch]", f):
                bad.append(f"{f}: includes <{inc}>; only the zkclient module's files may")
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
                bad.append(f"src/lib: {low} reaches {high} (the rule: agent -> {{conn, election}} -> zkclient)")
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
    check_files(bad, files_out)
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
