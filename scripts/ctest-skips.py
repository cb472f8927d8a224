#!/usr/bin/env python3
"""How many tests of a ctest run ran, passed, failed and were skipped, and why the skipped
ones were: from the JUnit file `ctest --output-junit FILE` writes (CMake >= 3.21).

usage: ctest-skips.py JUNIT.xml [LABEL]
Prints one line "LABEL: N tests: P passed, F failed, S skipped" and, when some were
skipped, one line per reason, most frequent first: the count, the backend (the test
name's first part) and the reason the test gave (a test's `SKIP name (backend): reason`
line, else its last line of output; paths shown as <path>). ctest's own "100% tests
passed" counts a skip as a pass: this says what did not run. Any Python 3 works.
"""
import collections
import re
import sys
import xml.etree.ElementTree as ET


def reason(out, message):
    lines = [ln.strip() for ln in (out or "").splitlines() if ln.strip()]
    for ln in lines:
        m = re.match(r"^SKIP \S+ \(\w+\): (.*)$", ln)
        if m:
            return m.group(1)
    # a test's own "skipped: ..." line before what a launcher (mpiexec) prints after it
    said = [ln for ln in lines if re.match(r"^(SKIP|skipped)\b", ln, re.I)]
    lines = [ln for ln in lines if re.search(r"[A-Za-z0-9]", ln)]  # not a rule of dashes
    text = said[0] if said else (lines[-1] if lines else (message or "no reason given"))
    text = re.sub(r"/[^\s,;:)'\"]+", "<path>", text)
    return text[:160]


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    label = sys.argv[2] if len(sys.argv) > 2 else "ctest"
    root = ET.parse(sys.argv[1]).getroot()
    counts = collections.Counter()
    skips = collections.Counter()
    for case in root.iter("testcase"):
        name = case.get("name", "")
        skipped = case.find("skipped")
        failed = case.find("failure") is not None or case.get("status") == "fail"
        if skipped is not None or case.get("status") in ("notrun", "disabled"):
            counts["skipped"] += 1
            out = case.findtext("system-out")
            msg = skipped.get("message") if skipped is not None else case.get("status")
            skips[(name.split(".", 1)[0], reason(out, msg))] += 1
        elif failed:
            counts["failed"] += 1
        else:
            counts["passed"] += 1
    total = sum(counts.values())
    print(f"{label}: {total} tests: {counts['passed']} passed, {counts['failed']} failed, "
          f"{counts['skipped']} skipped" + (" (why below)" if skips else ""))
    for (backend, why), n in sorted(skips.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {n:5d} skipped  {backend:5s} {why}")


if __name__ == "__main__":
    main()
