"""An unknown key gets what an unknown value gets: the field it most likely meant and every field
of its level, in Python, in --set, in experiment and sweep files, for every settings model; a
sweep file given to `zoo train` (and the reverse) is named as such; a spec is changed by
`replace`, validated, and `model_copy` can no longer make one that cannot be built."""

import re
import typing

import pytest
import yaml
from pydantic import ValidationError
from test_bad_input import cli_error

import zoo
from trainkit import tiny_experiment
from zoo.specs.strict import StrictSettings, field_names


def settings_models() -> dict[str, type[StrictSettings]]:
    """Every settings model a user writes keys for: specs, training, W&B, sweeps and each
    registered task's parameters (part settings name theirs with their defaults; test_part_settings)."""
    from zoo.specs.experiment import ExplosionSpec, OptimizerSpec, TrainSpec, WandbSpec
    from zoo.sweep import SweepSpec

    models = {cls.__name__: cls for cls in (zoo.ModelSpec, zoo.ExperimentSpec, TrainSpec, OptimizerSpec,
                                            ExplosionSpec, WandbSpec, SweepSpec)}
    for name in zoo.registry("task").names():
        models[f"task {name}"] = zoo.registry("task").get(name).Params
    return models


def beside(model) -> list[str]:
    """The keys a level takes beside its fields: an optimizer's own settings (the default's, adam)."""
    from zoo.specs.experiment import OptimizerSpec

    return list(type(OptimizerSpec().settings).model_fields) if model is OptimizerSpec else []


def typo(name: str) -> str:
    """The field with its first two letters swapped, the commonest slip of a hand."""
    return name[1] + name[0] + name[2:] if name[0] != name[1] else name + "x"


@pytest.mark.parametrize("model", settings_models().values(), ids=settings_models())
def test_every_settings_model_names_the_field_a_typo_meant_and_the_fields_of_its_level(model):
    for name in field_names(model):
        with pytest.raises(ValidationError) as err:
            model.model_validate({typo(name): 1})
        (error,) = err.value.errors()
        assert error["type"] == "unknown_field"
        assert error["msg"].startswith(f"unknown field '{typo(name)}' (did you mean '{name}'?); fields: "), error["msg"]
        assert error["msg"].endswith(", ".join(sorted([*field_names(model), *model.shorthands, *beside(model)])))


@pytest.mark.parametrize("key, meant", [("n_layers", "'n_encoder_layers' and 'n_decoder_layers'"),
                                        ("hidden_size", "'d_model'"), ("nhead", "'n_heads'"),
                                        ("dim_feedforward", "'d_ff'"), ("d_modle", "'d_model'")])
def test_names_from_other_libraries_point_to_the_zoos(key, meant):
    with pytest.raises(zoo.ConfigError,
                       match=rf"unknown field '{key}' \(did you mean {meant}\?\); fields: activation_dropout, attention"):
        zoo.spec("pre-ln", vocab_size=8000, **{key: 4})


def test_set_files_and_grid_keys_say_it_too(tmp_path, capsys):
    file = tmp_path / "e.yaml"
    file.write_text(yaml.safe_dump(tiny_experiment(tmp_path)))
    err = cli_error(["train", str(file), "--set", "train.stepz=10"], capsys)
    assert ("train: unknown field 'stepz' (did you mean 'steps'?); fields: accumulate, activation_checkpointing, "
            "activation_checkpointing_k, average_last, batch_size,") in err
    sweep = tmp_path / "s.yaml"
    sweep.write_text(yaml.safe_dump({"name": "s", "base": tiny_experiment(tmp_path), "grid": {"model.fnn": ["relu"]}}))
    assert "model: unknown field 'fnn' (did you mean 'ffn'?)" in cli_error(["sweep", str(sweep), "--dry-run"], capsys)
    sweep.write_text(yaml.safe_dump({"name": "s", "base": tiny_experiment(tmp_path), "grid": {"model.ffn": ["relu"]},
                                     "seed": [0, 1]}))
    assert "unknown field 'seed' (did you mean 'seeds'?)" in cli_error(["sweep", str(sweep), "--dry-run"], capsys)


def test_a_sweep_file_given_to_train_and_an_experiment_file_given_to_sweep_are_named(tmp_path, capsys):
    experiment, sweep = tmp_path / "e.yaml", tmp_path / "s.yaml"
    experiment.write_text(yaml.safe_dump(tiny_experiment(tmp_path)))
    sweep.write_text(yaml.safe_dump({"name": "s", "base": "e.yaml", "grid": {"model.norm": ["post", "pre"]}}))
    assert f"{sweep} is a sweep file (it has base, grid); run it with zoo sweep {sweep}" in cli_error(
        ["train", str(sweep)], capsys)
    assert f"{experiment} is an experiment file (it has model, task, train, wandb); train it with zoo train" in cli_error(
        ["sweep", str(experiment)], capsys)


def test_replace_is_the_validated_way_to_change_a_spec_and_model_copy_validates_too():
    spec = zoo.spec("pre-ln", vocab_size=100)
    changed = spec.replace(ffn="swiglu", d_model=256)
    assert changed.name == "pre.sinusoidal.fused.swiglu" and changed.d_model == 256 and spec.d_model == 512
    assert zoo.build(changed).spec == changed
    for make in (lambda: spec.replace(ffn="swigluu"), lambda: spec.model_copy(update={"ffn": "swigluu"})):
        with pytest.raises(zoo.ConfigError, match=r"unknown ffn 'swigluu'; did you mean 'swiglu'\?") as refused:
            make()  # as zoo.spec: the zoo's ConfigError, whose cause is pydantic's ValidationError
        assert isinstance(refused.value.__cause__, ValidationError)
    with pytest.raises(zoo.ConfigError, match=r"unknown field 'd_modle' \(did you mean 'd_model'\?\)"):
        spec.replace(d_modle=256)
    with pytest.raises(zoo.ConfigError, match=r"attn: "):
        spec.replace(attn=None)
    assert spec.model_copy() == spec


def test_every_mistake_in_convert_is_a_zoo_error():
    model = zoo.build("pre-ln", vocab_size=50, d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1)
    for changes in ({"ffn": "swiglu"}, {"ffn": "swigluu"}, {"d_modle": 3}, {"tie_embeddings": True}, {"n_heads": 3},
                    {"d_model": 32}):
        with pytest.raises(zoo.ZooError):
            zoo.convert(model, **changes)


def reached(model, path: str) -> bool:
    """Whether a dotted path names a field (or a flat switch key, or the default optimizer's setting)."""
    head, _, rest = path.partition(".")
    if head in model.shorthands or head in beside(model):
        return not rest
    if head not in model.model_fields:
        return False
    if not rest:
        return True
    annotation = model.model_fields[head].annotation
    inner = next((t for t in (annotation, *typing.get_args(annotation)) if isinstance(t, type)
                  and issubclass(t, StrictSettings)), None)
    return inner is not None and reached(inner, rest)


@pytest.mark.parametrize("model", settings_models().values(), ids=settings_models())
def test_every_name_of_another_library_points_at_a_field_of_the_zoo(model):
    for theirs, ours in model.synonyms.items():
        value_of = re.match(r"(\w+): '", ours)  # `causal` -> kind: 'decoder', a field and its value
        named = [value_of.group(1)] if value_of else re.findall(r"'([\w.]+)'", ours)
        assert named and all(reached(model, path) for path in named), f"{model.__name__}.{theirs} -> {ours}"
        assert theirs not in field_names(model), f"{theirs} is a field of {model.__name__} itself"
