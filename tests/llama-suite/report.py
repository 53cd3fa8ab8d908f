#!/usr/bin/env python3
"""report.py reads the JUnit XML of llama.cpp's server tests run against serve
(and against the real llama-server, the control) and prints, per test file,
passed/failed/skipped for each, then the tests that pass on the control and
fail on serve with the first line of serve's failure, and the llama-server
flags the shim could not map to serve's.
"""
import argparse
import collections
import xml.etree.ElementTree as ET


def results(path):
    """Maps (file, test) to (outcome, first line of the failure)."""
    out = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        file = case.get("classname", "").split(".")[-1]
        outcome, why = "passed", ""
        for tag in ("failure", "error", "skipped"):
            el = case.find(tag)
            if el is not None:
                outcome = "skipped" if tag == "skipped" else "failed"
                text = el.get("message") or el.text or ""
                why = text.strip().splitlines()[0] if text.strip() else tag
                break
        out[(file, case.get("name"))] = (outcome, why)
    return out


def counts(res):
    c = collections.defaultdict(collections.Counter)
    for (file, _), (outcome, _) in res.items():
        c[file][outcome] += 1
    return c


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--serve", required=True)
    ap.add_argument("--control")
    ap.add_argument("--unmapped")
    ap.add_argument("--title", default="")
    ap.add_argument("--table")
    ap.add_argument("--failures")
    a = ap.parse_args()

    serve = results(a.serve)
    control = results(a.control) if a.control else {}
    cs, cc = counts(serve), counts(control)
    files = sorted(set(cs) | set(cc))
    head = "| file | serve passed/failed/skipped |" + (" llama-server passed/failed/skipped |" if control else "")
    lines = [a.title, "", head, "|---|---|" + ("---|" if control else "")]
    total_s, total_c = collections.Counter(), collections.Counter()
    for f in files:
        row = f"| {f} | {cs[f]['passed']}/{cs[f]['failed']}/{cs[f]['skipped']} |"
        if control:
            row += f" {cc[f]['passed']}/{cc[f]['failed']}/{cc[f]['skipped']} |"
        lines.append(row)
        total_s.update(cs[f])
        total_c.update(cc[f])
    row = f"| all | {total_s['passed']}/{total_s['failed']}/{total_s['skipped']} |"
    if control:
        row += f" {total_c['passed']}/{total_c['failed']}/{total_c['skipped']} |"
    lines.append(row)
    table = "\n".join(lines) + "\n"

    fail = []
    if control:
        both = [k for k, (o, _) in control.items() if o == "passed"]
        fail = [k for k in both if serve.get(k, ("missing", "not run on serve"))[0] != "passed"]
        fail_head = f"{len(fail)} of the {len(both)} tests that pass on llama-server fail on serve"
    else:
        fail = [k for k, (o, _) in serve.items() if o == "failed"]
        fail_head = f"{len(fail)} tests fail on serve (no control run: LLAMA_CPP_DIR unset)"
    flines = [a.title, fail_head]
    for k in sorted(fail):
        flines.append(f"{k[0]}::{k[1]}: {serve.get(k, ('', 'not run on serve'))[1]}")
    failures = "\n".join(flines) + "\n"

    unmapped = collections.Counter()
    if a.unmapped:
        try:
            with open(a.unmapped) as fh:
                for line in fh:
                    parts = line.rstrip("\n").split("\t")
                    if len(parts) >= 2:
                        unmapped[parts[1].split(" ")[0]] += 1
        except FileNotFoundError:
            pass
    un = "flags serve has no counterpart for (server starts): " + (
        ", ".join(f"{f} ({n})" for f, n in sorted(unmapped.items())) or "none") + "\n"

    print(table)
    print(failures)
    print(un)
    if a.table:
        open(a.table, "w").write(table + "\n" + un)
    if a.failures:
        open(a.failures, "w").write(failures)


if __name__ == "__main__":
    main()
