#!/usr/bin/env python3
"""docs.check: the documentation stays true to the repository.

    python3 tests/docs_check.py REPO [ZKELECT_BIN]

Fails (exit 1, one line per finding) when README.md has more than 250 lines
or does not start with its two commands; when a relative Markdown link or a
backticked repository path in README.md, docs/*.md, HACKING.md or
CHANGELOG.md names a file that does not exist; when a relative link in any
other Markdown file of the tree names a file or a heading (#anchor) that does
not exist; when a source, script, test or document cites a section of a
document by its title (docs/design.md "The promise") that is not a heading of
it (or, in another document than design.md, not in its text); when one of
them mentions DESIGN.md or anchors-*.md; when tests/INDEX.md is not what
scripts/testindex.py prints, or a test file has no description (its
docstring, or its leading comment); when the sample between the embed markers of
docs/embedding.md differs from the file it names; when README's C sample
does not compile (-fsyntax-only against include/) or its Lua policy does not
load (luac5.4 -p, else lua5.4, else `zkelect check --script` with the
ZKELECT_BIN given).
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

README_MAX_LINES = 250
README_START = [
    "# zkelect",
    "",
    "```sh",
    "bash scripts/demo.sh    # as root on Debian 12: installs what is missing, builds, runs the failover demo",
    "bash scripts/test.sh    # as root on Debian 12: installs what is missing, builds, runs the whole test suite",
    "```",
]
# <!-- embed:begin examples/embed/embed_libev.c --> ```c ... ``` <!-- embed:end -->
EMBED_RE = re.compile(r"<!-- embed:begin (\S+) -->\n```c\n(.*?)```\n<!-- embed:end -->", re.S)
LINK_RE = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
# a backticked word that looks like a path in the repository: a known top
# folder or a top-level file, then no blanks, globs or placeholders
TOP = ("src/", "include/", "lua/", "tests/", "bench/", "examples/", "scripts/", "docs/", "cmake/")
TICK_RE = re.compile(r"`([^`\s]+)`")
FORBIDDEN = ("DESIGN.md", "anchors-")


def fenced_blocks(text, lang):
    return re.findall(r"```%s\n(.*?)```" % lang, text, re.S)


def doc_files(repo):
    files = ["README.md", "HACKING.md", "CHANGELOG.md"]
    files += sorted(os.path.relpath(p, repo) for p in glob.glob(os.path.join(repo, "docs", "*.md")))
    return files


def source_files(repo):
    """Every tracked-looking text file outside the docs: sources, headers,
    scripts, tests, build files (this checker itself names the words)."""
    out = []
    for top in ("src", "include", "lua", "tests", "bench", "examples", "scripts", "cmake", "debian", "contrib"):
        for dirpath, _, names in os.walk(os.path.join(repo, top)):
            for n in names:
                if n.endswith((".c", ".h", ".py", ".lua", ".sh", ".cmake", ".in", ".txt", ".md")) or n == "run":
                    rel = os.path.relpath(os.path.join(dirpath, n), repo)
                    if rel != os.path.join("tests", "docs_check.py"):
                        out.append(rel)
    return sorted(out)


def other_markdown(repo):
    """The Markdown files outside doc_files: the READMEs of tests/, bench/
    and examples/, tests/INDEX.md (their links are checked, not their
    backticked words, which name files relative to their own folders)."""
    out = []
    for top in ("tests", "bench", "examples", "contrib"):
        for dirpath, _, names in os.walk(os.path.join(repo, top)):
            out += [os.path.relpath(os.path.join(dirpath, n), repo) for n in names if n.endswith(".md")]
    return sorted(out)


def headings(path):
    """The text of a Markdown file's headings (code blocks left out)."""
    text = re.sub(r"```.*?```", "", open(path).read(), flags=re.S)
    return [m.group(1).strip() for m in re.finditer(r"^#+ (.*)$", text, re.M)]


# a document's section cited by its title: docs/design.md "The promise",
# HACKING.md "Layout", docs/operations.md, "Mixed elections" (across comment lines)
CITE_RE = re.compile(r'\b((?:docs/)?[A-Za-z_]+\.md),? "([^"\n]{3,80})"')
CONTINUATION_RE = re.compile(r"\n[ \t]*(?:\*|#|--|//)?[ \t]*")


def check_citations(repo, rel, text, problems):
    """Each cited title is a heading of the document (design.md), or one of
    its headings or a phrase of its text (the other documents: a comment may
    quote a bold paragraph's lead)."""
    text = CONTINUATION_RE.sub(" ", text)
    for m in CITE_RE.finditer(text):
        doc, title = m.group(1), m.group(2).rstrip(".,:;")
        full = os.path.join(repo, doc) if "/" in doc or doc in ("README.md", "HACKING.md") \
            else os.path.join(repo, "docs", doc)
        if not os.path.isfile(full) or os.path.abspath(full) == os.path.join(repo, rel):
            continue
        heads = [h.lower() for h in headings(full)]
        if title.lower() in heads:
            continue
        if not full.endswith(os.path.join("docs", "design.md")):
            body = " ".join(open(full).read().split()).lower()
            if title.lower() in body.replace("**", ""):
                continue
        problems.append('%s: cites %s "%s", which is not a heading of %s' % (rel, doc, title, doc))


def check_index(repo, problems):
    """tests/INDEX.md is what scripts/testindex.py prints, every test file
    has a description."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("testindex", os.path.join(repo, "scripts", "testindex.py"))
    testindex = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(testindex)
    text, missing = testindex.render(repo)
    for rel in missing:
        problems.append("%s: no description (a module docstring or a leading comment) for "
                        "tests/INDEX.md" % rel)
    try:
        current = open(os.path.join(repo, testindex.INDEX)).read()
    except OSError:
        current = None
    if current != text:
        problems.append("%s is not current: run python3 scripts/testindex.py --write" % testindex.INDEX)


def anchors(path):
    """GitHub's heading anchors of a Markdown file: lower case, punctuation
    dropped, blanks made hyphens."""
    out = set()
    text = re.sub(r"```.*?```", "", open(path).read(), flags=re.S)
    for m in re.finditer(r"^#+ (.*)$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        out.add(slug)
    return out


def check_paths(repo, rel, text, problems, words=True):
    base = os.path.dirname(os.path.join(repo, rel))
    for m in LINK_RE.finditer(text):
        target = m.group(1)
        if ":" in target.split("/")[0]:
            continue                          # a URL
        path, _, anchor = target.partition("#")
        full = os.path.normpath(os.path.join(base, path)) if path else os.path.join(repo, rel)
        if not os.path.exists(full):
            problems.append("%s: link to %s: no such file" % (rel, target))
        elif anchor and full.endswith(".md") and anchor not in anchors(full):
            problems.append("%s: link to %s: no such heading" % (rel, target))
    if not words:
        return
    text = re.sub(r"```.*?```", "", text, flags=re.S)   # code blocks hold commands, not references
    for m in TICK_RE.finditer(text):
        word = m.group(1).rstrip(".,:;")
        if not word.startswith(TOP) or any(c in word for c in "*<>{}$[]|=()"):
            continue
        word = word.split(":")[0]             # file:line
        if not os.path.exists(os.path.join(repo, word)):
            problems.append("%s: `%s`: no such file in the repository" % (rel, word))


def compile_c(repo, code, problems):
    cc = shutil.which("cc")
    if cc is None:
        problems.append("README.md: no cc to check the C sample")
        return
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "sample.c")
        with open(src, "w") as f:
            f.write(code)
        p = subprocess.run([cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
                            "-I", os.path.join(repo, "include"), src], capture_output=True, text=True)
        if p.returncode != 0:
            problems.append("README.md: the C sample does not compile:\n" + p.stderr)


def load_lua(code, zkelect_bin, problems):
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "policy.lua")
        with open(src, "w") as f:
            f.write(code)
        if shutil.which("luac5.4"):
            argv = ["luac5.4", "-p", src]
        elif shutil.which("lua5.4"):
            argv = ["lua5.4", "-e", "assert(loadfile(%r))" % src]
        elif zkelect_bin and os.access(zkelect_bin, os.X_OK):
            argv = [zkelect_bin, "check", "--script", src]
        else:
            problems.append("README.md: neither luac5.4, lua5.4 nor a zkelect binary to check the policy")
            return
        p = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)
        if p.returncode != 0 or "is not a hook" in p.stderr:
            problems.append("README.md: the Lua policy does not load (%s):\n%s%s"
                            % (" ".join(argv[:2]), p.stdout, p.stderr))


FRACTIONS = {"half": 2, "third": 3, "quarter": 4, "fifth": 5, "eighth": 8, "tenth": 10}
FRACTION_RE = re.compile(r"\b(?:an?|the) (half|third|quarter|fifth|eighth|tenth)\b|\bT/(\d+)\b")


def fractions(text):
    """The fractions of the session timeout that the default clause starting
    text names ("a tenth", "T/10"): up to its ";" or "|", asides in
    parentheses left out (they explain, e.g. "the lease keeps a fifth")."""
    while True:
        t = re.sub(r"\([^()]*\)", "", text)
        if t == text:
            break
        text = t
    text = re.split(r"[;|]", text)[0]
    return {FRACTIONS[w] if w else int(n) for w, n in FRACTION_RE.findall(text)}


def check_help_defaults(repo, zkelect_bin, problems):
    """`zkelect --help` and the flag table of docs/operations.md name the same
    fractions of the session timeout as a flag's default (the help once said
    an eighth where the agent and the docs say a tenth)."""
    try:
        helptext = subprocess.run([zkelect_bin, "--help"], capture_output=True, text=True,
                                  timeout=10).stdout
    except (OSError, subprocess.SubprocessError) as e:
        problems.append("zkelect --help: %s" % e)
        return
    # the help's entry of each flag: from "  --flag" to the next "  --"
    entries = {}
    for m in re.finditer(r"^  (--[a-z-]+)[^\n]*\n(?:(?!  --)[^\n]*\n)*", helptext, re.M):
        entries[m.group(1)] = m.group(0)
    ops = open(os.path.join(repo, "docs", "operations.md")).read()
    checked = 0
    for m in re.finditer(r"^\| `(--[a-z-]+)[^`]*` \| `ZKELECT_[A-Z_]+` \| ([^\n]*)\|$", ops, re.M):
        flag, meaning = m.group(1), m.group(2)
        d = re.search(r"default (.)", meaning)
        if not d or flag not in entries:
            continue
        want = fractions(meaning[d.start(1):])
        hd = re.search(r"default (.*)", entries[flag], re.S)
        got = fractions(hd.group(1)) if hd else set()
        if want or got:
            checked += 1
            if want != got:
                problems.append("%s: --help gives its default as %s of the session timeout, "
                                "docs/operations.md as %s" % (flag, sorted(got), sorted(want)))
    if checked == 0:
        problems.append("docs/operations.md: no flag's default is a fraction of the session timeout "
                        "(the check of --help against the flag table found nothing to check)")


def main():
    if len(sys.argv) < 2:
        print("usage: docs_check.py REPO [ZKELECT_BIN]", file=sys.stderr)
        return 64
    repo = os.path.abspath(sys.argv[1])
    zkelect_bin = sys.argv[2] if len(sys.argv) > 2 else None
    problems = []

    readme = open(os.path.join(repo, "README.md")).read()
    lines = readme.split("\n")
    if readme.endswith("\n"):
        lines.pop()
    if len(lines) > README_MAX_LINES:
        problems.append("README.md: %d lines, more than %d" % (len(lines), README_MAX_LINES))
    if lines[:len(README_START)] != README_START:
        problems.append("README.md: does not start with its title and the two commands")

    for rel in doc_files(repo):
        text = open(os.path.join(repo, rel)).read()
        for word in FORBIDDEN:
            if word in text:
                problems.append("%s: mentions %s, which is not in the repository" % (rel, word))
        check_paths(repo, rel, text, problems)
        check_citations(repo, rel, text, problems)
    for rel in other_markdown(repo):
        check_paths(repo, rel, open(os.path.join(repo, rel)).read(), problems, words=False)
    # comments are documentation too: sources, scripts and tests
    for rel in source_files(repo) + ["CMakeLists.txt"]:
        try:
            text = open(os.path.join(repo, rel), errors="replace").read()
        except OSError:
            continue
        check_citations(repo, rel, text, problems)
        for word in FORBIDDEN:
            if word in text:
                problems.append("%s: mentions %s, which is not in the repository" % (rel, word))

    embedding = open(os.path.join(repo, "docs", "embedding.md")).read()
    samples = EMBED_RE.findall(embedding)
    if not samples:
        problems.append("docs/embedding.md: no <!-- embed:begin FILE --> ```c ... ``` <!-- embed:end --> sample")
    for path, code in samples:
        full = os.path.join(repo, path)
        if not os.path.isfile(full):
            problems.append("docs/embedding.md: the sample's source %s does not exist" % path)
        elif open(full).read() != code:
            problems.append("docs/embedding.md: the sample differs from %s (copy the file again)" % path)

    c_blocks = fenced_blocks(readme, "c")
    lua_blocks = fenced_blocks(readme, "lua")
    if len(c_blocks) != 1 or len(lua_blocks) != 1:
        problems.append("README.md: expected one ```c and one ```lua block, found %d and %d"
                        % (len(c_blocks), len(lua_blocks)))
    for code in c_blocks:
        compile_c(repo, code, problems)
    for code in lua_blocks:
        load_lua(code, zkelect_bin, problems)

    # what is installed speaks to its users, not of the project's history
    shipped = [os.path.relpath(p, repo) for pat in ("examples/*.lua", "examples/*.in", "lua/*.lua",
                                                    "contrib/*", "contrib/*/*")
               for p in glob.glob(os.path.join(repo, pat)) if os.path.isfile(p)]
    for rel in shipped + ["docs/operations.md", "docs/policy.md", "docs/zkelect.1.head.md"]:
        text = open(os.path.join(repo, rel), errors="replace").read()
        for m in re.finditer(r"\bissue \d+", text):
            problems.append("%s: speaks of %r (the project's history; say what is)" % (rel, m.group(0)))

    check_index(repo, problems)

    if zkelect_bin:
        check_help_defaults(repo, zkelect_bin, problems)

    for p in problems:
        print("docs.check: " + p)
    print("docs.check: %s" % ("%d problem(s)" % len(problems) if problems else "ok"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
