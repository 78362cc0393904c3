"""What a new user meets in the first hour: small defaults (build-all, decoding length), a resume
of a finished run that does nothing, errors that say the way out, and plots that tell coinciding
curves apart."""

import pytest
import torch
import yaml
from conftest import combos, padded_batch, tiny
from sweepkit import write_sweep
from test_sweep import tiny_sweep

import zoo
from trainkit import tiny_experiment
from zoo.cli import main
from zoo.commands.catalog import BUILD_ALL_SIZE, part_combinations
from zoo.compare import compare
from zoo.compare.comparison import Comparison
from zoo.compare.sections.ranking import curve_figure
from zoo.sweep import run_sweep


@pytest.mark.slow
def test_build_all_checks_every_combination_at_a_small_size_by_default(capsys):
    """By default every combination (the list build-all walks); built and run here for the
    combinations of one norm placement, since all of them take two minutes of CI (the pairwise
    grid of tests/conftest.py meets every pair of parts in every invariant)."""
    assert {".".join(combo).removesuffix(".layernorm") for combo in part_combinations()} == set(combos())
    main(["build-all", "--only", "pre.*"])
    lines = capsys.readouterr().out.splitlines()
    some = [name for name in combos() if name.startswith("pre.")]
    assert lines[0].startswith(f"{len(some)} combinations") and "d_model 32" in lines[0]
    built = {line.split()[0]: int(line.split()[1].replace(",", "")) for line in lines[1:-1]}
    assert set(built) == set(some)
    name = "pre.rope.sdpa.swiglu.rmsnorm"
    assert built[name] == zoo.build(zoo.spec("vaswani2017", **BUILD_ALL_SIZE, **dict(zip(zoo.AXES, name.split("."))))
                                    ).num_parameters()


def test_generate_without_a_length_decodes_what_fits_the_input():
    model = zoo.build(tiny("pre.sinusoidal.fused.relu", max_len=512), seed=0).eval()
    src = padded_batch([5, 3], 19)
    out = model.generate(src)
    assert out.size(1) <= 1 + 2 * src.size(1) + 10
    assert torch.equal(out, model.generate(src, max_new_tokens=2 * src.size(1) + 10))


def test_zoo_show_without_a_vocabulary_shows_a_placeholder_and_says_so(capsys):
    from zoo.cli import main
    from zoo.model.size_checks import exact_parameters

    main(["show", "pre-ln"])
    out = capsys.readouterr().out
    assert "# vocabulary: none given, so a placeholder of 32,000 tokens on each side" in out
    assert f"# parameters: {exact_parameters(zoo.spec('pre-ln', vocab_size=32000), buffers=False):,d}" in out


def test_resume_of_a_finished_run_does_nothing_and_says_so(tmp_path, capsys):
    experiment = tiny_experiment(tmp_path, train={"steps": 20}, wandb={"mode": "offline"})
    result = zoo.train(experiment)
    stamp = result.checkpoint.stat().st_mtime_ns
    runs = sorted((tmp_path / "wandb").glob("offline-run-*"))
    file = tmp_path / "e.yaml"
    file.write_text(yaml.safe_dump(experiment))
    main(["train", str(file), "--resume"])
    out = capsys.readouterr().out
    assert f"{result.run_dir} finished all 20 steps already: nothing to train" in out
    assert "final eval/loss=" in out
    assert result.checkpoint.stat().st_mtime_ns == stamp and sorted((tmp_path / "wandb").glob("offline-run-*")) == runs
    again = zoo.train(experiment, resume=True)
    assert again.already_finished and again.metrics == result.metrics and again.history == result.history
    longer = zoo.train(tiny_experiment(tmp_path, train={"steps": 30}, wandb={"mode": "offline"}), resume=True)
    assert not longer.already_finished and longer.history[-1]["train/step"] == 30, "more steps resume as before"


@pytest.mark.slow
def test_a_sweep_refused_for_another_base_names_the_way_out(tmp_path):
    sweep, base = tiny_sweep(tmp_path, {"model.norm": ["post"]})
    base["wandb"]["mode"] = "disabled"
    run_sweep(sweep, base, echo=lambda _: None)
    longer = {**base, "train": {**base["train"], "steps": 30}}
    with pytest.raises(zoo.ConfigError, match=r"another name or out_dir \(--set name=NEW or out_dir=DIR\)"):
        run_sweep(sweep, longer, echo=lambda _: None)
    renamed = sweep.model_copy(update={"name": "tiny-30"})
    assert run_sweep(renamed, longer, echo=lambda _: None) == {"norm=post,seed=0": "finished"}
    grown = sweep.model_copy(update={"seeds": [0, 1]})
    assert run_sweep(grown, base, echo=lambda _: None)["norm=post,seed=1"] == "finished"


def test_coinciding_curves_are_one_line_named_as_such_and_every_panel_has_numbers(tmp_path):
    grid = {"model.norm": ["post", "pre"], "model.position": ["sinusoidal", "learned"],
            "model.attention": ["per_head", "fused"], "model.ffn": ["relu", "gelu"]}

    def value(a, seed):  # attention changes nothing, as fused and per_head compute the same function
        return 0.5 + 0.1 * (a["model.norm"] == "pre") + 0.05 * (a["model.ffn"] == "gelu") + 0.01 * seed

    sweep = write_sweep(tmp_path, "axes", grid, [0, 1], value)
    report = compare(sweep.directory(), wandb_mode="disabled", echo=lambda _: None)
    fig = curve_figure(Comparison.of(sweep), report.rows)
    panels = [ax for ax in fig.axes if ax.get_visible() and ax.lines]
    assert len(panels) == 4
    for ax in panels:
        labels = sorted(line.get_label() for line in ax.lines)
        assert labels == [f"attention=per_head,ffn={f} = attention=fused,ffn={f} (the same curve)"
                          for f in ("gelu", "relu")], "one line per distinct curve, naming every variant it stands for"
        assert len(ax.collections) == len(ax.lines) == 2, "one band per distinct curve, no blended twin"
        assert all(label.get_visible() for label in ax.get_xticklabels() + ax.get_yticklabels())
        assert ax.xaxis.get_tick_params()["labelbottom"] and ax.yaxis.get_tick_params()["labelleft"]
    (legend,) = fig.legends
    assert legend.get_bbox_to_anchor().y0 <= fig.bbox.y0 + 1, "the legend sits below the panels"
    assert fig.get_size_inches()[0] == 2 * 5.5, "no margin beside the panels for a legend"
