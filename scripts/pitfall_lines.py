#!/usr/bin/env python3
"""Refresh the "What you see" blocks of every */PITFALLS.md.

Each pitfall test logs one line: the symptom with the bug and the
behaviour with the fix, with the run's numbers. This script runs the tests
each PITFALLS.md section cites (`go test -json`), and writes, under the
section's "Reproduced by" paragraph, a block with the line each logged.
A section that cites TestPitfall tests shows theirs; one that cites none
shows the lines of the tests it does cite. Run from anywhere:

    python3 scripts/pitfall_lines.py          # rewrite the blocks
    python3 scripts/pitfall_lines.py --check  # exit 1 if a block would change

The numbers are deterministic except where a test measures timing or
concurrency (the router's replica tests); docs/pitfalls_test.go checks
that every cited TestPitfall has its line.

A line counts only if go test reports it at a _test.go file: that is where
a learner's `go test -v -run Pitfall` should point. A cited test's line
reported anywhere else (a helper that is not marked t.Helper()) is left
out, named on stderr, and makes the script exit 1.
"""
import collections
import glob
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEST = re.compile(r"\bTest[A-Z][A-Za-z0-9_]*")
HEADING = re.compile(r"^#{2,3} ")
LOGLINE = re.compile(r"^\s+(\S+\.go):\d+: (.*)$")
HEADER = "**What you see**"


def sections(lines):
    """(start, end) line ranges of the ## and ### sections."""
    heads = [i for i, l in enumerate(lines) if HEADING.match(l)]
    return [(h, heads[k + 1] if k + 1 < len(heads) else len(lines)) for k, h in enumerate(heads)]


def strip_blocks(lines):
    """lines without the blocks an earlier run wrote."""
    out, i = [], 0
    while i < len(lines):
        if lines[i].startswith(HEADER):
            if out and out[-1] == "":
                out.pop()
            i += 1
            while i < len(lines) and (lines[i] == "" or lines[i].startswith("    ")):
                if lines[i] == "" and i + 1 < len(lines) and not lines[i + 1].startswith("    "):
                    break
                i += 1
            continue
        out.append(lines[i])
        i += 1
    return out


def shown(sec):
    """The tests a section's block shows."""
    names = []
    for l in sec:
        for t in TEST.findall(l):
            if t not in names:
                names.append(t)
    pitfalls = [t for t in names if t.startswith("TestPitfall")]
    return pitfalls or names


# misplaced collects "Test: file" for lines reported outside a _test.go file.
misplaced = []


def run(pkg, names):
    """{test: [logged lines]} for names, run in ./pkg/..."""
    logs = collections.defaultdict(list)
    if not names:
        return logs
    cmd = ["go", "test", "-count=1", "-json", "-run", "^(%s)$" % "|".join(sorted(set(names))), "./%s/..." % pkg]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True).stdout
    for line in out.splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if ev.get("Action") == "output" and ev.get("Test"):
            m = LOGLINE.match(ev["Output"].rstrip("\n"))
            if not m:
                continue
            test = ev["Test"].split("/")[0]
            if not m.group(1).endswith("_test.go"):
                if test in names:
                    misplaced.append("%s: %s" % (test, m.group(1)))
                continue
            logs[test].append(m.group(2))
    return logs


def refresh(path, check):
    pkg = os.path.basename(os.path.dirname(path))
    with open(path) as f:
        text = f.read()
    lines = strip_blocks(text.split("\n"))
    wanted = [shown(lines[a:b]) for a, b in sections(lines)]
    logs = run(pkg, [t for names in wanted for t in names])
    inserts = {}
    for (a, b), names in zip(sections(lines), wanted):
        names = [t for t in names if logs.get(t)]
        if not names:
            continue
        k = next((i for i in range(a, b) if lines[i].startswith("**Reproduced by.**")), None)
        if k is None:
            k = next(i for i in range(a, b) if names[0] in lines[i])
        while k < b and lines[k].strip() != "":
            k += 1
        pattern = "'^%s$'" % names[0] if len(names) == 1 else "'^(%s)$'" % "|".join(names)
        what = "the line the test logs" if len(names) == 1 else "the line each test logs"
        block = ["", "%s (`go test -v -run %s ./%s/...`, %s):" % (HEADER, pattern, pkg, what), ""]
        block += ["    %s: %s" % (t, m) for t in names for m in logs[t]]
        inserts[k] = block
    out = []
    for i, l in enumerate(lines):
        out.extend(inserts.get(i, []))
        out.append(l)
    out.extend(inserts.get(len(lines), []))
    new = "\n".join(out).rstrip("\n") + "\n"
    if new == text:
        return False
    if not check:
        with open(path, "w") as f:
            f.write(new)
    return True


def main():
    check = "--check" in sys.argv[1:]
    changed = [p for p in sorted(glob.glob(os.path.join(ROOT, "*", "PITFALLS.md"))) if refresh(p, check)]
    for p in changed:
        print(("would change: " if check else "rewrote: ") + os.path.relpath(p, ROOT))
    for m in misplaced:
        print("left out, reported outside its test file: " + m, file=sys.stderr)
    return 1 if (check and changed) or misplaced else 0


if __name__ == "__main__":
    sys.exit(main())
