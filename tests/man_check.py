#!/usr/bin/env python3
"""docs.man_sections: the man page holds every section it claims to.

    python3 tests/man_check.py REPO PAGE [PAGE...]

Each PAGE (the prebuilt docs/zkelect.1, the page the build rendered) must
have, as sections (.SH) and subsections (.SS), in order:
- the head's sections (docs/zkelect.1.head.md) and the tail's
  (docs/zkelect.1.tail.md): NAME, SYNOPSIS, DESCRIPTION ... SEE ALSO;
- every "## " and "### " heading of every part between man:begin and
  man:end of docs/operations.md and docs/policy.md (the sources the page
  is built from: a source left out, as when a list argument was split in
  two, fails here);
- the sections a manual page of a command is expected to have: EXIT STATUS,
  ENVIRONMENT, FILES, SEE ALSO.
Its SYNOPSIS must name every command (run, check, status, watch, ctl, demo)
and the no-Lua modes (--notify, -- CMD); its text must name no file of the
source tree (a reader of the installed page has none): paths under docs/,
src/, tests/, scripts/, bench/, cmake/, debian/, contrib/ or examples/
(installed files are named by their installed paths instead).
Exit 1 with one line per finding.
"""
import os
import re
import sys

SOURCES = ("docs/operations.md", "docs/policy.md")
REQUIRED = ("NAME", "SYNOPSIS", "DESCRIPTION", "EXIT STATUS", "ENVIRONMENT", "FILES", "SEE ALSO")
COMMANDS = ("zkelect run", "zkelect check", "zkelect status", "zkelect watch", "zkelect ctl", "zkelect demo")
MODES = ("--notify", "-- CMD")
# a path of the source tree: one of its top folders at a word start, not a
# part of a longer path (/usr/share/doc/zkelect/examples/ is installed)
REPO_PATH_RE = re.compile(r"(?<![\w/.-])(docs|src|tests|scripts|bench|cmake|debian|contrib|examples)/")


def man_headings(path):
    """The expected (level, title) list of one source: its man parts'
    "## X" (a section, in capitals) and "### X" (a subsection)."""
    text = open(path, encoding="utf-8").read()
    out = []
    for part in re.findall(r"<!-- man:begin -->(.*?)<!-- man:end -->", text, re.S):
        in_code = False
        for line in part.split("\n"):
            if line.startswith("```"):
                in_code = not in_code
            if in_code:
                continue
            m = re.match(r"(#{2,3}) (.*)", line)
            if m:
                level = "SH" if len(m.group(1)) == 2 else "SS"
                title = m.group(2).strip()
                out.append((level, title.upper() if level == "SH" else title))
    return out


def md_sections(path):
    text = open(path, encoding="utf-8").read()
    return [("SH", t.strip()) for t in re.findall(r"^# (.*)$", text, re.M)]


def unroff(s):
    """The text of one roff line, close enough to compare titles."""
    s = re.sub(r"\\f[BIRP]|\\f\(..|\\fC[BIRW]?", "", s)
    s = s.replace("\\-", "-").replace("\\(en", "-").replace("\\(em", "-").replace("\\e", "\\")
    s = re.sub(r"\\\(.{2}", "", s).replace("\\&", "").replace('\\"', '"')
    return s.strip().strip('"')


def page_headings(page):
    lines = open(page, encoding="utf-8").read().split("\n")
    out = []
    for i, line in enumerate(lines):
        m = re.match(r"\.(SH|SS)\s*(.*)$", line)
        if not m:
            continue
        title = m.group(2) or (lines[i + 1] if i + 1 < len(lines) else "")
        out.append((m.group(1), unroff(title)))
    return out


def page_text(page):
    return "\n".join(unroff(l) for l in open(page, encoding="utf-8").read().split("\n")
                     if not l.startswith(".") and not l.startswith("'"))


def section_text(page, name):
    lines = open(page, encoding="utf-8").read().split("\n")
    out, inside = [], False
    for i, line in enumerate(lines):
        m = re.match(r"\.SH\s*(.*)$", line)
        if m:
            title = unroff(m.group(1) or (lines[i + 1] if i + 1 < len(lines) else ""))
            inside = title == name
            continue
        if inside and not line.startswith("."):
            out.append(unroff(line))
    return "\n".join(out)


def check_page(repo, page):
    bad = []
    name = os.path.relpath(page, repo) if page.startswith(repo) else page
    have = page_headings(page)
    expected = md_sections(os.path.join(repo, "docs/zkelect.1.head.md"))
    for src in SOURCES:
        got = man_headings(os.path.join(repo, src))
        if not got:
            bad.append(f"{src}: no man:begin ... man:end part with a heading")
        expected += got
    tail = os.path.join(repo, "docs/zkelect.1.tail.md")
    if os.path.exists(tail):
        expected += md_sections(tail)
    # in order: each expected heading found after the previous one
    at = 0
    for h in expected:
        try:
            at = have.index(h, at) + 1
        except ValueError:
            where = "missing" if h not in have else "out of order"
            bad.append(f"{name}: {where}: {'section' if h[0] == 'SH' else 'subsection'} {h[1]!r}")
    titles = [t for lvl, t in have if lvl == "SH"]
    for r in REQUIRED:
        if r not in titles:
            bad.append(f"{name}: no {r} section")
    if titles and titles[-1] != "SEE ALSO":
        bad.append(f"{name}: SEE ALSO is not the last section (it is {titles[-1]!r})")
    synopsis = section_text(page, "SYNOPSIS")
    for c in COMMANDS + MODES:
        if c not in synopsis:
            bad.append(f"{name}: the SYNOPSIS does not name {c!r}")
    for n, line in enumerate(page_text(page).split("\n"), 1):
        for m in REPO_PATH_RE.finditer(line):
            bad.append(f"{name}: names a file of the source tree ({m.group(0)}...): {line.strip()[:100]!r}")
    return bad


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    repo = os.path.abspath(argv[1])
    bad = []
    for page in argv[2:]:
        bad += check_page(repo, os.path.abspath(page))
    for b in bad:
        print(b)
    print(f"man_check: {len(argv) - 2} page(s), {len(bad)} finding(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
