"""The shared trainer: learning for every axis value, checkpoints, divergence, the CLI."""

import pytest
import torch
from conftest import PART_IDS, PARTS

import zoo
from trainkit import diverged_run, tiny_experiment
from zoo.cli import main


@pytest.mark.parametrize("axis, value", PARTS, ids=PART_IDS)
def test_a_short_run_lowers_the_loss(axis, value, tmp_path):
    result = zoo.train(tiny_experiment(tmp_path, model={axis: value}))
    losses = [row["train/loss"] for row in result.history if "train/loss" in row]
    assert len(losses) == 6 and losses[-1] < 0.6 * losses[0]
    names = ("loss", "token_acc", "exact_match")
    assert set(result.metrics) == {f"{prefix}/{name}" for prefix in ("eval", "eval_auc") for name in names}
    for name in names:  # the curve metric is the mean over the run's evaluations (steps 60 and 120)
        curve = [row[f"eval/{name}"] for row in result.history if f"eval/{name}" in row]
        assert len(curve) == 2 and result.metrics[f"eval_auc/{name}"] == pytest.approx(sum(curve) / 2)
    assert result.best["eval/loss"] <= result.metrics["eval/loss"]


def test_checkpoint_loads_the_trained_model(tmp_path):
    result = zoo.train(tiny_experiment(tmp_path, model={"norm": "pre"}, task={"name": "copy", "min_len": 3, "max_len": 6}))
    model, spec = zoo.load(result.checkpoint)
    assert spec.name == "pre.sinusoidal.fused.relu" and not model.training
    state = torch.load(result.checkpoint, weights_only=True, map_location="cpu")  # where zoo.load puts the model
    assert state["format"] == 1 and state["progress"]["step"] == 120 and state["task"]["src_vocab"]["tokens"][3] == "a"
    assert zoo.ExperimentSpec.model_validate(state["experiment"]).task["name"] == "copy"
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, state["model"][name])
    assert result.attention_png.exists() and result.attention_png.stat().st_size > 1000
    assert not any(result.run_dir.glob("*.tmp")) and not (tmp_path / "wandb").exists()


def test_text_task_reports_bleu(tmp_path):
    result = zoo.train(tiny_experiment(tmp_path, task={"name": "toy_translation"}, train={"steps": 20, "eval_size": 40}))
    assert 0.0 <= result.metrics["eval/bleu"] <= 100.0


def test_divergence_stops_within_a_step_and_keeps_the_last_good_checkpoint(tmp_path):
    error, failed_step, run_dir, result = diverged_run(tmp_path, r"training diverged at step (\d+)", checkpoint_every=1)
    assert result["status"] == "diverged" and result["diverged_at"] == failed_step
    if (run_dir / "checkpoint.pt").exists():  # the last good checkpoint: finite, from before the failure
        assert "last good checkpoint" in str(error)
        saved = torch.load(run_dir / "checkpoint.pt", weights_only=True)
        assert saved["progress"]["step"] < failed_step
        assert all(torch.isfinite(t).all() for t in saved["model"].values())


def test_cli_trains_and_says_where_the_run_is(tmp_path, capsys):
    main(["train", "--set", f"train.out_dir={tmp_path}", "--set", "train.steps=10", "--set", "train.eval_size=16",
          "--set", "model.d_model=32", "--set", "model.n_heads=2", "--set", "wandb.mode=disabled"])
    out = capsys.readouterr().out
    assert "final eval/loss=" in out and f"checkpoint:        {tmp_path}" in out
    assert "cross_attention.png" in out
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--set", "train.stpes=3"])
    assert exit_info.value.code == 2 and "stpes" in capsys.readouterr().err


def test_fp16_on_cpu_is_refused(tmp_path):
    with pytest.raises(ValueError, match="fp16' needs CUDA"):
        zoo.train(tiny_experiment(tmp_path, train={"precision": "fp16", "device": "cpu"}))


def test_bf16_autocast_runs_on_cpu(tmp_path):
    result = zoo.train(tiny_experiment(tmp_path, train={"precision": "bf16", "steps": 10}))
    assert all(torch.isfinite(torch.tensor(v)) for v in result.metrics.values())


def test_a_run_says_where_and_how_it_trains_and_a_resume_where_it_picked_up(tmp_path, capsys):
    """A new user could not tell how many threads a run used, nor where a resume began: the line
    after the data's says the device, threads, precision and processes, and a resume its step and
    checkpoint."""
    short = {"steps": 20, "checkpoint_every": 20, "eval_every": 20}
    first = zoo.train(tiny_experiment(tmp_path, train=short))
    said = capsys.readouterr().out.splitlines()
    assert said[1] == (f"run {first.run_dir.name}: device cpu, {torch.get_num_threads()} threads, precision fp32 "
                       "(train.precision auto), 1 process")
    zoo.train(tiny_experiment(tmp_path, train={**short, "steps": 40}), resume=True)
    again = capsys.readouterr().out.splitlines()
    assert again[1].endswith(f"; resumed at step 20 of 40 from {first.run_dir / 'checkpoint.pt'}")
