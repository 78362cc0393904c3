"""Checkpoints and folders written by an earlier zoo keep working (fixtures/before_part_settings)."""

import shutil
from pathlib import Path

import pytest
import torch

import zoo
from zoo.errors import RunConflict
from zoo.specs.identity import run_name

FIXTURE = Path(__file__).parent / "fixtures" / "before_part_settings"
RUN = "pre.learned.per_head.gelu-seed0-e19acfd1"


def test_an_old_checkpoint_loads_and_computes_what_it_did():
    model, spec = zoo.load(FIXTURE / "run" / RUN / "checkpoint.pt")
    expected = torch.load(FIXTURE / "expected.pt", weights_only=True)
    assert spec.name == "pre.learned.per_head.gelu"
    with torch.no_grad():
        torch.testing.assert_close(model(expected["src"], expected["tgt"]), expected["logits"], atol=1e-6, rtol=0)
    assert torch.equal(model.generate(expected["src"], max_new_tokens=8), expected["generated"])


def test_an_old_experiment_keeps_its_folder_and_resumes(tmp_path):
    experiment = zoo.load_experiment(FIXTURE / "experiment.yaml", [f"train.out_dir={tmp_path}", "train.steps=6"])
    assert run_name(experiment) == RUN
    shutil.copytree(FIXTURE / "run" / RUN, tmp_path / RUN)
    with pytest.raises(RunConflict):  # the folder is this experiment's: only a resume may go on
        zoo.train(experiment)
    result = zoo.train(experiment, resume=True)
    assert result.run_dir == tmp_path / RUN
    assert result.history[-1]["train/step"] == 6


def test_the_main_jobs_folder_keeps_its_name():
    """The fingerprint leaves out model fields at their defaults, so new axes and fields keep names."""
    assert run_name(zoo.load_experiment(None)) == "post.sinusoidal.fused.relu-seed0-0bf6026f"
    assert run_name(zoo.load_experiment(None, ["model.norm_type=layernorm", "model.n_kv_heads=null"])) == \
        "post.sinusoidal.fused.relu-seed0-0bf6026f"
