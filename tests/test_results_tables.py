"""The results page's tables (experiments/results/README.md) are generated from committed ledgers: known answers for the
generator, a stale table caught, and the committed tables as the ledgers give them."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from sweepkit import write_sweep

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def tables():
    spec = importlib.util.spec_from_file_location("tables", ROOT / "experiments" / "results" / "tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def known(tmp_path, seeds: int = 4):
    """pre adds exactly 0.2 to the metric in every pair; gelu adds 0.01 plus noise that cancels in the
    mean. Four seeds by default: 8 pairs per difference, where the exact test can separate."""
    return write_sweep(tmp_path, "known", {"model.norm": ["post", "pre"], "model.ffn": ["relu", "gelu"]}, list(range(seeds)),
                       lambda a, seed: 0.4 + 0.2 * (a["model.norm"] == "pre")
                       + (0.01 + 0.02 * (-1) ** seed) * (a["model.ffn"] == "gelu"))


def test_effects_table_of_known_differences(tables, tmp_path):
    folder = known(tmp_path).directory()
    text = tables.effects(folder, ["eval/exact_match", "eval/loss"])
    lines = text.splitlines()
    assert lines[0] == ("| axis: paired difference | `eval/exact_match` (primary) [95% CI, unadjusted] | `eval/loss` (secondary) "
                        "[95% CI, unadjusted] |")
    # pre − post is +0.2 in all 8 pairs: the exact test's smallest p, 2 / 2^8, doubled by Holm over the family of
    # the 2 differences; the interaction's 4 pairs (smallest p 0.125) cannot reach a share of the level and leave
    # the family first (pre adds 0.2 with either ffn: the interaction is 0 in its 4 pairs)
    assert lines[2] == ("| norm: pre − post | **+0.200 [0.200, 0.200]**; Holm p 0.016 | **−0.200 [−0.200, −0.200]**; "
                        "Holm p 0.016 |")
    assert lines[3] == "| norm × ffn: (pre − post) at gelu − at relu | 0 [0.00, 0.00] | 0 [0.00, 0.00] |", "no Holm p"
    assert lines[4].startswith("| ffn: gelu − relu | +0.0100 [") and "**" not in lines[4], "the interval spans zero"
    # gelu − relu is +0.03 or −0.01 in four pairs each: of the 256 sign assignments, 72 reach |mean| >= 0.01
    # (p 0.28); Holm's second step keeps it
    assert "; Holm p 0.28 |" in lines[4]
    assert lines[-1].endswith("on that metric whose test can reach its share of the level (2 of 3; a test that cannot, "
                              "whatever the data, leaves the family first and shows no Holm p: Tarone 1990); bold: "
                              "Holm p < 0.05. Axes that separate (some difference or interaction with Holm p < 0.05): "
                              "`eval/exact_match`: norm; `eval/loss`: norm.")
    assert "(each distinct computation once): 8; per interaction: 4;" in lines[-1]
    few = tables.effects(known(tmp_path / "few", seeds=2).directory(), ["eval/exact_match"]).splitlines()[-1]
    assert "(0 of 3;" in few and "Before any verdict: no difference of 2 or 4 pairs can separate, whatever the data: " \
        "the exact test's smallest p at 4 pairs is 0.125, not below 0.05; 6 pairs (seeds × other cells) could" in few


def test_ranking_table_lists_every_variant_best_first(tables, tmp_path):
    text = tables.ranking(known(tmp_path, seeds=2).directory(), ["eval/exact_match"])
    variants = [line.split(" | ")[1] for line in text.splitlines()[2:]]
    assert variants == ["norm=pre,ffn=gelu", "norm=pre,ffn=relu", "norm=post,ffn=gelu", "norm=post,ffn=relu"]
    assert text.splitlines()[0].endswith("| seed 0 / seed 1 |")
    assert text.splitlines()[2].endswith("| 0.630 / 0.590 |"), "0.6 + 0.01 ± 0.02 in the two seeds"


def test_interactions_table_pairs_within_each_value_of_another_axis(tables, tmp_path):
    lines = tables.interactions(known(tmp_path).directory(), ["eval/exact_match"]).splitlines()
    # 4 pairs each (seeds): the smallest p, 2 / 2^4 = 0.125, cannot reach even the whole level: none is tested
    assert "| norm: pre − post | ffn=relu | +0.200 [0.200, 0.200] | 4 | — |" in lines
    assert "| norm: pre − post | ffn=gelu | +0.200 [0.200, 0.200] | 4 | — |" in lines
    assert any(line.startswith("| ffn: gelu − relu | norm=post | +0.0100 [") for line in lines)


def test_falls_lists_only_runs_that_fell_most_first(tables, tmp_path):
    def history(a, seed, final):  # post falls by 0.3 at step 100 in seed 1; every other run rises
        dip = 0.3 if (a["model.norm"], seed) == ("post", 1) else -0.1
        return [{"train/step": 50, "eval/exact_match": final}, {"train/step": 100, "eval/exact_match": final - dip}]

    sweep = write_sweep(tmp_path, "dips", {"model.norm": ["post", "pre"]}, [0, 1], lambda a, s: 0.5, history=history)
    lines = tables.falls(sweep.directory(), ["eval/exact_match"]).splitlines()
    assert lines[2:] == ["| norm=post,seed=1 | 0.300 | 100 |"]
    flat = write_sweep(tmp_path, "rises", {"model.norm": ["post"]}, [0], lambda a, s: 0.5)
    assert tables.falls(flat.directory(), ["eval/exact_match"]) == "No run's `eval/exact_match` fell between two evaluations.\n"


def test_transfer_table_gives_each_axis_a_verdict_and_the_rank_correlation(tables, tmp_path):
    """On A, pre and gelu both help; on B (a loss) pre helps and gelu does nothing: pre transfers,
    gelu separates on A only. The four variants rank identically by norm and differently within it."""
    grid = {"model.norm": ["post", "pre"], "model.ffn": ["relu", "gelu"]}
    write_sweep(tmp_path, "a", grid, [0, 1, 2, 3], lambda a, s: 0.4 + 0.2 * (a["model.norm"] == "pre")
                + 0.05 * (a["model.ffn"] == "gelu") + 0.001 * (-1) ** s)
    write_sweep(tmp_path, "b", grid, [0, 1, 2, 3], lambda a, s: 2.0 - 0.5 * (a["model.norm"] == "pre")
                + 0.01 * (-1) ** s * (a["model.ffn"] == "gelu"), metric="eval/loss")
    lines = tables.transfer([tmp_path / "a", tmp_path / "b"], ["eval/exact_match", "eval/loss"]).splitlines()
    assert lines[0] == ("| paired difference | a, `eval/exact_match` [95% CI, unadjusted] | b, `eval/loss` [95% CI, unadjusted] "
                        "| verdict |")
    assert lines[2] == "| norm: pre − post | **+0.200 [0.200, 0.200]** | **−0.500 [−0.500, −0.500]** | transfers |"
    assert lines[3].startswith("| ffn: gelu − relu | **+0.0500 [")
    assert lines[3].endswith("| separates on a only (b not separated, inconclusive) |")
    assert lines[-1].startswith("Ranking of the 4 variants on both: Kendall's tau-b ")
    with pytest.raises(SystemExit, match="two sweeps"):
        tables.transfer([tmp_path / "a"], ["eval/exact_match"])


def test_a_stale_table_is_rewritten_and_caught(tables, tmp_path, monkeypatch):
    known(tmp_path)
    monkeypatch.setattr(tables, "RESULTS", tmp_path)
    readme = tmp_path / "README.md"
    monkeypatch.setattr(tables, "README", readme)
    readme.write_text("# r\n\n<!-- results known effects eval/exact_match -->\n| typed by hand |\n<!-- end results -->\nafter\n")
    assert tables.main(["--check"]) == 1
    assert tables.main([]) == 0
    assert "| norm: pre − post | **+0.200" in readme.read_text() and "typed by hand" not in readme.read_text()
    assert tables.main(["--check"]) == 0 and readme.read_text().endswith("<!-- end results -->\nafter\n")


@pytest.mark.slow
def test_the_readmes_tables_are_the_committed_ledgers(tables):
    assert tables.MARKER.findall((ROOT / "experiments" / "results" / "README.md").read_text()), \
        "the results page publishes generated tables"
    assert not tables.MARKER.findall((ROOT / "README.md").read_text()), "the README links to them, one line each"
    assert tables.main(["--check"]) == 0


def test_against_paper_reads_each_row_beside_the_papers_number(tables, tmp_path):
    """Row `better` lowers the loss by 0.1 in every seed (the paper: lower too), `worse` raises it
    by 0.1 (the paper: lower, so reversed), `noise` moves by ±0.05 (not separated)."""
    shift = {"baseline": 0.0, "better": -0.1, "worse": 0.1}
    rows = {name: {} if name == "baseline" else {"model.d_ff": 8 + i} for i, name in enumerate([*shift, "noise"])}
    sweep = write_sweep(tmp_path, "rows", {}, list(range(8)), metric="test/loss", rows=rows,
                        value=lambda a, seed: 2.0 + seed * 0.01 + shift.get(a["row"], 0.05 * (-1) ** seed))
    folder = sweep.directory()
    (folder / "paper.yaml").write_text("source: a paper\nrows:\n"
                                       "  better: {label: B, paper: 1.7, baseline: 1.8}\n"
                                       "  worse: {label: W, paper: 1.75, baseline: 1.8}\n"
                                       "  noise: {label: N, paper: 1.8, baseline: 1.8}\n")
    lines = tables.against_paper(folder, ["test/loss"]).splitlines()
    # 8 seeds: the smallest p, 2 / 2^8, times the 3 rows: 0.023
    assert lines[2].startswith("| better: B | 1.700 (1.800) | −0.100 | **−0.100 [−0.100, −0.100]** | 0.023 |")
    assert lines[2].endswith("| held: better |")
    assert lines[3].endswith("| reversed: worse (paper: better) |")
    assert lines[4].endswith("| not separated (paper: no change) |")
    assert ("Holm p: adjusted over the differences on each metric whose test can reach its share of the level (3 of "
            "3; one that cannot leaves the family first and shows —: Tarone 1990); bold: Holm p < 0.05. Source: a "
            "paper.") in lines[-1]


def test_tables_of_a_tuned_sweep_are_its_choice_and_its_chosen_runs(tables, tmp_path):
    from test_tuned_sweep import held_out_of, write_tuned

    folder = write_tuned(tmp_path).directory()
    picked = tables.choices(folder, ["test/token_acc"])
    assert "| norm=pre | lr=0.01 | lr=0.01 is the largest value tried | 0.630 / 0.730 / 0.810 |" in picked
    assert "| norm=post | lr=0.003 | — |" in picked
    ranked = tables.ranking(folder, ["test/token_acc"])
    assert " / ".join(tables.figure(held_out_of("post", 0.003, s)) for s in range(3)) in ranked
    sensitive = tables.sensitivity(folder, ["test/token_acc"])
    assert sensitive.startswith("| variant | LR sensitivity [95% CI] |") and "| norm: pre − post |" in sensitive


def test_sizes_table_says_whether_each_difference_holds(tables, tmp_path):
    from test_compare_sizes import sized_sweep

    text = tables.sizes(sized_sweep(tmp_path).directory(), ["eval/exact_match"])
    assert "| norm: pre − post |" in text and "depends on size: an interaction separates" in text
    assert "one sign at every size, separated at 2 of 2; no interaction separated (inconclusive)" in text


def test_a_tuned_sweeps_effects_beside_its_effects_at_one_fixed_value(tables, tmp_path):
    from test_tuned_sweep import held_out_of, write_tuned

    folder = write_tuned(tmp_path).directory()
    text = tables.effects(folder, ["test/token_acc", "test/token_acc@train.optimizer.lr=0.001"])
    tuned = np.mean([held_out_of("pre", 0.01, s) - held_out_of("post", 0.003, s) for s in range(3)])
    fixed = np.mean([held_out_of("pre", 0.001, s) - held_out_of("post", 0.001, s) for s in range(3)])
    row = next(line for line in text.splitlines() if line.startswith("| norm: pre − post |"))
    assert tables.signed(tuned) in row.split("|")[2] and tables.signed(fixed) in row.split("|")[3]


def test_verdict_changes_lists_every_cell_whose_separation_changed():
    spec = importlib.util.spec_from_file_location("verdict_changes", ROOT / "experiments" / "results" / "verdict_changes.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def page(norm: str, ffn: str, rows: str = "", interval: str = "95% CI") -> str:
        return (f"# r\n\n<!-- results s effects m -->\n| axis: paired difference | `m` [{interval}] |\n|---|---|\n"
                f"| norm: pre − post | {norm} |\n| ffn: gelu − relu | {ffn} |\n{rows}<!-- end results -->\n")

    before = page("**+0.2 [0.1, 0.3]**; Holm p 0.01", "+0.1 [−0.1, 0.3]; Holm p 0.4",
                  "| attention: fused − per_head | **+0.1 [0.05, 0.2]**; Holm p 0.02 |\n")
    after = page("+0.2 [0.1, 0.3]; Holm p 0.25", "+0.1 [−0.1, 0.3]; Holm p 0.4", interval="95% CI, unadjusted")  # renamed
    assert module.changes(before, after) == [
        ["s effects", "attention: fused − per_head", "`m` [95% CI]", "separated (Holm p 0.02)", "row gone"],
        ["s effects", "norm: pre − post", "`m` [95% CI]", "separated (Holm p 0.01)", "not separated (Holm p 0.25)"]]
    assert module.changes(after, after) == []


def test_the_page_counts_the_holm_adjusted_p_values_it_shows(tables):
    page = ("<!-- results a effects m n -->\n| axis | `m` | `n` |\n|---|---|---|\n| x | +1; Holm p 0.01 | +2; Holm p 0.2 |\n"
            "| y | +1; Holm p 0.5 | +2 |\n\nPairs: 4.\n<!-- end results -->\n"
            "<!-- results a interactions m -->\n| difference | at | `m` | pairs | Holm p |\n|---|---|---|---|---|\n"
            "| x | y=1 | +1 | 4 | 0.3 |\n| x | y=2 | +1 | 4 | 0.4 |\n<!-- end results -->\n"
            "<!-- results a ranking m -->\n| rank | variant | `m` mean [95% CI] |\n|---|---|---|\n| 1 | v | 0.5 |\n"
            "<!-- end results -->\n<!-- results page count tests -->\n<!-- end results -->\n")
    assert tables.count_tests(page) == 3 + 2, "three cells give a Holm p; two rows of a Holm p column"


def test_best_rates_and_fits_of_a_tuned_ladder(tables, tmp_path):
    """pre's best rate grows with the size, post's holds; the fits read each variant at its chosen rate."""
    sizes = {f"s{i}": {"model.d_model": 16 * 2**i} for i in range(4)}
    best = {("pre", "s0"): 0.001, ("pre", "s1"): 0.001, ("pre", "s2"): 0.01, ("pre", "s3"): 0.01}

    def loss(a, seed):
        c = 4 ** int(a["size"][1])
        off = a["train.optimizer.lr"] != best.get((a["model.norm"], a["size"]), 0.001)
        return 2.0 + c**-0.3 + 0.5 * off + 0.001 * seed + 0.01 * (a["model.norm"] == "pre")

    folder = write_sweep(tmp_path, "tuned-ladder", {"model.norm": ["post", "pre"]}, [0, 1, 2], loss, metric="test/loss",
                         sizes=sizes, tune={"train.optimizer.lr": [0.001, 0.01]}, choose_on="eval/loss",
                         fields=lambda a, s: {"flops": 1e12 * 4 ** int(a["size"][1]),
                                              "metrics": {"test/loss": loss(a, s), "eval/loss": loss(a, s)}}).directory()
    rates = tables.best_rates(folder, ["test/loss"])
    assert "| variant | size=s0 | size=s1 | size=s2 | size=s3 |" in rates
    assert "| norm=post | 0.001 * | 0.001 * | 0.001 * | 0.001 * |" in rates  # the smallest tried: an edge
    assert "| norm=pre | 0.001 * | 0.001 * | 0.01 * | 0.01 * |" in rates
    fitted = tables.fits(folder, ["test/loss"])
    assert "| norm=post | 3 | 0.3 [0.3, 0.3] |" in fitted and "| norm: pre − post |" in fitted


def test_a_cited_commit_is_the_commit_its_ledger_records():
    """Each section of the results page that links a results folder cites the commit its runs were
    trained at: every commit it names is one some record of its ledgers carries (two sections named
    another commit until 2026-12-07)."""
    import json
    import re

    page = (ROOT / "experiments" / "results" / "README.md").read_text(encoding="utf-8")
    checked = 0
    for section in page.split("\n## ")[1:]:
        folders = set(re.findall(r"\]\(([\w-]+)/(?:report|transfer)\.md\)", section))
        recorded = {json.loads(line).get("environment", {}).get("zoo_commit") or ""
                    for folder in folders if (ROOT / "experiments" / "results" / folder / "ledger.jsonl").is_file()
                    for line in (ROOT / "experiments" / "results" / folder / "ledger.jsonl").read_text().splitlines()}
        for commit in re.findall(r"\bcommits? `?([0-9a-f]{7,40})\b", section):
            if recorded:
                checked += 1
                assert any(full.startswith(commit) for full in recorded), (section.splitlines()[0], commit, recorded)
    assert checked >= 15
