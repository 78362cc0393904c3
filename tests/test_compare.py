"""`zoo compare` on ledgers with a known answer: the ranking, the intervals, paired differences,
steps to target, the report, the plots and the W&B compare run read back offline."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import sweepkit
import yaml

import zoo
from trainkit import offline_run
from zoo.compare import Estimate, compare
from zoo.compare.comparison import Comparison
from zoo.sweep import Ledger, SweepSpec

T_975_3 = 3.182446305284263  # Student's t, 97.5% quantile, 3 degrees of freedom (tables)


def test_estimate_matches_the_textbook_interval():
    e = Estimate.of([1.0, 2.0, 3.0, 4.0])
    std = math.sqrt(5 / 3)
    assert (e.mean, e.n) == (2.5, 4) and e.std == pytest.approx(std)
    assert (e.low, e.high) == pytest.approx((2.5 - T_975_3 * std / 2, 2.5 + T_975_3 * std / 2))
    one = Estimate.of([7.0])
    assert one.mean == 7.0 and math.isnan(one.std) and math.isnan(one.low)
    assert Estimate.of([]).n == 0


def write_sweep(tmp_path, value, statuses=None) -> SweepSpec:
    """A finished sweep whose metric is value(norm, ffn, seed); history reaches the value at step 100."""
    return sweepkit.write_sweep(tmp_path, "known", {"model.norm": ["post", "pre"], "model.ffn": ["relu", "gelu"]},
                                [0, 1, 2, 3], lambda a, seed: value(a["model.norm"], a["model.ffn"], seed), target=0.5,
                                statuses=statuses)


def known(norm, ffn, seed):
    """pre adds exactly 0.2 in every (ffn, seed) pair; gelu adds 0.05 plus seed noise."""
    noise = [0.0, 0.03, -0.02, 0.01][seed]
    return 0.4 + 0.1 * seed + (0.2 if norm == "pre" else 0.0) + (0.05 + noise if ffn == "gelu" else 0.0)


def test_ranked_table_effects_and_paired_differences(tmp_path):
    sweep = write_sweep(tmp_path, known)
    report = compare(sweep.directory(), wandb_mode="disabled")
    assert [row.variant for row in report.rows] == [
        "norm=pre,ffn=gelu", "norm=pre,ffn=relu", "norm=post,ffn=gelu", "norm=post,ffn=relu"]
    top = report.rows[0]
    values = [known("pre", "gelu", s) for s in range(4)]
    assert top.metric.mean == pytest.approx(np.mean(values)) and top.metric.n == 4
    assert top.metric.std == pytest.approx(np.std(values, ddof=1)) and top.parameters == 1001
    norm, ffn = report.effects
    assert norm.values == ["post", "pre"] and norm.estimates[1].n == 8
    (value, diff), = norm.differences
    assert value == "pre" and diff.n == 8
    assert (diff.mean, diff.low, diff.high) == pytest.approx((0.2, 0.2, 0.2)), "paired: no seed variance left"
    (_, gelu), = ffn.differences
    noise = np.array([0.0, 0.03, -0.02, 0.01] * 2)
    half = float(np.std(0.05 + noise, ddof=1) / math.sqrt(8)) * 2.364624251592785  # t 97.5%, 7 dof
    assert gelu.mean == pytest.approx(0.055) and gelu.high - gelu.mean == pytest.approx(half)
    reached = next(r for r in report.rows if r.variant == "norm=post,ffn=relu")
    # seed 0 (0.4) misses the 0.5 target: censored at its last step (100, 10 s), so the mean is a lower bound
    assert reached.reached == 3 and reached.seed_steps == [(100, False), (100, True), (100, True), (100, True)]
    assert reached.steps_to_target == 100 and reached.seconds_to_target == pytest.approx(np.mean([10.0, 11, 12, 13]))
    line = next(line for line in report.table_text.splitlines() if "norm=post,ffn=relu" in line)
    assert "≥100" in line and "≥11.5" in line and "3 of 4" in line and ">100, 100, 100, 100" in line


def test_diverged_runs_are_counted_not_averaged(tmp_path):
    bad = "norm=post,ffn=relu,seed=2"
    sweep = write_sweep(tmp_path, known, {bad: "diverged"})
    report = compare(sweep.directory(), wandb_mode="disabled")
    row = next(r for r in report.rows if r.variant == "norm=post,ffn=relu")
    assert row.diverged == 1 and row.metric.n == 3
    assert row.metric.mean == pytest.approx(np.mean([known("post", "relu", s) for s in (0, 1, 3)]))
    assert report.effects[0].differences[0][1].n == 7, "the pair with a diverged run drops out"


@pytest.mark.slow
def test_report_plots_and_wandb_compare_run(tmp_path):
    sweep = write_sweep(tmp_path, known)
    report = compare(sweep.directory())
    text = report.markdown.read_text()
    assert "| 1 | norm=pre,ffn=gelu |" in text and "| pre − post | 0.2 |" in text
    assert [p.name for p in report.plots] == ["curves.png", "effect_norm.png", "effect_ffn.png"]
    for plot in report.plots:
        assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"]({plot.name})" in text
    info, records = offline_run(sweep.directory())
    meta = next(r["run"] for r in records if r["type"] == "run")
    assert (meta["run_group"], meta["job_type"], info["name"]) == ("known", "compare", "known-compare")
    table = info["summary"]["comparison"]
    assert table["_type"] == "table-file" and table["nrows"] == 4
    effects, curves = info["summary"]["effects"], info["summary"]["curves"]
    assert effects["nrows"] == 7, "per axis: two values and one paired difference; and norm x ffn"
    assert curves["nrows"] == 8, "four variants, evaluated at steps 50 and 100"
    written = json.loads((Path(report.wandb_run) / "files" / effects["path"]).read_text())
    difference = next(row for row in written["data"] if row[2] == "difference from post")
    assert difference[:2] == ["norm", "pre"] and difference[3:7] == pytest.approx([0.2, 0.2, 0.2, 8])
    # a constant difference over 8 pairs: the exact test's smallest p, 2 / 2^8, never 0; gelu's 8 differences
    # are all positive too; norm x ffn's 4 pairs (smallest p 0.125) cannot reach a share of the level and
    # leave the family first, so Holm doubles the smaller of two
    assert difference[7] == 2 / 2**8 and difference[8] == 2 * 2 / 2**8
    assert info["summary"]["noise"]["nrows"] == 1
    again = compare(sweep.directory())
    wandb_dir = Path(report.wandb_run).parent
    assert Path(again.wandb_run).name.split("-")[3] == Path(report.wandb_run).name.split("-")[3], "one run id"
    assert [p.name for p in wandb_dir.glob("offline-run-*")] == [Path(again.wandb_run).name], \
        "comparing again updates the one W&B run (its id), and the stale offline copy goes"
    assert offline_run(sweep.directory())[0]["name"] == "known-compare"
    assert {k for k in info["summary"] if k.startswith("plots/")} == {"plots/curves", "plots/effect_norm",
                                                                    "plots/effect_ffn"}
    history = [r["history"]["item"] for r in records if r["type"] == "history"]
    logged = {key.split(".")[0] for row in history for key in row if not key.startswith("_")}
    assert logged == {"plots/curves", "plots/effect_norm", "plots/effect_ffn"}, \
        f"the plots are logged once, as images a viewer's media pane shows, and nothing else is: {sorted(logged)[:4]}"
    assert all(row.get(f"{key}._type") == "image-file" for row in history for key in logged if f"{key}._type" in row)
    summary = info["summary"]
    assert summary["effect/norm=pre-vs-post/difference"] == pytest.approx(0.2)
    assert summary["effect/norm=pre-vs-post/holm_p"] == pytest.approx(2 * 2 / 2**8), "the key numbers, as scalars"


def test_compare_names_what_is_missing(tmp_path):
    with pytest.raises(zoo.ConfigError, match=r"no sweep\.yaml"):
        compare(tmp_path)


def test_another_metric_gets_files_of_its_own(tmp_path):
    sweep = write_sweep(tmp_path, known)
    report = compare(sweep.directory(), wandb_mode="disabled", metric="eval/loss")
    assert report.markdown.name == "report-eval_loss.md" and report.plots[0].name == "curves-eval_loss.png"
    assert [row.variant for row in report.rows] == [
        "norm=pre,ffn=gelu", "norm=pre,ffn=relu", "norm=post,ffn=gelu", "norm=post,ffn=relu"], "a loss: lowest first"
    assert report.rows[0].metric.mean == pytest.approx(1 - np.mean([known("pre", "gelu", s) for s in range(4)]))
    assert "steps to" not in report.table_text, "the target belongs to the sweep's own metric"


def test_a_loss_ranks_lowest_first_and_ties_go_to_the_faster_variant(tmp_path):
    sweep = write_sweep(tmp_path, lambda norm, ffn, seed: 0.9)
    ledger = Ledger(sweep.directory() / "ledger.jsonl")
    for record in ledger.latest().values():  # the same exact match everywhere; gelu got there sooner
        a = record["assignment"]
        seconds = 20.0 if a["model.ffn"] == "gelu" else 30.0
        record.update(metrics={"eval/loss": 0.2 if a["model.norm"] == "pre" else 0.1, "eval/exact_match": 0.9},
                      history=[{"train/step": 100, "train/wall_s": seconds, "eval/exact_match": 0.9}])
        ledger.append(record)
    rows = compare(sweep.directory(), wandb_mode="disabled").rows
    assert [r.variant.endswith("gelu") for r in rows] == [True, True, False, False]
    by_loss = compare(sweep.directory(), wandb_mode="disabled", metric="eval/loss").rows
    assert [r.variant.startswith("norm=post") for r in by_loss] == [True, True, False, False]


def test_cli_prints_the_table_and_where_the_report_is(tmp_path, capsys):
    from zoo.cli import main

    sweep = write_sweep(tmp_path, known)
    main(["compare", str(sweep.directory()), "--wandb-mode", "disabled"])
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "zoo compare: 16 of 16 cells finished"
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("rank "))
    assert lines[header + 1].split()[:2] == ["1", "norm=pre,ffn=gelu"]
    assert "Left the family before Holm (Tarone 1990)" in out and "(4 pairs: smallest p 0.125)" in out, "the interaction's"
    assert f"report: {sweep.directory() / 'report.md'}" in out and "effect_ffn.png" in out
    effects = {" ".join(line.split()[:4]): line.split()[4:] for line in out.splitlines() if "−" in line}
    assert effects["norm pre − post"][:4] == ["0.2", "[0.2,", "0.2]", "8"], "pre adds exactly 0.2 in each of 8 pairs"
    assert any(line.startswith("Seed-to-seed noise: standard deviation") for line in out.splitlines())
    assert effects["ffn gelu − relu"][0] == "0.055" and effects["ffn gelu − relu"][3] == "8"


def band_polygons(fig) -> dict[str, tuple[list, list, list]]:
    """(steps, lows, highs) of every filled band, keyed by its panel's title and the label of the
    line drawn in the band's colour."""
    from matplotlib.colors import to_rgba

    out = {}
    for ax in fig.axes:
        lines = [line for line in ax.get_lines() if not line.get_label().startswith("_")]
        for band in ax.collections:
            edge = band.get_paths()[0].vertices
            line = next(line for line in lines if np.allclose(to_rgba(line.get_color())[:3], band.get_facecolor()[0][:3]))
            steps = sorted({float(x) for x in edge[:, 0]})
            out[f"{ax.get_title()}|{line.get_label()}"] = (
                steps, [float(edge[edge[:, 0] == x][:, 1].min()) for x in steps],
                [float(edge[edge[:, 0] == x][:, 1].max()) for x in steps])
    return out


@pytest.mark.parametrize("seeds", [[0, 1, 2, 3], [0, 1]])
def test_plotted_bands_are_the_computed_intervals(tmp_path, seeds):
    """4 seeds: the 95% t-interval at each step, held inside exact match's [0, 1]; 2 seeds: the
    lowest and highest value."""
    from zoo.compare.sections.ranking import curve_figure
    from zoo.compare.stats import variant_rows

    def history(a, seed, final):
        return [{"train/step": step, "train/wall_s": float(step), "eval/exact_match": final * step / 300 + 0.02 * seed}
                for step in (100, 200, 300)]
    sweep = sweepkit.write_sweep(tmp_path, "bands", {"model.norm": ["post", "pre"], "model.ffn": ["relu", "gelu"]},
                                 seeds, lambda a, seed: known(a["model.norm"], a["model.ffn"], seed), history=history)
    rows = variant_rows(Comparison.of(sweep), [r for r in Ledger(sweep.directory() / "ledger.jsonl").read().latest().values()
                                if r.status == "finished"])
    fig = curve_figure(Comparison.of(sweep), rows)
    drawn = band_polygons(fig)
    assert len(drawn) == 4 and len(fig.axes) == 1, "4 variants fit one panel"
    for row in rows:
        steps, lows, highs = drawn[f"bands|{row.variant}"]
        assert steps == [100, 200, 300]
        for step, low, high in zip(steps, lows, highs):
            values = [known(row.assignment["model.norm"], row.assignment["model.ffn"], s) * step / 300 + 0.02 * s
                      for s in seeds]
            expected = Estimate.of(values).within(0, 1) if len(seeds) >= 3 else Estimate(0, 0, 2, min(values), max(values))
            assert (low, high) == pytest.approx((expected.low, expected.high))


def test_sixteen_variants_get_four_panels_of_four(tmp_path):
    from zoo.compare.sections.ranking import curve_figure
    from zoo.compare.stats import variant_rows

    grid = {"model.norm": ["post", "pre"], "model.position": ["sinusoidal", "learned"],
            "model.attention": ["per_head", "fused"], "model.ffn": ["relu", "gelu"]}
    distinct = lambda a, seed: 0.4 + 0.1 * (a["model.attention"] == "fused") + 0.05 * (a["model.ffn"] == "gelu")
    sweep = sweepkit.write_sweep(tmp_path, "sixteen", grid, [0], distinct)
    rows = variant_rows(Comparison.of(sweep), list(Ledger(sweep.directory() / "ledger.jsonl").read().latest().values()))
    fig = curve_figure(Comparison.of(sweep), rows)
    titles = [ax.get_title() for ax in fig.axes if ax.get_visible()]
    assert titles == ["norm=post, position=sinusoidal", "norm=post, position=learned",
                      "norm=pre, position=sinusoidal", "norm=pre, position=learned"]
    labels = [sorted(line.get_label() for line in ax.get_lines() if not line.get_label().startswith("_"))
              for ax in fig.axes if ax.get_visible()]
    assert labels == [sorted(f"attention={a},ffn={f}" for a in ("per_head", "fused") for f in ("relu", "gelu"))] * 4
    colours = [{line.get_label(): line.get_color() for line in ax.get_lines() if not line.get_label().startswith("_")}
               for ax in fig.axes if ax.get_visible()]
    assert all(panel == colours[0] for panel in colours), "a variant keeps its colour in every panel"
    assert len(set(colours[0].values())) == 4


def test_a_variant_has_one_colour_in_every_plot_of_its_sweep(tmp_path):
    """The curves, the loss-against-rate plot and the transfer scatter colour a variant by its
    place in the grid; each plot used to colour by its own order (by rank, by the rows it had)."""
    from matplotlib.colors import to_hex

    from zoo.compare.plots import variant_colour
    from zoo.compare.sections.lr_sensitivity import rate_figure
    from zoo.compare.sections.ranking import curve_figure
    from zoo.compare.sensitivity import RateCurve
    from zoo.compare.stats import Band, variant_rows

    sweep = sweepkit.write_sweep(tmp_path, "colours", {"model.norm": ["post", "pre"], "model.ffn": ["relu", "gelu"]},
                                 [0, 1, 2], lambda a, seed: known(a["model.norm"], a["model.ffn"], seed))
    rows = variant_rows(Comparison.of(sweep), list(Ledger(sweep.directory() / "ledger.jsonl").read().latest().values()))
    expected = {row.variant: to_hex(variant_colour(sweep, row.assignment)) for row in rows}
    assert len(set(expected.values())) == 4
    drawn = {line.get_label(): to_hex(line.get_color()) for line in curve_figure(Comparison.of(sweep), rows).axes[0].get_lines()
             if not line.get_label().startswith("_")}
    assert drawn == expected
    ranked = sorted(rows, key=lambda row: -row.metric.mean)  # a ranking's order is not the grid's
    curves = [RateCurve(row.variant, [1e-3, 1e-2], [Band.of(0, [1.0, 1.1]), Band.of(0, [0.9, 1.0])], [0, 0])
              for row in ranked]
    rate = rate_figure(sweep, "lr", curves, {row.variant: row.assignment for row in rows})
    lines = {line.get_label(): to_hex(line.get_color()) for line in rate.axes[0].get_lines() if line.get_label() in expected}
    assert lines == expected


@pytest.mark.parametrize("metric, title", [
    ("eval_auc/token_acc", "auc: eval/token_acc during training;"),
    ("test/token_acc", "final: eval/token_acc during training (test/token_acc is scored once, at the end);")])
def test_a_metric_without_a_curve_of_its_own_draws_and_targets_its_evaluations(tmp_path, metric, title):
    """Ranked by the curve's mean or by a split scored once at the end: the curve and the steps to
    the target come from the validation evaluations, eval/token_acc, and the plot says so."""
    from zoo.compare.sections.ranking import curve_figure

    def history(a, seed, final):
        fast = a["model.norm"] == "pre"
        return [{"train/step": step, "train/wall_s": step / 10, "eval/token_acc": min(1.0, step / (200 if fast else 400))}
                for step in (100, 200, 300, 400)]
    name = title.split(":")[0]
    sweep = sweepkit.write_sweep(tmp_path, name, {"model.norm": ["post", "pre"], "model.ffn": ["relu", "gelu"]}, [0, 1],
                                 lambda a, seed: 0.9 if a["model.norm"] == "pre" else 0.6, metric=metric,
                                 target=0.99, history=history)
    rows = compare(sweep.directory(), wandb_mode="disabled").rows
    by_norm = {row.assignment["model.norm"]: row for row in rows}
    assert by_norm["pre"].steps_to_target == 200 and by_norm["post"].steps_to_target == 400
    assert [b.mean for b in by_norm["post"].curve] == [0.25, 0.5, 0.75, 1.0]
    assert curve_figure(Comparison.of(sweep), rows).get_suptitle().startswith(title)
    assert {ax.get_yscale() for ax in curve_figure(Comparison.of(sweep), rows).axes} == {"linear"}, "an accuracy's axis is linear"
    loss = sweep.model_copy(update={"metric": "eval/loss", "goal": "min", "target": None})
    assert {ax.get_yscale() for ax in curve_figure(loss, rows).axes if ax.get_visible()} == {"log"}, "a loss's is log"


@pytest.mark.slow
def test_the_console_shows_the_comparison_not_the_wandb_banner(tmp_path):
    """W&B's seven lines of banner used to come before the table; the W&B run is one line after it."""
    sweep = sweepkit.write_sweep(tmp_path, "quiet", {"model.norm": ["post", "pre"]}, [0, 1],
                                 lambda a, seed: 0.5 + 0.1 * (a["model.norm"] == "pre") + 0.01 * seed)
    done = subprocess.run([sys.executable, "-m", "zoo.cli", "compare", str(sweep.directory())], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "WANDB_MODE": "offline"})
    assert done.returncode == 0, done.stderr
    output = done.stdout + done.stderr
    assert not [line for line in output.splitlines() if line.startswith("wandb:")], output
    said = [line for line in done.stdout.splitlines() if not line.startswith("zoo compare:")]  # progress, notes
    assert said[0] == "findings on eval/exact_match:", "the findings come first"
    assert said[1].startswith("  norm: pre − post: 0.1 "), said[:3]
    assert next(line for line in said if not line.startswith("  ") and line != said[0]).startswith("rank  variant"), \
        "then the table"
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("W&B:")]
    run_dir = Path(line.split()[1])
    assert run_dir.is_dir() and list(run_dir.glob("run-*.wandb")), "the W&B run it names was written"


def test_intervals_of_a_bounded_metric_stay_inside_its_range_and_the_report_says_so(tmp_path):
    """Two seeds at 0.2 and 0.9 give a t-interval of [-3.9, 5.0] for an exact match; the mean and
    the test stand, the interval is held inside [0, 1] (a difference inside [-1, 1])."""
    sweep = sweepkit.write_sweep(tmp_path, "bounded", {"model.norm": ["post", "pre"]}, [0, 1],
                                 lambda a, seed: [0.2, 0.9][seed] if a["model.norm"] == "post" else [0.9, 0.2][seed])
    report = compare(sweep.directory(), wandb_mode="disabled", echo=lambda _: None)
    for row in report.rows:
        assert row.metric.mean == pytest.approx(0.55) and (row.metric.low, row.metric.high) == (0.0, 1.0)
    (_, difference), = report.effects[0].differences
    assert difference.mean == 0 and (difference.low, difference.high) == (-1.0, 1.0)
    assert report.effects[0].tests[0][0] == pytest.approx(1.0), "the p-value is the t-test's, untouched"
    assert "intervals are 95% t-intervals, held inside what `eval/exact_match` can be: [0, 1], and a difference " \
           "inside [-1, 1]" in report.markdown.read_text()
    said = report.markdown.read_text()  # a difference's interval says it is not the verdict's, which is Holm's
    assert "a difference's is unadjusted for its family, so it may exclude 0 where the verdict (Holm p) is not " \
           "separated" in said and "| difference (paired) or interaction | mean | 95% CI (unadjusted) | pairs |" in said
    unbounded = compare(sweep.directory(), wandb_mode="disabled", metric="eval/loss", echo=lambda _: None)
    loss = unbounded.rows[0].metric  # 1 - the exact match: 0.8 and 0.1
    assert loss.low == 0.0 and loss.high > 4, "a loss is held at 0 or more, and nothing above"


def test_report_holds_the_recipe_the_code_and_the_loss_curves(tmp_path):
    """report.md alone tells how the runs were made (every default of the base experiment, the
    commit and device its records name) and shows the held-out loss beside the compared metric."""
    def history(a, seed, final):
        return [{"train/step": step, "train/wall_s": step / 10, "eval/exact_match": final * step / 200,
                 "eval/loss": 2.0 - step / 200} for step in (100, 200)]

    sweep = sweepkit.write_sweep(tmp_path, "recipe", {"model.norm": ["post", "pre"]}, [0, 1],
                                 lambda a, seed: 0.5 + 0.1 * (a["model.norm"] == "pre"), history=history)
    ledger = Ledger(sweep.directory() / "ledger.jsonl")
    for line in ledger.latest().values():
        ledger.append({**line, "environment": {"zoo_commit": "abc123", "torch_version": "9.9", "device": "cpu"}})
    report = compare(sweep.directory(), wandb_mode="disabled", echo=lambda _: None)
    text = report.markdown.read_text()
    recipe = text.split("## Recipe")[1].split("## Plots")[0]
    shown = yaml.safe_load(recipe.split("```yaml")[1].split("```")[0])
    assert shown == zoo.ExperimentSpec.model_validate({"wandb": {"mode": "offline", "project": "zoo"}}).model_dump(
        mode="json"), "every default written out"
    assert "Recorded with zoo commit abc123; torch 9.9; device cpu." in recipe
    loss = sweep.directory() / "loss_curves.png"
    assert loss in report.plots and loss.read_bytes().startswith(b"\x89PNG") and "![loss_curves](loss_curves.png)" in text
    assert "each run's final value" in text
    auc = compare(sweep.directory(), wandb_mode="disabled", metric="eval/loss", echo=lambda _: None)
    assert not any(p.name.startswith("loss_curves") for p in auc.plots), "the compared metric's own curve is the loss"


def test_two_seeds_warn_in_the_console_and_the_report_and_three_do_not(tmp_path):
    """t with one degree of freedom: 12.7 standard errors either side, said where it happens."""
    def value(a, seed):
        return 0.5 + 0.1 * seed + 0.2 * (a["model.norm"] == "pre")

    for seeds, warned in (([0, 1], True), ([0, 1, 2], False)):
        sweep = sweepkit.write_sweep(tmp_path / str(len(seeds)), "seeds", {"model.norm": ["post", "pre"]}, seeds, value)
        said = []
        report = compare(sweep.directory(), wandb_mode="disabled", echo=said.append)
        warning = ("2 of 2 variants have 2 finished seeds: their 95% intervals are the mean ± 12.7 standard errors "
                   "(t with 1 degree of freedom)")
        assert any(warning in line and line.startswith("zoo compare: warning:") for line in said) == warned
        assert (warning in report.markdown.read_text()) == warned


@pytest.mark.slow
def test_another_metric_than_the_sweeps_is_secondary_everywhere(tmp_path):
    """The sweep's metric is its primary endpoint; --metric eval/loss is exploratory, and the console,
    report.md, every plot's file and the W&B run say so; the primary report says which it is."""
    sweep = write_sweep(tmp_path, known)
    primary = compare(sweep.directory(), wandb_mode="disabled", echo=lambda _: None)
    assert "Primary endpoint: `eval/exact_match`." in primary.markdown.read_text()
    said = []
    report = compare(sweep.directory(), metric="eval/loss", echo=said.append)
    note = "secondary (exploratory): eval/loss; the primary endpoint is eval/exact_match"
    assert f"zoo compare: {note}: these p-values make no verdict of the sweep's primary family" in said
    assert report.markdown.name == "report-eval_loss.md" and f"**S{note[1:]}**: exploratory" in report.markdown.read_text()
    assert all(p.stem.endswith("-eval_loss") for p in report.plots)
    info, _ = offline_run(sweep.directory())
    assert info["config"]["endpoint"] == "secondary"


def test_the_loss_against_the_rate_has_a_panel_per_size_and_a_colour_and_marker_per_variant(tmp_path):
    """Twelve variants shared matplotlib's ten colours in one panel: now each size is a panel, and
    within it each variant has a colour and a marker of its own, named without the size."""
    from zoo.compare.sections.lr_sensitivity import rate_figure
    from zoo.compare.sensitivity import RateCurve
    from zoo.compare.stats import Band

    grid = {"model.d_model": [32, 64], "model.norm": ["post", "pre"], "model.ffn": ["relu", "gelu", "swiglu"]}
    sweep = sweepkit.write_sweep(tmp_path, "panels", grid, [0, 1], lambda a, seed: 0.5)
    assignments = {f"d_model={d},norm={n},ffn={f}": {"model.d_model": d, "model.norm": n, "model.ffn": f}
                   for d in grid["model.d_model"] for n in grid["model.norm"] for f in grid["model.ffn"]}
    curves = [RateCurve(variant, [1e-3, 1e-2], [Band.of(0, [1.0, 1.1]), Band.of(0, [0.9, 1.0])], [0, 0])
              for variant in assignments]
    figure = rate_figure(Comparison.of(sweep), "lr", curves, assignments)
    assert [ax.get_title() for ax in figure.axes[:2]] == ["d_model=32", "d_model=64"]
    for ax in figure.axes[:2]:
        drawn = [(line.get_label(), line.get_color(), line.get_marker()) for line in ax.get_lines()
                 if not line.get_label().startswith("_")]
        assert [label for label, _, _ in drawn] == [f"norm={n},ffn={f}" for n in grid["model.norm"] for f in grid["model.ffn"]]
        assert len({colour for _, colour, _ in drawn}) == 6 and len({marker for _, _, marker in drawn}) == 6
