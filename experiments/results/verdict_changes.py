"""Which verdicts of the results page a new analysis changes: every generated table cell whose
separation (bold: Holm p < 0.05) differs between the page at a git revision and the page now, and
every row one of them has and the other lacks.

    python experiments/results/verdict_changes.py REVISION     # prints a Markdown table

Run it after `python experiments/results/tables.py` has rewritten the page with the new analysis;
the page's section "Published -> now" holds its output for the change that introduced it.
"""

from __future__ import annotations

import argparse
import re
import subprocess
from pathlib import Path

RESULTS = Path(__file__).resolve().parent
README = RESULTS / "README.md"
BLOCK = re.compile(r"<!-- results (\S+) (\w+) ([^>]*?) -->\n(.*?)<!-- end results -->", re.S)


def cells(page: str) -> dict[tuple[str, str, str], str]:
    """(table, row, column) -> the cell, for every row of every generated table."""
    found = {}
    for name, kind, _metrics, body in BLOCK.findall(page):
        lines = [line for line in body.splitlines() if line.startswith("| ")]
        if not lines:
            continue
        header = [re.sub(r" \((primary|secondary)\)|, unadjusted", "", c.strip())  # a column's name, as it was
                  for c in lines[0].strip("|").split(" | ")]
        for line in lines[1:]:
            row = [c.strip() for c in line.strip().strip("|").split(" | ")]
            label = " at ".join(row[:2]) if kind in ("interactions", "sizes") else row[0]
            for column, cell in zip(header[1:], row[1:], strict=False):
                found[(f"{name} {kind}", label, column)] = cell
    return found


def separated(cell: str) -> bool:
    return "**" in cell


def holm_of(cell: str) -> str:
    match = re.search(r"Holm p ([0-9.e+-]+)", cell)
    return match.group(1) if match else "—"


def changes(before: str, after: str) -> list[list[str]]:
    old, new = cells(before), cells(after)
    rows = []
    for key in sorted(old.keys() | new.keys()):
        table, label, column = key
        if key not in new:
            if separated(old[key]):
                rows.append([table, label, column, f"separated (Holm p {holm_of(old[key])})", "row gone"])
            continue
        if key not in old:
            if separated(new[key]):
                rows.append([table, label, column, "no such row", f"separated (Holm p {holm_of(new[key])})"])
            continue
        if separated(old[key]) != separated(new[key]):
            said = {True: "separated", False: "not separated"}
            rows.append([table, label, column, f"{said[separated(old[key])]} (Holm p {holm_of(old[key])})",
                         f"{said[separated(new[key])]} (Holm p {holm_of(new[key])})"])
    return rows


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("revision", help="the git revision of the published page")
    args = parser.parse_args(argv)
    path = README.relative_to(subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True,
                                             check=True, cwd=RESULTS).stdout.strip())
    before = subprocess.run(["git", "show", f"{args.revision}:{path}"], capture_output=True, text=True, check=True,
                            cwd=RESULTS).stdout
    rows = changes(before, README.read_text(encoding="utf-8"))
    text = "\n".join(["| table | row | column | published | now |", "|---|---|---|---|---|",
                      *("| " + " | ".join(row) + " |" for row in rows)])
    print(text)
    return text


if __name__ == "__main__":
    main()
