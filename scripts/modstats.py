#!/usr/bin/env python3
"""Sizes and shape of the C sources: what a reader must hold in their head.

  scripts/modstats.py                 the report (files, long functions, big
                                      structs, calls between files)
  scripts/modstats.py --graph GROUP   the call graph between the files of GROUP
                                      (agent, lua, lib, cli): "a.c -> b.c (n)" lines
  scripts/modstats.py --check         exit 1 when a function in src/ is longer than
                                      80 lines without a comment saying why it is
                                      one piece (a comment within the 12 lines above
                                      it, or its first lines, containing "one piece")
  scripts/modstats.py --json          the numbers as JSON (to compare two revisions)

Pure Python, no build needed; run it on two checkouts to compare. It reads C
the way this repository writes it: a function definition starts at column 0
and its body's braces balance; comments and strings are skipped. A call is a
name followed by "(" inside a body that names a function defined in src/ (a
static function of the same file first). Counts:
  - a struct's fields are its top-level declarators ("int a, b;" is two; a
    sub-struct member is one);
  - "calls between files" counts ordered pairs of files (a.c calls something
    defined in b.c), and "two-way" the unordered pairs that call each other.
"""
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LONG = 80
GROUPS = {
    "agent": lambda f: os.path.basename(f).startswith("agent") and f.startswith("src/lib/"),
    "lua": lambda f: f.startswith("src/lua/"),
    "lib": lambda f: f.startswith("src/lib/"),
    "cli": lambda f: f.startswith("src/cli/"),
}
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "defined", "do", "else",
            "case", "_Static_assert", "offsetof", "va_arg", "alignof", "_Alignof"}


def sources():
    out = []
    for d in ("src/lib", "src/lua", "src/cli"):
        for n in sorted(os.listdir(os.path.join(ROOT, d))):
            if n.endswith((".c", ".h")):
                out.append(d + "/" + n)
    return out


def strip(text):
    """Comments and string/char literals blanked, newlines kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + re.sub(r"[^\n]", " ", text[i + 1:j]) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


FUNC_RE = re.compile(r"^(?![ \t#}])[^;{}()]*?\b([A-Za-z_]\w*)\s*\(", re.M)


def functions(path):
    """[(name, first line, last line, static)] of the definitions in path."""
    raw = open(os.path.join(ROOT, path), encoding="utf-8").read()
    text = strip(raw)
    res = []
    pos = 0
    while True:
        m = FUNC_RE.search(text, pos)
        if m is None:
            break
        name = m.group(1)
        # the parameter list, then "{" (a definition) or anything else
        i, depth = m.end() - 1, 0
        while i < len(text):
            if text[i] == "(":
                depth += 1
            elif text[i] == ")":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        j = i + 1
        while j < len(text) and text[j] in " \t\n":
            j += 1
        if j >= len(text) or text[j] != "{" or name in KEYWORDS:
            pos = m.end()
            continue
        k, depth = j, 0
        while k < len(text):
            if text[k] == "{":
                depth += 1
            elif text[k] == "}":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        first = text.count("\n", 0, m.start()) + 1
        last = text.count("\n", 0, k) + 1
        static = re.match(r"\s*static\b", text[m.start():m.end()]) is not None
        res.append((name, first, last, static, text[j:k + 1], raw))
        pos = k + 1
    return res


def one_piece(raw, first, last):
    lines = raw.split("\n")
    above = "\n".join(lines[max(0, first - 13):first + 3])
    return "one piece" in above.lower()


STRUCT_RE = re.compile(r"^(?:typedef\s+)?struct\s+(\w+)\s*\{", re.M)


def structs(path):
    text = strip(open(os.path.join(ROOT, path), encoding="utf-8").read())
    res = []
    for m in STRUCT_RE.finditer(text):
        i, depth, start = m.end() - 1, 0, m.end()
        fields, decl = 0, []
        while i < len(text):
            c = text[i]
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    break
            elif c == ";" and depth == 1:
                fields += count_declarators(text[start:i])
                start = i + 1
            elif c == "{" or c == "}":
                pass
            if depth == 1 and c == "}":
                start = i + 1
            i += 1
        res.append((m.group(1), fields, text.count("\n", 0, m.start()) + 1))
    return res


def count_declarators(decl):
    decl = re.sub(r"\{[^{}]*\}", "", decl)        # an inner struct's body
    depth, n = 0, 1
    for c in decl:
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == "," and depth == 0:
            n += 1
    return n if decl.strip() else 0


def collect():
    files = sources()
    defs = {}           # name -> [files] (non-static)
    statics = {}        # (file, name)
    funcs = {}
    for f in files:
        if not f.endswith(".c"):
            continue
        funcs[f] = functions(f)
        for name, _, _, static, _, _ in funcs[f]:
            if static:
                statics[(f, name)] = True
            else:
                defs.setdefault(name, []).append(f)
    calls = {}          # (caller file, callee file) -> count of call sites
    call_re = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
    for f, fl in funcs.items():
        for name, _, _, _, body, _ in fl:
            for c in call_re.findall(body):
                if c in KEYWORDS or (f, c) in statics:
                    continue
                where = defs.get(c)
                if not where or f in where:
                    continue
                key = (f, where[0])
                calls[key] = calls.get(key, 0) + 1
    return files, funcs, calls


def lines_of(f):
    with open(os.path.join(ROOT, f), encoding="utf-8") as fh:
        return sum(1 for _ in fh)


def group_edges(calls, group):
    inside = GROUPS[group]
    return {k: v for k, v in calls.items() if inside(k[0]) and inside(k[1])}


def two_way(edges):
    return sorted({tuple(sorted(k)) for k in edges if (k[1], k[0]) in edges})


def main():
    args = sys.argv[1:]
    files, funcs, calls = collect()
    long_ones = []
    for f, fl in funcs.items():
        for name, first, last, _, _, raw in fl:
            if last - first + 1 > LONG:
                long_ones.append((f, name, first, last - first + 1, one_piece(raw, first, last)))
    if "--check" in args:
        bad = [x for x in long_ones if not x[4]]
        for f, name, first, n, _ in bad:
            print(f"{f}:{first}: {name}() is {n} lines, over {LONG}, and no comment says why it is one piece")
        return 1 if bad else 0
    if "--graph" in args:
        g = args[args.index("--graph") + 1]
        for (a, b), n in sorted(group_edges(calls, g).items()):
            print(f"{os.path.basename(a)} -> {os.path.basename(b)} ({n})")
        return 0
    st = {f: structs(f) for f in files}
    big = sorted(((n, s, f) for f in files for s, n, _ in st[f] if n >= 20), reverse=True)
    report = {
        "files": {f: lines_of(f) for f in files},
        "long_functions": [{"file": f, "name": n, "lines": k, "why": w} for f, n, _, k, w in long_ones],
        "big_structs": [{"struct": s, "fields": n, "file": f} for n, s, f in big],
        "groups": {g: {"edges": len(group_edges(calls, g)),
                       "two_way": ["%s <-> %s" % (os.path.basename(a), os.path.basename(b))
                                   for a, b in two_way(group_edges(calls, g))]}
                   for g in GROUPS},
    }
    if "--json" in args:
        print(json.dumps(report, indent=1))
        return 0
    print("== largest files (lines)")
    for f, n in sorted(report["files"].items(), key=lambda x: -x[1])[:15]:
        print(f"  {n:6d}  {f}")
    print(f"  total {sum(report['files'].values())} lines in {len(files)} files")
    print(f"== functions over {LONG} lines")
    for x in sorted(report["long_functions"], key=lambda x: -x["lines"]):
        print(f"  {x['lines']:5d}  {x['file']} {x['name']}(){'' if x['why'] else '  (no one-piece comment)'}")
    print("== structs of 20 fields or more")
    for x in report["big_structs"]:
        print(f"  {x['fields']:5d}  struct {x['struct']} ({x['file']})")
    print("== calls between files (ordered pairs; two-way pairs)")
    for g, r in report["groups"].items():
        print(f"  {g}: {r['edges']} edges, {len(r['two_way'])} two-way" +
              (": " + ", ".join(r["two_way"]) if r["two_way"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
