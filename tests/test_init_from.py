"""`train.init_from`: a run starts from another run's trained weights or from a model folder
(save_pretrained's, the zoo's or transformers'), held to the experiment's model; its source is
part of the run's identity, and a resume continues from the run's own checkpoint."""

import pytest
import torch

import zoo
from trainkit import tiny_experiment
from zoo.specs.experiment import validate_experiment
from zoo.specs.identity import run_name

STILL = {"steps": 1, "optimizer": {"lr": 1e-30}, "warmup_steps": 0, "eval_every": 1, "checkpoint_every": 1}
"""One step at a learning rate no float32 weight can feel: the run ends on the weights it started from."""


@pytest.fixture
def trained(trained_run):
    return trained_run


def weights(checkpoint):
    return zoo.load(checkpoint)[0].state_dict()


def same(a, b) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_run_starts_from_another_runs_checkpoint(tmp_path, trained):
    result = zoo.train(tiny_experiment(tmp_path, train={**STILL, "init_from": str(trained.checkpoint)}))
    assert same(weights(result.checkpoint), weights(trained.checkpoint))
    assert result.metrics["eval/loss"] == pytest.approx(trained.metrics["eval/loss"], rel=1e-5)
    fresh = zoo.train(tiny_experiment(tmp_path / "fresh", train=STILL))
    assert not same(weights(fresh.checkpoint), weights(trained.checkpoint)), "without it: an initialization"


def test_a_run_starts_from_a_saved_model_folder(tmp_path, trained):
    folder = zoo.load(trained.checkpoint)[0].save_pretrained(tmp_path / "model")
    result = zoo.train(tiny_experiment(tmp_path, train={**STILL, "init_from": folder}))  # the Path it returned
    assert same(weights(result.checkpoint), weights(trained.checkpoint))
    assert validate_experiment({"train": {"init_from": folder}}).train.init_from == str(folder)


def test_another_model_or_a_missing_source_is_refused_naming_what_differs(tmp_path, trained):
    other = tiny_experiment(tmp_path, model={"norm": "pre", "ffn": "gelu"}, train={**STILL, "init_from": str(trained.checkpoint)})
    with pytest.raises(zoo.ConfigError, match=r"its model is not the experiment's \(model\.ffn: 'relu' there, 'gelu' "
                                              r"here; model\.final_norm: False there, True here; model\.norm: 'post' "
                                              r"there, 'pre' here\)"):
        zoo.train(other)
    assert not list(tmp_path.glob("pre.*")), "nothing trained, no folder left"
    with pytest.raises(zoo.ConfigError, match=r"train\.init_from '.*nowhere\.pt': no such file or folder"):
        zoo.train(tiny_experiment(tmp_path, train={**STILL, "init_from": str(tmp_path / "nowhere.pt")}))


def test_the_source_is_part_of_the_runs_identity_and_a_resume_keeps_its_own_weights(tmp_path, trained):
    plain = validate_experiment(tiny_experiment(tmp_path))
    started = validate_experiment(tiny_experiment(tmp_path, train={"init_from": str(trained.checkpoint)}))
    assert run_name(plain) != run_name(started)
    assert run_name(plain) == run_name(validate_experiment(tiny_experiment(tmp_path, train={"init_from": None})))
    def experiment(folder, steps):
        return tiny_experiment(folder, train={"steps": steps, "checkpoint_every": 2, "eval_every": 2,
                                              "init_from": str(trained.checkpoint)})

    zoo.train(experiment(tmp_path / "stopped", 4))
    resumed = zoo.train(experiment(tmp_path / "stopped", 6), resume=True)
    whole = zoo.train(experiment(tmp_path / "whole", 6))
    assert same(weights(resumed.checkpoint), weights(whole.checkpoint)), "the resume went on from its own step 4"


def test_the_same_model_written_out_at_what_its_defaults_stand_for_is_accepted(tmp_path, trained):
    """final_norm, n_kv_heads and head_width at the values their defaults stand for build the same
    model, and the dropout rates are training's: none of them makes the source another model."""
    spec = zoo.load(trained.checkpoint)[1]
    written = {"final_norm": spec.uses_final_norm, "n_kv_heads": spec.kv_heads, "head_width": spec.d_head,
               "dropout": 0.3, "attention_dropout": 0.0, "activation_dropout": 0.2}
    result = zoo.train(tiny_experiment(tmp_path, model=written, train={**STILL, "init_from": str(trained.checkpoint)}))
    assert same(weights(result.checkpoint), weights(trained.checkpoint))
