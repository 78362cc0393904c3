"""ExperimentSpec: defaults are the main job, YAML and --set, errors that name the key."""

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

import zoo
from zoo.specs.experiment import load_experiment, with_sets

ROOT = Path(__file__).parents[1]


def test_defaults_are_the_shipped_reverse_experiment():
    default = zoo.ExperimentSpec()
    assert default.task["name"] == "reverse" and default.wandb.mode == "offline"
    assert load_experiment(ROOT / "experiments" / "reverse.yaml") == default
    spec = default.model_spec(29, 29)
    assert spec.name == "post.sinusoidal.fused.relu" and spec.d_model == 128


def test_yaml_round_trip(tmp_path):
    experiment = load_experiment(None, ["model.norm=pre", "task.name=sort", "train.steps=7", "wandb.tags=[a, b]"])
    path = tmp_path / "exp.yaml"
    path.write_text(experiment.to_yaml())
    assert load_experiment(path) == experiment
    assert experiment.model.norm == "pre" and experiment.train.steps == 7 and experiment.wandb.tags == ("a", "b")
    assert experiment.task == {"name": "sort", **{k: v for k, v in zoo.ExperimentSpec().task.items() if k != "name"}}


def test_sets_are_typed_and_nested(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text("train: {steps: 5}\n")
    experiment = load_experiment(path, ["train.optimizer.lr=0.01", "train.grad_clip=null", "model.preset=pre-ln"])
    assert experiment.train.steps == 5 and experiment.train.optimizer.lr == 0.01
    assert experiment.train.grad_clip is None
    assert experiment.model_spec(10, 10).name == "pre.sinusoidal.fused.relu"


@pytest.mark.parametrize("sets, text", [
    (["trian.steps=5"], "unknown key 'trian'; valid keys start with one of: model, task, train, wandb"),
    (["train.stpes=5"], "stpes"),
    (["train.steps=0"], "greater than 0"),
    (["model.d_modle=64"], "d_modle"),
    (["model.ffn=gleu"], "did you mean 'gelu'"),
    (["task.name=revers"], "did you mean 'reverse'"),
    (["task.min_len=30"], "min_len 30 is larger than max_len 19"),
    (["train.optimizer.name=sdg"], "unknown optimizer 'sdg'; did you mean 'sgd'? choices: adafactor, adam, adamw"),
    (["train.schedule=linaer"], "unknown schedule 'linaer'; did you mean 'linear'? choices: constant, cosine"),
    (["wandb.mode=cloud"], "'offline', 'online' or 'disabled'"),
    (["steps"], "--set expects dotted.key=value"),
    (["train.steps.value=3"], "train.steps"),
])
def test_bad_keys_and_values_are_named(sets, text):
    with pytest.raises((ValueError, ValidationError)) as err:
        load_experiment(None, sets)
    assert text in str(err.value)


def test_unknown_top_level_keys_in_a_file_are_rejected(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({"model": {"preset": "pre-ln"}, "trainer": {}}))
    with pytest.raises(zoo.ConfigError, match=r"unknown field 'trainer' \(did you mean 'train'\?\); fields: model, "
                                              r"task, train, wandb"):
        load_experiment(path)


def test_with_sets_leaves_its_input_alone():
    data = {"train": {"steps": 3}}
    assert with_sets(data, ["train.steps=4"])["train"]["steps"] == 4
    assert data == {"train": {"steps": 3}}
