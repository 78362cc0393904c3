"""Early stopping, the best checkpoint and checkpoint averaging, on a run whose validation curve
turns: a decoder that memorizes 60 lines and then loses ground on the held-out ones; and sweeps
that compare on the metrics of the model each run kept."""

import json

import pytest
import sweepkit
import torch

import zoo
from trainkit import run_dir_of, text_task, tiny_experiment, write_corpus
from zoo.cli import main
from zoo.compare import compare
from zoo.specs.experiment import validate_experiment
from zoo.sweep import SweepSpec
from zoo.sweep.loading import check_metric
from zoo.trainer.averaging import averaged_weights
from zoo.trainer.checkpoint import read_checkpoint
from zoo.trainer.console import train_and_report

TURNING = {"steps": 160, "eval_every": 10, "log_every": 10, "checkpoint_every": 10, "batch_size": 16,
           "optimizer": {"lr": 1e-2}}


def turning_run(tmp_path, **train) -> tuple[dict, dict, list[float]]:
    """The experiment, its result.json and the validation losses it logged."""
    experiment = tiny_experiment(tmp_path, model={"kind": "decoder", "d_model": 64, "d_ff": 256, "n_decoder_layers": 2},
                                 task=text_task("lm", write_corpus(tmp_path / "corpus", lines=60)),
                                 train={**TURNING, **train})
    run = zoo.train(experiment)
    result = json.loads((run.run_dir / "result.json").read_text())
    return experiment, result, [row["eval/loss"] for row in run.history if "eval/loss" in row]


def test_early_stopping_the_best_checkpoint_and_the_average_on_a_turning_curve(tmp_path):
    experiment, result, losses = turning_run(tmp_path, early_stop={"metric": "loss", "patience": 3},
                                             keep_best="eval/loss", average_last=3)
    best = min(range(len(losses)), key=losses.__getitem__)
    assert losses[-1] > losses[best] and best >= 2, "the curve turns (otherwise this tests nothing)"
    assert len(losses) == best + 1 + 3, "stopped the third evaluation after the best"
    stopped = 10 * len(losses)
    assert result["stopped_early_at"] == result["steps"] == stopped < TURNING["steps"]

    kept = result["best_checkpoint"]
    assert (kept["step"], kept["metric"], kept["value"]) == (10 * (best + 1), "eval/loss", losses[best])
    assert kept["metrics"]["eval/loss"] == losses[best], "the best checkpoint's weights score as they did then"
    assert {"test/loss", "test/perplexity"} <= kept["metrics"].keys()
    assert result["metrics"]["eval/loss"] == losses[-1], "the run's own metrics stay the last model's"

    run_dir = run_dir_of(experiment)
    snapshots = sorted((run_dir / "averaging").glob("step_*.pt"))
    assert [int(p.stem.split("_")[1]) for p in snapshots] == result["averaged"]["steps"] == [stopped - 20, stopped - 10,
                                                                                             stopped]
    averaged = read_checkpoint(run_dir / "checkpoint_averaged.pt", need=("experiment", "spec", "model", "task"))
    for name, tensor in averaged["model"].items():
        mean = sum(read_checkpoint(p, need=("model",))["model"][name].double() for p in snapshots) / 3
        assert torch.allclose(tensor.double(), mean, atol=1e-6), name
    assert zoo.load(run_dir / "checkpoint_averaged.pt")[1].kind == "decoder"
    assert result["averaged"]["metrics"]["eval/loss"] < losses[-1], "on this curve, the average beats the last"

    (run_dir / "result.json").unlink()  # killed after its last checkpoint, before its result: the resume ends it
    again = zoo.train(experiment, resume=True)
    assert again.metrics == result["metrics"] and again.history[-1]["train/step"] == stopped


def test_an_early_stop_averages_the_checkpoints_there_are_and_zoo_train_says_so(tmp_path, capsys):
    experiment = tiny_experiment(tmp_path, model={"kind": "decoder", "d_model": 64, "d_ff": 256, "n_decoder_layers": 2},
                                 task=text_task("lm", write_corpus(tmp_path / "corpus", lines=60)),
                                 train={**TURNING, "early_stop": {"metric": "loss", "patience": 2},
                                        "keep_best": "eval/loss", "average_last": 15})
    train_and_report(validate_experiment(experiment), resume=False)
    said = capsys.readouterr().out
    result = json.loads((run_dir_of(experiment) / "result.json").read_text())
    stopped, averaged = result["stopped_early_at"], result["averaged"]
    assert stopped < TURNING["steps"] and averaged["asked"] == 15
    assert averaged["steps"] == list(range(10, stopped + 1, 10)), "every checkpoint there was, fewer than asked"
    assert f"only {len(averaged['steps'])} of the 15 train.average_last asked: the run stopped early at step " \
           f"{stopped}" in said
    best = result["best_checkpoint"]
    assert f"best checkpoint:   {best['path']}  (step {best['step']}, eval/loss {best['value']:.4g})" in said
    assert f"averaged:          {averaged['path']}  (steps 10, 20" in said
    assert f"test/loss={averaged['metrics']['test/loss']:.4g}" in said
    train_and_report(validate_experiment(experiment), resume=True)
    again = capsys.readouterr().out
    assert f"stopped early at step {stopped} (train.early_stop) already: nothing to train" in again
    assert said.split("best checkpoint:")[1] in again, "a finished run's kept models, as its first run printed them"


def test_min_delta_counts_only_larger_improvements(tmp_path):
    _, result, losses = turning_run(tmp_path, steps=60, early_stop={"metric": "eval/token_acc", "patience": 2,
                                                                     "min_delta": 0.5})
    assert len(losses) == 3 and result["stopped_early_at"] == 30, "no gain of 0.5 in accuracy: two evaluations after the first"


def test_zoo_average_writes_a_checkpoint_zoo_eval_scores(tmp_path, capsys):
    experiment, result, _ = turning_run(tmp_path, steps=40, average_last=4)
    run_dir = run_dir_of(experiment)
    main(["average", str(run_dir), "--last", "2", "-o", str(tmp_path / "two.pt")])
    assert "averaged 2 checkpoints" in capsys.readouterr().out
    weights, _ = averaged_weights(sorted((run_dir / "averaging").glob("step_*.pt"))[-2:])
    two = read_checkpoint(tmp_path / "two.pt", need=("model",))["model"]
    assert all(torch.equal(two[name], weights[name]) for name in weights)
    assert result["averaged"]["steps"] == [10, 20, 30, 40]
    main(["eval", str(tmp_path / "two.pt"), "--split", "test"])
    assert json.loads(capsys.readouterr().out)["test/perplexity"] > 1

    other = tiny_experiment(tmp_path / "other", train={"steps": 2, "eval_every": 2})
    zoo.train(other)
    with pytest.raises(SystemExit):
        main(["average", str(run_dir / "checkpoint.pt"), str(run_dir_of(other) / "checkpoint.pt"), "-o", "x.pt"])
    assert "another model than" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["average", str(run_dir / "checkpoint.pt"), "-o", "x.pt"])
    assert "averaging needs two checkpoints or more; got 1" in capsys.readouterr().err
    first, second = sorted((run_dir / "averaging").glob("step_*.pt"))[-2:]
    kept = first.read_bytes()
    with pytest.raises(SystemExit):
        main(["average", str(first), str(second), "-o", str(run_dir / "averaging" / ".." / "averaging" / first.name)])
    assert f"is one of the checkpoints averaged ({first})" in capsys.readouterr().err
    assert first.read_bytes() == kept, "the input is left as it was"


def test_selection_names_a_metric_the_task_reports():
    with pytest.raises(zoo.ConfigError, match=r"train.early_stop.metric: the task reports no 'eval/bleu'; choices: "
                                              r"eval/loss, eval/token_acc, eval/exact_match"):
        zoo.specs.experiment.validate_experiment({"train": {"early_stop": {"metric": "bleu"}}})
    with pytest.raises(zoo.ConfigError, match=r"train: unknown field 'metric_for_best_model' \(did you mean 'keep_best'"):
        zoo.specs.experiment.validate_experiment({"train": {"metric_for_best_model": "eval/loss"}})
    with pytest.raises(zoo.ConfigError, match=r"train.average_last: .*greater than or equal to 2"):
        zoo.specs.experiment.validate_experiment({"train": {"average_last": 1}})
    for field in ({"early_stop": {"metric": "train/loss"}}, {"keep_best": "test/loss"}):
        with pytest.raises(zoo.ConfigError, match=r"only the validation split's metrics may be named here, as eval/NAME "
                                                  r"or NAME"):
            zoo.specs.experiment.validate_experiment({"train": field})
    assert zoo.specs.experiment.validate_experiment({"train": {"early_stop": "loss"}}).train.early_stop.metric == \
        "eval/loss", "the metric alone, as a schedule's name alone"
    with pytest.raises(zoo.ConfigError, match=r"train.average_last 5: a run of 100 steps with checkpoint_every 50 "
                                              r"makes 2 checkpoint\(s\), fewer than it averages"):
        zoo.specs.experiment.validate_experiment({"train": {"average_last": 5, "steps": 100, "checkpoint_every": 50}})
    assert zoo.specs.experiment.validate_experiment(
        {"train": {"average_last": 3, "steps": 101, "checkpoint_every": 50}}).train.average_last == 3, "the end's too"


def test_a_sweep_compares_on_the_metrics_of_the_model_each_run_kept(tmp_path):
    base = {"task": {"name": "reverse", "test_size": 32}, "train": {"keep_best": "eval/loss", "average_last": 2}}
    sweep = SweepSpec(name="kept", grid={"model.norm": ["post", "pre"]}, metric="best_checkpoint/test/exact_match")
    check_metric(sweep, base)
    check_metric(sweep.replace(metric="averaged/test/loss"), base)
    with pytest.raises(zoo.ConfigError, match=r"metric 'best_checkpoint/test/exact_match' is not reported .* choices: "
                                              r"eval/loss, .*test/exact_match, eval_auc/loss"):
        check_metric(sweep, {"task": base["task"]})
    tuned = SweepSpec(name="t", grid={"model.norm": ["post", "pre"]}, tune={"train.optimizer.lr": [1e-3, 1e-2]},
                      metric="best_checkpoint/test/loss")
    assert tuned.choose_on == "best_checkpoint/eval/loss", "chosen on the validation split of the same kept model"
    with pytest.raises(zoo.ConfigError, match="a tuned sweep compares its variants on a held-out split"):
        SweepSpec(name="t", grid={"model.norm": ["post", "pre"]}, tune={"train.optimizer.lr": [1e-3, 1e-2]},
                  metric="averaged/eval/loss")

    written = sweepkit.write_sweep(tmp_path, "kept", {"model.norm": ["post", "pre"]}, [0, 1, 2],
                                   lambda a, seed: (0.9 if a["model.norm"] == "post" else 0.5) + 0.01 * seed)
    ledger = written.directory() / "ledger.jsonl"
    lines = [json.loads(line) for line in ledger.read_text().splitlines()]
    for line in lines:  # the kept models rank the other way round from the last ones
        if line["status"] == "finished":
            line["best_checkpoint"] = {"step": 50, "metrics": {"test/exact_match": 1.4 - line["metrics"]["eval/exact_match"]}}
    ledger.write_text("".join(json.dumps(line) + "\n" for line in lines))
    last = compare(written.directory(), wandb_mode="disabled", echo=lambda _: None)
    kept = compare(written.directory(), wandb_mode="disabled", metric="best_checkpoint/test/exact_match",
                   echo=lambda _: None)
    assert [row.variant for row in last.rows] == ["norm=post", "norm=pre"]
    assert [row.variant for row in kept.rows] == ["norm=pre", "norm=post"]
    assert kept.rows[0].metric.mean == pytest.approx(1.4 - 0.51)
