"""The results page's tables (experiments/results/README.md), written from the committed results
folders, so none is typed by hand.

    python experiments/results/tables.py --publish sweeps/seed-axes   # copy a finished sweep here
    python experiments/results/tables.py                              # rewrite the page's tables
    python experiments/results/tables.py --check                      # exit 1 if any table is stale

A table stands between two markers in the page:

    <!-- results seed-axes effects eval_auc/token_acc eval/token_acc -->
    ...generated...
    <!-- end results -->

`effects`: each axis's paired differences on each metric, bold where it separates (its
Holm-adjusted p below 0.05, the one decision rule of every table), then which axes separate.
`ranking`: every variant's mean, interval and value in each seed
on the first metric. `interactions`: each axis's paired differences within each value of another.
`by_kind`: each axis's paired differences within each value of `model.kind`, side by side, with
the verdict of `transfer`. `falls`: the runs whose first metric fell most between two evaluations. `transfer` (NAME is
`A+B`, metrics one for each side): each axis's effect on both sweeps with its verdict, and the rank
correlation of the variants. `against_paper`: each row of a sweep of rows against its first, beside
the number a paper reports for it (the folder's paper.yaml), with the Holm-adjusted p and whether
the paper's direction held. `choices` (a tuned sweep): each variant's chosen values and every
value's validation mean; `sensitivity`: each variant's LR sensitivity (Wortsman et al. 2023) and
its effects; `sizes`: each difference at each model size, its interaction with size, the verdict;
`fits` (a sweep over sizes): each variant's law across them, each difference carried past the
largest, and the predictions at sizes held out of the fits; `best_rates` (a tuned sweep over
sizes): each variant's chosen values at every size, side by side; `rate_slopes` (a tuned sweep that
declares rate_slope_margin): each variant's best rate's slope against log2(width), its tests and verdict;
`count` (name `page`): how many Holm-adjusted p-values the page's tables show.
A results folder holds what `zoo sweep` and `zoo compare` left: sweep.yaml, ledger.jsonl,
report.md and the plots; `zoo reproduce experiments/results/NAME/ledger.jsonl` trains its cells again.
"""

from __future__ import annotations

import argparse
import math
import re
import shutil
import sys
from pathlib import Path

from zoo.compare.agreement import oriented, separates, transfer_verdict
from zoo.compare.stats import Estimate, discrete_holm
from zoo.compare.transfer import measure
from zoo.metrics import goal_of
from zoo.specs.yamlio import load_yaml
from zoo.sweep.names import value_text
from zoo.sweep.spec import read_saved_sweep

RESULTS = Path(__file__).resolve().parent
sys.path.insert(0, str(RESULTS))  # its table kinds beside it (run as a file, or loaded from one by the tests)
from formats import analysed, figure, shown, signed  # noqa: E402
from tuned_kinds import best_rates, choices, fits, rate_slopes, sensitivity, sizes  # noqa: E402

README = RESULTS / "README.md"
"""The results page; the project's README gives one line of each result and links here."""
MARKER = re.compile(r"(<!-- results (\S+) (\w+) ([^>]*?) -->\n)(.*?)(<!-- end results -->)", re.S)
PUBLISHED = ("sweep.yaml", "ledger.jsonl", "report.md", "tuning.json", "*.png")


def effects(folder: Path, metrics: list[str]) -> str:
    per_metric = {m: analysed(folder, m)["effects"].effects for m in metrics}
    first, primary = per_metric[metrics[0]], read_saved_sweep(folder)[0].metric

    def endpoint(m: str) -> str:
        return "primary" if m == primary else "secondary"

    lines = ["| axis: paired difference | " + " | ".join(f"`{m}` ({endpoint(m)}) [95% CI, unadjusted]" for m in metrics) + " |",
             "|---" * (len(metrics) + 1) + "|"]
    separated: dict[str, list[str]] = {m: [] for m in metrics}

    def row(label: str, tested: list[tuple]) -> None:
        """One table row: the label, then each metric's (estimate, Holm p) with the label it separates."""
        cells = []
        for m, (estimate, holm_p, axis) in zip(metrics, tested, strict=True):
            cells.append(shown(estimate, holm_p) + ("" if math.isnan(holm_p) else f"; Holm p {holm_p:.2g}"))
            if separates(estimate, holm_p):
                separated[m].append(axis)
        lines.append(f"| {label} | " + " | ".join(cells) + " |")

    for index, effect in enumerate(first):
        for position, (value, _) in enumerate(effect.differences):
            row(f"{effect.label}: {value_text(value)} − {value_text(effect.values[0])}",
                [(per_metric[m][index].differences[position][1], per_metric[m][index].tests[position][1], effect.label)
                 for m in metrics])
        for position, crossed in enumerate(effect.interactions):
            row(crossed.text(), [(per_metric[m][index].interactions[position].estimate,
                                  per_metric[m][index].interactions[position].test[1],
                                  f"{crossed.label} × {crossed.given_label}") for m in metrics])
    differences = sorted({e.n for effect in first for _, e in effect.differences})
    crossings = sorted({i.estimate.n for effect in first for i in effect.interactions})
    found = analysed(folder, metrics[0])["effects"]
    family, short = found.family, found.short
    checks = [f"{'I' if e.identity.holds else 'Warning: i'}{e.identity.text()[1:]}." for e in first if e.identity]
    lines += ["", *([" ".join(checks), ""] if checks else []),
              f"Pairs per difference (each distinct computation once): {', '.join(map(str, differences))}"
              + (f"; per interaction: {', '.join(map(str, crossings))}" if crossings else "")
              + "; Holm p: the exact sign-flip test's p adjusted over the family of the differences and two-way "
              f"interactions of the sweep on that metric whose test can reach its share of the level ({family} of "
              f"{found.members}; a test that cannot, whatever the data, leaves the family first and shows no Holm p: "
              "Tarone 1990); bold: Holm p < 0.05."
              + (f" Before any verdict: {short}." if short else "") + " Axes that separate (some "
              "difference or interaction with Holm p < 0.05): " + "; ".join(
                  f"`{m}`: {', '.join(dict.fromkeys(separated[m])) or 'none'}" for m in metrics) + "."]
    return "\n".join(lines) + "\n"


def ranking(folder: Path, metrics: list[str]) -> str:
    """Every variant, best first, with its value in each seed."""
    analysis = analysed(folder, metrics[0])
    rows = analysis["ranking"].rows
    by_seed = {(r.variant, r.seed): r.metrics.get(metrics[0]) for r in analysis.records}
    seeds = analysis.comparison.seeds

    def value(variant: str, seed: int) -> str:
        found = by_seed.get((variant, seed))
        return "—" if found is None else figure(found)

    lines = [f"| rank | variant | `{metrics[0]}` mean [95% CI] | " + " / ".join(f"seed {s}" for s in seeds) + " |",
             "|---|---|---|---|"]
    lines += [f"| {rank} | {row.variant} | {shown(row.metric)} | "
              + " / ".join(value(row.variant, s) for s in seeds) + " |" for rank, row in enumerate(rows, 1)]
    return "\n".join(lines) + "\n"


def interactions(folder: Path, metrics: list[str]) -> str:
    """Each axis's paired differences within each value of every other axis, bold where Holm p
    (over all of them) is below 0.05."""
    lines = [f"| difference (paired) | at | `{metrics[0]}` [95% CI, unadjusted] | pairs | Holm p |", "|---|---|---|---|---|"]
    for effect in analysed(folder, metrics[0])["interactions"]:
        for (value, estimate), (_, holm_p) in zip(effect.differences, effect.tests, strict=True):
            lines.append(f"| {effect.label}: {value_text(value)} − {value_text(effect.reference)} | "
                         f"{effect.given_label}={value_text(effect.given_value)} | {shown(estimate, holm_p)} | "
                         f"{estimate.n} | {'—' if math.isnan(holm_p) else f'{holm_p:.2g}'} |")
    return "\n".join(lines) + "\n"


def by_kind(folder: Path, metrics: list[str]) -> str:
    """Each axis's paired differences within each model kind side by side, and how they compare
    (the verdicts of `transfer`, the first kind as A)."""
    rows: dict[str, list] = {}
    for effect in analysed(folder, metrics[0])["interactions"]:
        if effect.given_label != "kind":
            continue
        for value, estimate in effect.differences:
            label = f"{effect.label}: {value_text(value)} − {value_text(effect.reference)}"
            rows.setdefault(label, []).append((value_text(effect.given_value), estimate))
    kinds = [kind for kind, _ in next(iter(rows.values()))]
    lines = [f"| difference (paired), `{metrics[0]}` | " + " | ".join(f"kind={k} [95% CI, unadjusted]" for k in kinds)
             + f" | {kinds[0]} (A) against {kinds[1]} (B) |", "|---" * (len(kinds) + 2) + "|"]
    adjusted = iter(discrete_holm([e for cells in rows.values() for _, e in cells]))
    for label, cells in rows.items():
        tests = [next(adjusted) for _ in cells]
        first, second = (oriented(e, goal_of(metrics[0])) for _, e in cells[:2])
        said = transfer_verdict(first, second, *tests[:2])
        sides = named_sides(kinds[0], kinds[1])
        lines.append(f"| {label} | " + " | ".join(shown(e, p) for (_, e), p in zip(cells, tests))
                     + f" | {sides.get(said, said)} |")
    return "\n".join(lines) + (f"\n\nPairs per difference: {cells[0][1].n}; bold (and the verdict): Holm p < 0.05 "
                                "over every difference of the table.\n")


def falls(folder: Path, metrics: list[str], shown_runs: int = 4) -> str:
    """The runs whose first metric fell most between two consecutive evaluations (instability);
    runs that only rose are not listed."""
    found = []
    for record in analysed(folder, metrics[0]).read.records:
        values = [row[metrics[0]] for row in record.history if metrics[0] in row]
        steps = [int(row["train/step"]) for row in record.history if metrics[0] in row]
        if len(values) > 1:
            fall, at = max((values[i] - values[i + 1], steps[i + 1]) for i in range(len(values) - 1))
            found.append((fall, at, record.cell))
    fell = [run for run in sorted(found, reverse=True) if run[0] > 0][:shown_runs]
    if not fell:
        return f"No run's `{metrics[0]}` fell between two evaluations.\n"
    lines = [f"| run | largest fall of `{metrics[0]}` | at step |", "|---|---|---|"]
    lines += [f"| {cell} | {figure(fall)} | {at} |" for fall, at, cell in fell]
    return "\n".join(lines) + "\n"


def named_sides(a: str, b: str) -> dict[str, str]:
    """The verdicts that name a side (transfer_verdict's A and B), with the sides' own names."""
    return {"separates on A only (B not separated, inconclusive)": f"separates on {a} only ({b} not separated, "
            "inconclusive)", "separates on B only (A not separated, inconclusive)": f"separates on {b} only ({a} not "
            "separated, inconclusive)"}


def transfer(folders: list[Path], metrics: list[str]) -> str:
    """Each axis's paired effect on sweep A and on sweep B, the verdict, then Kendall's tau."""
    if len(folders) != 2 or len(metrics) != 2:
        raise SystemExit(f"README.md: a transfer table names two sweeps (A+B) and two metrics, got "
                         f"{'+'.join(f.name for f in folders)} and {' '.join(metrics)}")
    first, second = (analysed(folder, metric) for folder, metric in zip(folders, metrics))
    measured = measure(first, second, "README.md transfer table")
    a, b = first.read, second.read
    lines = [f"| paired difference | {a.comparison.name}, `{metrics[0]}` [95% CI, unadjusted] | "
             f"{b.comparison.name}, `{metrics[1]}` [95% CI, unadjusted] | verdict |", "|---|---|---|---|"]
    sides = named_sides(a.comparison.name, b.comparison.name)
    for ea, eb in measured.effects:
        for (value, da), (_, db), (_, pa), (_, pb) in zip(ea.differences, eb.differences, ea.tests, eb.tests):
            said = transfer_verdict(oriented(da, a.comparison.goal), oriented(db, b.comparison.goal), pa, pb)
            lines.append(f"| {ea.label}: {value_text(value)} − {value_text(ea.values[0])} | {shown(da, pa)} | "
                         f"{shown(db, pb)} | {sides.get(said, said)} |")
    agree = measured.agreement
    two = lambda x: f"{x:.2f}".replace("-", "−")
    lines += ["", f"Ranking of the {agree.n} variants on both: Kendall's tau-b {two(agree.tau)}, 95% bootstrap interval "
              f"[{two(agree.low)}, {two(agree.high)}], permutation p = {agree.p_value:.2g}."]
    return "\n".join(lines) + "\n"


def direction(paper: float, measured: Estimate, holm_p: float, goal: str) -> str:
    """Whether the paper's direction held: the measured difference separated (Holm p < 0.05) with
    the paper's sign, against it, or not at all."""
    better = (lambda d: d < 0) if goal == "min" else (lambda d: d > 0)
    said = "no change" if paper == 0 else ("better" if better(paper) else "worse")
    if not holm_p < 0.05:
        return f"not separated (paper: {said})"
    found = "better" if better(measured.mean) else "worse"
    if said == "no change":
        return f"differs: {found} (paper: no change)"
    return f"held: {found}" if found == said else f"reversed: {found} (paper: {said})"


def against_paper(folder: Path, metrics: list[str]) -> str:
    """Every row's paired difference from the first row on each metric, beside the paper's."""
    paper = load_yaml((folder / "paper.yaml").read_text(encoding="utf-8"), str(folder / "paper.yaml"))
    per_metric = {m: next(e for e in analysed(folder, m)["effects"].effects if e.key == "row") for m in metrics}
    first, goal = per_metric[metrics[0]], goal_of(metrics[0])
    lines = [f"| row − {first.values[0]} | paper: loss (its baseline) | paper: difference | `{metrics[0]}` [95% CI, unadjusted] "
             f"| Holm p | " + " | ".join(f"`{m}` [95% CI, unadjusted]" for m in metrics[1:]) + " | paper's direction here |",
             "|---" * (5 + len(metrics)) + "|"]
    for position, (row, estimate) in enumerate(first.differences):
        said = paper["rows"][row]
        change = said["paper"] - said["baseline"]
        holm_p = first.tests[position][1]
        others = [shown(per_metric[m].differences[position][1], per_metric[m].tests[position][1]) for m in metrics[1:]]
        lines.append(f"| {row}: {said['label']} | {said['paper']:.3f} ({said['baseline']:.3f}) | {signed(change)} | "
                     f"{shown(estimate, holm_p)} | {'—' if math.isnan(holm_p) else f'{holm_p:.2g}'} | " + " | ".join(others)
                     + f" | {direction(change, estimate, holm_p, goal)} |")
    pairs = sorted({e.n for _, e in first.differences})
    kept = sum(not math.isnan(holm_p) for _, holm_p in first.tests)
    lines += ["", f"Pairs per difference: {', '.join(map(str, pairs))} (seeds); Holm p: adjusted over the "
              f"differences on each metric whose test can reach its share of the level ({kept} of "
              f"{len(first.differences)}; one that cannot leaves the family first and shows —: Tarone 1990); bold: "
              "Holm p < 0.05. Source: "
              f"{paper['source']}."]
    return "\n".join(lines) + "\n"


KINDS = {"effects": effects, "ranking": ranking, "interactions": interactions, "by_kind": by_kind, "falls": falls,
         "transfer": transfer, "against_paper": against_paper, "choices": choices, "sensitivity": sensitivity,
         "sizes": sizes, "fits": fits, "best_rates": best_rates, "rate_slopes": rate_slopes}


def render(text: str) -> str:
    def table(match: re.Match) -> str:
        name, kind, metrics = match.group(2), match.group(3), match.group(4).split()
        if kind == "count":
            return match.group(0)  # counted once every other table is written
        if kind not in KINDS:
            raise SystemExit(f"README.md: results table kind {kind!r}; choices: {', '.join([*KINDS, 'count'])}")
        folders = [RESULTS / part for part in name.split("+")]
        return match.group(1) + KINDS[kind](folders if kind == "transfer" else folders[0], metrics) + match.group(6)

    rendered = MARKER.sub(table, text)
    said = (f"This page shows {count_tests(rendered)} Holm-adjusted p-values; each study's verdicts rest on one "
            "family, its effects table's primary column, whose size the line under that table gives.\n")
    return MARKER.sub(lambda m: m.group(1) + said + m.group(6) if m.group(3) == "count" else m.group(0), rendered)


def count_tests(page: str) -> int:
    """The Holm-adjusted p-values the page's generated tables show: each cell that gives one, and
    each row of a table with a Holm p column."""
    tests = 0
    tables = [[line for line in chunk.splitlines() if line.startswith("| ")]
              for match in MARKER.finditer(page) if match.group(3) != "count" for chunk in match.group(5).split("\n\n")]
    for lines in tables:
        if not lines:
            continue
        header = [cell.strip() for cell in lines[0].strip().strip("|").split(" | ")]
        column = next((i for i, name in enumerate(header) if name.startswith("Holm p")), None)
        for line in lines[1:]:
            cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
            tests += sum("Holm p" in cell for cell in cells) + (column is not None and column < len(cells))
    return tests


def publish(sweep_dir: Path) -> Path:
    """Copy what a finished sweep and its comparison wrote into experiments/results/NAME."""
    target = RESULTS / sweep_dir.name
    target.mkdir(exist_ok=True)
    for pattern in PUBLISHED:
        for file in sweep_dir.glob(pattern):
            shutil.copy2(file, target / file.name)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the page's tables differ from the ledgers")
    parser.add_argument("--publish", type=Path, metavar="SWEEP_DIR", help="copy a finished, compared sweep here")
    args = parser.parse_args(argv)
    if args.publish:
        print(f"published: {publish(args.publish)}")
        return 0
    text = README.read_text(encoding="utf-8")
    rendered = render(text)
    if args.check:
        if rendered != text:
            print(f"{README}: a results table differs from its committed ledger; run python experiments/results/tables.py")
            return 1
        return 0
    README.write_text(rendered, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
