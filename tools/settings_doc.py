#!/usr/bin/env python3
"""The settings table of docs/API.md, made from the library's own table.

Runs `gpuwrap info --json --settings` (with no GPUWRAP_* variable set) and writes the
rows as Markdown between the markers `<!-- settings:begin -->` and `<!-- settings:end -->`.

usage: settings_doc.py GPUWRAP_TOOL API_MD [--check]
  --check  exit 1 (and say what differs) when API_MD's table is not what the library has;
           CTest runs this (docs.settings_table), so the doc cannot drift from the code.
Any Python 3 works (no modules beyond the standard library).
"""
import json
import os
import subprocess
import sys

BEGIN, END = "<!-- settings:begin -->", "<!-- settings:end -->"


def table(tool):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUWRAP_")}
    out = subprocess.run([tool, "info", "--json", "--settings"], env=env, check=True,
                         capture_output=True, text=True).stdout
    rows = ["| variable | read by | type | default | range | what |", "|---|---|---|---|---|---|"]
    for s in json.loads(out)["settings"]:
        rng = s["range"].replace("|", "\\|")
        dflt = f"`{s['default']}`" if s["default"] else "unset"
        rows.append(f"| `{s['name']}` | {s['component']} | {s['type']} | {dflt} | {rng} | {s['doc']} |")
    return "\n".join(rows) + "\n"


def main(argv):
    if len(argv) < 3 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) > 1 and argv[1] in ("-h", "--help") else 2
    tool, doc, check = argv[1], argv[2], "--check" in argv[3:]
    text = open(doc, encoding="utf-8").read()
    if BEGIN not in text or END not in text:
        print(f"settings_doc: {doc} has no {BEGIN} ... {END} markers", file=sys.stderr)
        return 1
    head, rest = text.split(BEGIN, 1)
    old, tail = rest.split(END, 1)
    new = "\n" + table(tool)
    if check:
        if old == new:
            return 0
        print(f"settings_doc: the settings table in {doc} differs from the library's; run\n"
              f"  {sys.argv[0]} {tool} {doc}\nto rewrite it", file=sys.stderr)
        return 1
    with open(doc, "w", encoding="utf-8") as f:
        f.write(head + BEGIN + new + END + tail)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
