"""What the trainer wrote to W&B, read back from the offline run with W&B's own reader."""

import hashlib
import json

import pytest

import zoo
from trainkit import offline_run, tiny_experiment
from zoo.specs.switches import flat_fields


@pytest.mark.slow
def test_offline_run_holds_spec_tags_metrics_and_the_attention_picture(tmp_path):
    experiment = tiny_experiment(tmp_path, model={"norm": "pre", "ffn": "gelu"}, train={"steps": 40, "eval_every": 20},
                                 wandb={"mode": "offline", "group": "ablation-1", "tags": ["mine"]})
    result = zoo.train(experiment)
    model, spec = zoo.load(result.checkpoint)
    info, records = offline_run(tmp_path)

    assert info["state"] == "finished" and info["exit_code"] == 0
    assert info["name"] == result.run_dir.name and info["name"].startswith("pre.sinusoidal.fused.gelu-seed0-")
    assert info["project"] == "zoo"
    config = info["config"]
    assert config["model"] == {key: value for key, value in flat_fields(spec.model_dump()).items() if value != {}}, \
        "the full, resolved ModelSpec, switches by flat key (W&B holds no empty mapping: no rules, no layers)"
    assert config["model"]["window"] is None and zoo.ModelSpec.model_validate(config["model"]) == spec
    assert config["task"]["name"] == "reverse" and config["train"]["steps"] == 40
    assert info["tags"] == ["mine", *(f"{axis}={value}" for axis, value in spec.axes().items())]
    run = next(r["run"] for r in records if r["type"] == "run")
    assert run["run_group"] == "ablation-1" and run["job_type"] == "train"

    step_of = {m["metric"].get("glob_name"): m["metric"].get("step_metric") for m in records if m["type"] == "metric"}
    assert step_of["*"] == "train/step"
    rows = [r["history"]["item"] for r in records if r["type"] == "history"]
    evals = [(row["train/step"], row["eval/loss"]) for row in rows if "eval/loss" in row]
    assert evals == [(row["train/step"], row["eval/loss"]) for row in result.history if "eval/loss" in row]
    assert [row["train/step"] for row in rows if "train/loss" in row] == [20, 40]
    assert len(evals) == 2 and result.metrics["eval_auc/loss"] == pytest.approx((evals[0][1] + evals[1][1]) / 2)

    summary = info["summary"]
    assert summary["parameters"] == model.num_parameters() and summary["steps"] == 40
    for name, value in result.metrics.items():
        assert summary[name] == pytest.approx(value)
    for name, value in result.best.items():
        assert summary[f"best/{name}"] == pytest.approx(value) and name in result.metrics
    image = summary["eval/cross_attention"]
    assert image["_type"] == "image-file" and " -> " in image["caption"]
    assert image["sha256"] == hashlib.sha256(result.attention_png.read_bytes()).hexdigest()


def test_a_diverging_run_is_marked_failed(tmp_path):
    experiment = tiny_experiment(tmp_path, train={"optimizer": {"lr": 1e30}, "warmup_steps": 0, "grad_clip": None},
                                 wandb={"mode": "offline"})
    with pytest.raises(zoo.Diverged):
        zoo.train(experiment)
    info, _ = offline_run(tmp_path)
    assert info["state"] == "failed" and info["exit_code"] == 1
    assert info["summary"]["diverged"] is True and info["summary"]["diverged_at"] >= 1


@pytest.mark.parametrize("spec_mode, env_mode, writes", [
    ("offline", None, True), ("disabled", None, False), ("offline", "disabled", False), ("disabled", "offline", True),
])
def test_wandb_mode_env_wins_and_disabled_writes_nothing(tmp_path, monkeypatch, spec_mode, env_mode, writes):
    if env_mode is None:
        monkeypatch.delenv("WANDB_MODE", raising=False)
    else:
        monkeypatch.setenv("WANDB_MODE", env_mode)
    result = zoo.train(tiny_experiment(tmp_path, train={"steps": 5}, wandb={"mode": spec_mode}))
    assert (result.wandb_dir is not None) == writes
    assert (tmp_path / "wandb").exists() == writes
    if writes:
        assert offline_run(tmp_path)[0]["state"] == "finished"


def test_a_wandb_failure_is_a_warning_not_a_lost_run(tmp_path, monkeypatch):
    # Online mode with no account configured: wandb.init refuses at once, without the network.
    monkeypatch.setenv("WANDB_MODE", "online")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "home" / ".config" / "wandb"))
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    with pytest.warns(RuntimeWarning, match="W&B init failed, training goes on without W&B"):
        result = zoo.train(tiny_experiment(tmp_path, train={"steps": 20, "eval_every": 20}))
    assert result.checkpoint.exists() and result.metrics["eval/loss"] > 0 and result.wandb_dir is None


@pytest.mark.slow
def test_the_result_and_the_ledger_name_the_wandb_run_that_holds_the_curves(tmp_path):
    """Matching a run to its W&B run used to mean opening each; result.json, the sweep's ledger and
    report.md now carry its id and folder, checked against what W&B itself wrote."""
    from test_sweep import tiny_sweep

    from trainkit import read_run
    from zoo.compare import compare
    from zoo.sweep import Ledger, run_sweep

    sweep, base = tiny_sweep(tmp_path, {"model.norm": ["post", "pre"]})
    run_sweep(sweep, base, echo=lambda _: None)
    report = compare(tmp_path / "tiny", wandb_mode="disabled", echo=lambda _: None).markdown.read_text()
    for cell, line in Ledger(tmp_path / "tiny" / "ledger.jsonl").latest().items():
        info, _ = read_run(line["wandb_dir"])
        assert info["run_id"] == line["wandb_run"] and info["name"] == cell
        result = json.loads((tmp_path / "tiny" / "runs" / cell / "result.json").read_text())
        assert (result["wandb_run"], result["wandb_dir"]) == (line["wandb_run"], line["wandb_dir"])
        assert f"`{line['wandb_run']}` ({line['wandb_dir']})" in report
