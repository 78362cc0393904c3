"""`zoo compare A B` on ledgers with known answers: Kendall's tau against a count of concordant
pairs, the exact permutation p-value, paired effects and their verdicts on both tasks, the error
for unequal grids, and the W&B transfer run read back offline."""

import itertools
import math

import numpy as np
import pytest
import sweepkit

import zoo
from trainkit import offline_run
from zoo.cli import main
from zoo.compare import transfer
from zoo.compare.agreement import rank_agreement

GRID = {"model.norm": ["post", "pre"], "model.ffn": ["relu", "gelu", "swiglu"], "model.position": ["sinusoidal", "learned"]}
VARIANTS = list(itertools.product(*GRID.values()))


def counted_tau(a, b) -> float:
    """Kendall's tau without ties, by counting pairs: (concordant - discordant) / pairs."""
    signs = [math.copysign(1, (a[i] - a[j]) * (b[i] - b[j])) for i, j in itertools.combinations(range(len(a)), 2)]
    return sum(signs) / len(signs)


def sweep_pair(tmp_path, score_a, score_b, metric_b="eval/exact_match", grid_b=None, seeds=(0, 1)):
    """Two sweeps of GRID, scored score(assignment) plus a seed offset that pairing removes."""
    def value(score):
        return lambda a, seed: score(a) + 0.01 * seed
    a = sweepkit.write_sweep(tmp_path / "a", "task-a", GRID, list(seeds), value(score_a))
    b = sweepkit.write_sweep(tmp_path / "b", "task-b", grid_b or GRID, list(seeds), value(score_b), metric=metric_b)
    return a.directory(), b.directory()


def index_of(a) -> int:
    return VARIANTS.index((a["model.norm"], a["model.ffn"], a["model.position"]))


SHUFFLED = [3, 0, 1, 7, 2, 5, 4, 11, 6, 9, 8, 10]
"""B's scores: a fixed permutation of A's ranks 0..11, with some pairs swapped."""


def test_tau_matches_a_count_of_concordant_pairs(tmp_path):
    a_dir, b_dir = sweep_pair(tmp_path, lambda a: index_of(a) / 20, lambda a: SHUFFLED[index_of(a)] / 20)
    report = transfer(a_dir, b_dir, wandb_mode="disabled")
    expected = counted_tau(list(range(12)), SHUFFLED)
    assert report.markdown == a_dir.parent / "task-a-vs-task-b" / "transfer.md", "beside A, named by both sweeps"
    assert report.agreement.n == 12 and report.agreement.tau == pytest.approx(expected)
    assert report.agreement.low <= report.agreement.tau <= report.agreement.high
    assert report.agreement.low >= -1 and report.agreement.high <= 1
    assert 0 < report.agreement.p_value < 0.01, "tau 0.67 over 12 variants is far from chance"


def test_exact_permutation_p_value_for_few_variants():
    perfect = rank_agreement([1.0, 2.0, 3.0, 4.0], [10.0, 20.0, 30.0, 40.0])
    assert perfect.tau == 1.0 and perfect.p_value == pytest.approx(2 / 24), "2 of the 4! pairings reach |tau| = 1"
    reversed_ = rank_agreement([1.0, 2.0, 3.0, 4.0], [4.0, 3.0, 2.0, 1.0])
    assert reversed_.tau == -1.0 and reversed_.p_value == pytest.approx(2 / 24)
    with pytest.raises(ValueError, match="3 or more"):
        rank_agreement([1.0, 2.0], [1.0, 2.0])


def test_effects_side_by_side_with_verdicts(tmp_path):
    """pre is +0.2 on A and about -0.1 on B (reverses); gelu is +0.05 on both (transfers); learned
    only moves A: on B it moves pre up and post down by 1e-4, no effect on average (were its runs
    bit-identical, position would be an identity check on B, not an effect)."""
    def on_a(a):
        learned = a["model.position"] == "learned"
        return 0.3 + 0.2 * (a["model.norm"] == "pre") + 0.05 * (a["model.ffn"] == "gelu") + 0.03 * learned

    def on_b(a):
        pre, learned = a["model.norm"] == "pre", a["model.position"] == "learned"
        return 0.5 - 0.1 * pre + 0.05 * (a["model.ffn"] == "gelu") + 1e-4 * learned * (1 if pre else -1)
    # four seeds: over a family of 4 differences and 5 interactions, 8 pairs could not separate (9 x 2 / 2^8)
    report = transfer(*sweep_pair(tmp_path, on_a, on_b, seeds=(0, 1, 2, 3)), wandb_mode="disabled")
    norm_a, norm_b = report.effects[0]
    assert norm_a.differences[0][1].mean == pytest.approx(0.2) and norm_b.differences[0][1].mean == pytest.approx(-0.0999)
    assert norm_a.differences[0][1].n == 24, "6 other variants x 4 seeds, paired"
    text = report.markdown.read_text()
    verdicts = {line.split(" | ")[1]: line.split(" | ")[-1].rstrip(" |") for line in text.splitlines()
                if line.startswith("| ") and " − " in line}
    assert verdicts == {"pre − post": "reverses", "gelu − relu": "transfers",
                        "swiglu − relu": "not separated on either (inconclusive)",
                        "learned − sinusoidal": "separates on A only (B not separated, inconclusive)"}
    assert "| norm | pre − post | 0.2 | [0.2, 0.2] | 24 | -0.0999 | [" in text


def test_a_loss_on_one_side_is_read_with_its_direction(tmp_path):
    """pre raises exact match on A and lowers the loss on B: the same way better, so it transfers."""
    on_a = lambda a: 0.5 + 0.2 * (a["model.norm"] == "pre") + 0.001 * index_of(a)
    on_b = lambda a: 0.9 - 0.3 * (a["model.norm"] == "pre") - 0.001 * index_of(a)
    report = transfer(*sweep_pair(tmp_path, on_a, on_b, metric_b="eval/loss"), wandb_mode="disabled")
    assert report.agreement.tau == pytest.approx(1.0), "the lowest loss ranks first"
    norm_row = next(line for line in report.markdown.read_text().splitlines() if line.startswith("| norm | pre − post"))
    assert norm_row.endswith("| transfers |"), norm_row


def test_unequal_grids_are_an_error_that_names_the_keys(tmp_path):
    other = {**GRID, "model.ffn": ["relu", "gelu", "geglu"], "train.warmup_steps": [0]}
    del other["model.position"]
    a_dir, b_dir = sweep_pair(tmp_path, lambda a: 0.5, lambda a: 0.5, grid_b=other)
    with pytest.raises(zoo.ConfigError) as err:
        transfer(a_dir, b_dir, wandb_mode="disabled")
    message = str(err.value)
    assert "grids differ" in message and "model.ffn (A: ['relu', 'gelu', 'swiglu']; B: ['relu', 'gelu', 'geglu'])" in message
    assert "model.position only in A" in message and "train.warmup_steps only in B" in message
    assert "model.norm" not in message


def test_cli_writes_the_report_and_a_wandb_transfer_run(tmp_path, capsys):
    a_dir, b_dir = sweep_pair(tmp_path, lambda a: index_of(a) / 20, lambda a: SHUFFLED[index_of(a)] / 20)
    out = tmp_path / "both"
    main(["compare", str(a_dir), str(b_dir), "--out", str(out)])
    printed = capsys.readouterr().out
    progress, printed = printed.split("\n", 2)[:2], printed.split("\n", 2)[2]
    assert progress == ["zoo compare (A): 24 of 24 cells finished", "zoo compare (B): 24 of 24 cells finished"]
    assert printed.startswith(f"Kendall's tau-b {counted_tau(list(range(12)), SHUFFLED):.3f}")
    assert f"report: {out / 'transfer.md'}" in printed
    assert "A: 24 of 24 cells finished; B: 24 of 24 cells finished." in (out / "transfer.md").read_text()
    assert (out / "scatter.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    info, records = offline_run(out)
    meta = next(r["run"] for r in records if r["type"] == "run")
    assert (meta["run_group"], meta["job_type"]) == ("both", "transfer")
    summary = info["summary"]
    assert {summary[k]["nrows"] for k in ("variants", "effects", "rank_agreement")} == {12, 4, 1}
    assert info["config"]["kendall_tau"] == pytest.approx(counted_tau(list(range(12)), SHUFFLED))


def test_three_folders_are_refused(tmp_path):
    with pytest.raises(SystemExit) as exit_:
        main(["compare", "a", "b", "c"])
    assert exit_.value.code == 2


def test_tau_b_with_ties_agrees_with_scipy():
    """Ties on either side (tau-b's correction), in one call over a batch of resamples."""
    from scipy import stats

    from zoo.compare.agreement import tau_b

    rng = np.random.default_rng(3)
    xs, ys = rng.integers(0, 4, (50, 9)).astype(float), rng.integers(0, 3, (50, 9)).astype(float)
    batch = tau_b(xs, ys)
    for x, y, tau in zip(xs, ys, batch):
        expected = stats.kendalltau(x, y).statistic
        assert (math.isnan(tau) and math.isnan(expected)) or tau == pytest.approx(expected)
