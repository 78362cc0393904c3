"""Optimizers and schedules are registered choices with typed settings, as the model's parts are:
each optimizer trains and its settings reach torch's (runs of the main job's size:
experiments/benchmarks/registry_runs.py), each schedule ramps and ends where its settings say, the
old names keep every fingerprint, and a bad setting names the choice's settings."""

import itertools
import math

import pytest
from test_bad_input import cli_error

import zoo
from trainkit import tiny_experiment
from zoo.specs.choices import settings_model
from zoo.specs.experiment import ExperimentSpec, OptimizerSpec, TrainSpec, validate_experiment
from zoo.specs.identity import run_name
from zoo.specs.registries import registry
from zoo.trainer.optim import lr_multiplier, make_optimizer

OPTIMIZERS = registry("optimizer").names()
SCHEDULES = [(name, dict(tried)) for name in registry("schedule").names()
             for tried in ({}, *settings_model(registry("schedule").get(name)).TRIED)]
TINY_TASK_RATE = 3.0
"""The tiny task learns in a few steps at this multiple of each optimizer's usual rate (Optimizer.usual)."""


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_each_optimizer_trains_and_its_settings_reach_torch(tmp_path, name):
    tried = {"name": name, "lr": TINY_TASK_RATE * registry("optimizer").get(name).usual["lr"], **dict(next(iter(
        settings_model(registry("optimizer").get(name)).TRIED), {}))}
    experiment = validate_experiment(tiny_experiment(tmp_path, train={"steps": 40, "eval_every": 40, "optimizer": tried}))
    model = zoo.build("pre-ln", vocab_size=10, d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1)
    built = make_optimizer(model, experiment.train)  # Muon's first group holds the layers' matrices
    group = built.param_groups[0]
    assert group["lr"] == tried["lr"] and group["weight_decay"] == experiment.train.optimizer.weight_decay
    for key, value in experiment.train.optimizer.settings.model_dump().items():
        if key in group:  # Adafactor's eps is the second of torch's (eps1, eps2)
            held = group[key][1] if (name, key) == ("adafactor", "eps") else group[key]
            assert held == (tuple(value) if isinstance(value, list) else value), key
    result = zoo.train(experiment)
    losses = [row["train/loss"] for row in result.history if "train/loss" in row]
    assert math.isfinite(result.metrics["eval/loss"]) and losses[-1] < losses[0], (name, losses)


@pytest.mark.parametrize("name, settings", SCHEDULES, ids=[f"{n}{s or ''}" for n, s in SCHEDULES])
def test_each_schedule_ramps_over_the_warmup_then_ends_where_its_settings_say(name, settings):
    train = TrainSpec.model_validate({"steps": 200, "warmup_steps": 20, "schedule": {"name": name, **settings}})
    values = [lr_multiplier(train, step) for step in range(1, 201)]
    assert values[:20] == pytest.approx([step / 20 for step in range(1, 21)]), "the shared linear warmup"
    assert all(0.0 <= v <= 1.0 for v in values)
    end = {"constant": 1.0, "inverse_sqrt": math.sqrt(20 / 200)}.get(name, settings.get("min_ratio", 0.0))
    assert values[-1] == pytest.approx(end)
    if name != "constant":
        assert all(b <= a + 1e-12 for a, b in itertools.pairwise(values[19:])), "never rises after the warmup"


def test_wsd_holds_the_peak_until_its_decay():
    train = TrainSpec.model_validate({"steps": 120, "warmup_steps": 20, "schedule": {"name": "wsd", "decay_fraction": 0.25}})
    assert [lr_multiplier(train, s) for s in (21, 95)] == [1.0, 1.0] and lr_multiplier(train, 96) < 1.0
    assert lr_multiplier(train, 120) == 0.0


def test_the_old_names_keep_every_fingerprint_and_write_the_same_experiment():
    """What the first names were fingerprinted with: Adam's settings written out, the schedule a name."""
    experiment = ExperimentSpec.model_validate({})
    dumped = experiment.model_dump(mode="json")["train"]
    assert dumped["optimizer"] == {"name": "adam", "lr": 0.002, "weight_decay": 0.0, "betas": [0.9, 0.98], "eps": 1e-9}
    assert dumped["schedule"] == "cosine"
    assert run_name(experiment) == run_name(ExperimentSpec.model_validate(
        {"train": {"optimizer": {"name": "adam", "betas": [0.9, 0.98]}, "schedule": "cosine"}}))
    sgd = ExperimentSpec.model_validate({"train": {"optimizer": {"name": "sgd", "lr": 0.1, "momentum": 0.9}}})
    assert run_name(sgd) != run_name(ExperimentSpec.model_validate({"train": {"optimizer": {"name": "sgd", "lr": 0.1}}}))


@pytest.mark.parametrize("optimizer, said", [
    ({"name": "sgdd"}, "unknown optimizer 'sgdd'; did you mean 'sgd'?"),
    ({"name": "sgd", "betas": [0.9, 0.9]}, "unknown field 'betas'; fields: dampening, lr, momentum, name, nesterov,"),
    ({"name": "adam", "lrr": 0.1}, "unknown field 'lrr' (did you mean 'lr'?); fields: betas, eps, lr, name, weight_decay"),
    ({"name": "sgd", "nesterov": True}, "nesterov needs momentum > 0 and dampening 0"),
    ({"name": "sgd", "momentum": 1.5}, "momentum: Input should be less than 1"),
    ({"name": "adam", "betas": [0.9, 1.5]}, "betas.1: Input should be less than 1"),
    ({"name": "nadam", "betas": [-0.1, 0.9]}, "betas.0: Input should be greater than or equal to 0"),
    ({"name": "muon", "adamw_betas": [0.9, 1.0]}, "adamw_betas.1: Input should be less than 1"),
])
def test_a_bad_optimizer_names_its_settings(tmp_path, capsys, optimizer, said):
    import yaml

    path = tmp_path / "e.yaml"
    path.write_text(yaml.safe_dump({"train": {"optimizer": optimizer}}))
    assert said in cli_error(["train", str(path), "--print-config"], capsys)
    with pytest.raises(zoo.ConfigError, match=r"train\.optimizer"):
        validate_experiment({"train": {"optimizer": optimizer}})
    assert OptimizerSpec.model_validate({"name": "sgd", "momentum": 0.9}).momentum == 0.9
    assert OptimizerSpec.model_validate("sgd") == OptimizerSpec.model_validate({"name": "sgd"}), "a name alone"


@pytest.mark.parametrize("key, meant", [("lr", "optimizer.lr"), ("learning_rate", "optimizer.lr"), ("max_steps", "steps"),
                                        ("lr_scheduler_type", "schedule"), ("max_grad_norm", "grad_clip")])
def test_other_libraries_names_of_training_fields_point_to_the_zoos(key, meant):
    with pytest.raises(zoo.ConfigError, match=rf"train: unknown field '{key}' \(did you mean '{meant}'\?\)"):
        validate_experiment({"train": {key: 1}})


def test_replace_raises_the_documented_error_of_the_python_api():
    spec = zoo.spec("pre-ln", vocab_size=100)
    with pytest.raises(zoo.ConfigError, match=r"ffn: unknown ffn 'swigluu'; did you mean 'swiglu'\?"):
        spec.replace(ffn="swigluu")
    with pytest.raises(zoo.ConfigError, match=r"OptimizerSpec\.replace: unknown optimizer 'sgdd'"):
        OptimizerSpec().replace(name="sgdd")
    sgd = OptimizerSpec(lr=0.1).replace(name="sgd", momentum=0.9)
    assert sgd.model_dump() == {"name": "sgd", "lr": 0.1, "weight_decay": 0.0, "momentum": 0.9, "nesterov": False,
                                "dampening": 0.0}, "another optimizer leaves the last one's settings behind"



@pytest.mark.slow
def test_every_module_of_the_built_in_packages_is_imported_so_none_is_forgotten():
    """A module of parts, tasks, optimizers or schedules registers them when imported: the packages
    import every module they hold, not a list a new module could be left out of."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    expected = sorted([f"zoo.tasks.{p.stem}" for p in (root / "zoo" / "tasks").glob("*.py") if p.stem != "__init__"]
                      + [f"zoo.optim.{p.stem}" for p in (root / "zoo" / "optim").glob("*.py") if p.stem != "__init__"]
                      + [f"zoo.variants.{p.stem}" for p in (root / "variants").glob("*.py") if p.stem != "__init__"])
    code = ("import sys, zoo; zoo.registry('task').names(); "
            "print(' '.join(sorted(m for m in sys.modules if m.split('.')[:2] in "
            "(['zoo', 'tasks'], ['zoo', 'optim'], ['zoo', 'variants']) and m.count('.') == 2)))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert loaded.stdout.split() == expected


def test_every_package_of_the_zoo_is_installed():
    """pyproject lists the packages a wheel holds, nested ones too: a package left out there works
    in an editable install and is missing from every other one."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    listed = re.search(r"^packages = \[(.*)\]$", (root / "pyproject.toml").read_text(encoding="utf-8"), re.M)
    on_disk = {"zoo.variants", *(".".join(p.parent.relative_to(root).parts) for p in (root / "zoo").rglob("__init__.py"))}
    assert set(re.findall(r'"([\w.]+)"', listed.group(1))) == on_disk


@pytest.mark.parametrize("name", ["cosine", "linear", "wsd"])
def test_a_run_whose_every_step_would_train_at_rate_0_is_refused(name, capsys):
    """A 1-step run of a schedule that ends at 0 trained its only step at rate 0 (round 5, then a
    warning only): refused before anything runs, while 2 steps, a min_ratio or constant train."""
    with pytest.raises(zoo.ConfigError, match=rf"train.schedule {name}: every one of the 1 step\(s\) would train at "
                                              r"rate 0 .* train more steps, set its min_ratio above 0, or use constant"):
        validate_experiment({"train": {"schedule": name, "steps": 1, "warmup_steps": 0}})
    assert "would train at rate 0" in cli_error(["train", "--set", f"train.schedule={name}", "train.steps=1",
                                                 "train.warmup_steps=0", "--print-config"], capsys)
    validate_experiment({"train": {"schedule": name, "steps": 2, "warmup_steps": 0}})
    validate_experiment({"train": {"schedule": {"name": name, "min_ratio": 0.1}, "steps": 1, "warmup_steps": 0}})
    validate_experiment({"train": {"schedule": "constant", "steps": 1, "warmup_steps": 0}})


def test_a_warmup_past_the_last_step_is_warned_when_the_run_starts(tmp_path):
    with pytest.warns(RuntimeWarning, match=r"train.warmup_steps 10 is past train.steps 3: the rate never reaches its "
                                            r"peak, at most 0.3 of optimizer.lr"):
        zoo.train(tiny_experiment(tmp_path, train={"steps": 3, "warmup_steps": 10, "eval_every": 3}))
