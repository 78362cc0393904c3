"""Parts own their settings: an axis is a name or a mapping {name, **settings}, validated by the
part's own model, in canonical names, the JSON schema, `--set`, sweep grids and run folders."""

import json
from typing import get_args

import pytest
import torch
from conftest import PART_IDS, PARTS
from pydantic import ValidationError

import zoo
from trainkit import tiny_experiment
from zoo.specs.choices import settings_model
from zoo.specs.experiment import load_experiment, validate_experiment
from zoo.specs.identity import fingerprint
from zoo.sweep import SweepSpec, cell_experiment, expand

SMALL = dict(vocab_size=13, d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1, max_len=24)
WITH_SETTINGS = [(axis, name) for axis, name in PARTS if settings_model(zoo.registry(axis).get(name)).model_fields]


def other_value(model, key):
    """A valid value of one setting that is not its default (tried in a fixed order)."""
    default = model.model_fields[key].default
    if isinstance(default, bool):
        candidates = [not default]
    elif isinstance(default, str):  # a choice among names (a Literal)
        candidates = list(get_args(model.model_fields[key].annotation))
    else:
        candidates = [default * 2, default / 2, default + 1, default - 1]
    for value in candidates:
        if value == default:
            continue
        try:
            model.model_validate({key: value})
            return value
        except ValidationError:
            continue
    raise AssertionError(f"no other value found for {model.__name__}.{key}")


def non_default(axis: str, name: str) -> dict:
    model = settings_model(zoo.registry(axis).get(name))
    return {"name": name, **{key: other_value(model, key) for key in model.model_fields}}


def test_at_least_one_part_has_settings():
    assert WITH_SETTINGS, "the tests below need a part with settings"


@pytest.mark.parametrize("axis, name", PARTS, ids=PART_IDS)
def test_a_name_and_a_mapping_of_its_defaults_are_one_choice(axis, name):
    defaults = settings_model(zoo.registry(axis).get(name))().model_dump()
    plain, spelled = zoo.spec("post.sinusoidal.fused.relu", **SMALL, **{axis: name}), \
        zoo.spec("post.sinusoidal.fused.relu", **SMALL, **{axis: {"name": name, **defaults}})
    assert plain == spelled and hash(plain) == hash(spelled) and plain.name == spelled.name
    assert getattr(spelled, axis) == name and spelled.model_dump()[axis] == name
    experiment = {"model": {"preset": "vaswani2017", axis: name}}
    assert fingerprint(validate_experiment(experiment)) == fingerprint(
        validate_experiment({"model": {"preset": "vaswani2017", axis: {"name": name, **defaults}}}))


@pytest.mark.parametrize("axis, name", WITH_SETTINGS, ids=[f"{a}:{n}" for a, n in WITH_SETTINGS])
def test_non_default_settings_round_trip_and_show_in_the_name(axis, name, tmp_path):
    value = non_default(axis, name)
    spec = zoo.spec("pre.sinusoidal.fused.relu", **SMALL, **{axis: value})
    choice = getattr(spec, axis)
    assert choice.name == name and choice != name
    for key, setting in value.items():
        if key != "name":
            assert getattr(choice, key) == setting == getattr(choice.settings, key)
            assert f"+{key}=" in spec.name
    assert zoo.spec(spec.name, **SMALL) == spec, "the canonical name stands for the same spec"
    assert zoo.ModelSpec.model_validate_json(spec.model_dump_json()) == spec
    assert zoo.ModelSpec.model_validate(json.loads(json.dumps(spec.model_dump()))) == spec
    (tmp_path / "spec.yaml").write_text(spec.to_yaml())
    assert zoo.load_spec(tmp_path / "spec.yaml") == spec
    model = zoo.build(spec, seed=0)
    logits = model(torch.tensor([[3, 4, 5, 2]]), torch.tensor([[1, 6, 7]]))
    assert torch.isfinite(logits).all()


@pytest.mark.parametrize("axis, name", PARTS, ids=PART_IDS)
def test_an_unknown_setting_names_the_valid_ones(axis, name):
    model = settings_model(zoo.registry(axis).get(name))
    with pytest.raises(zoo.ConfigError) as err:
        zoo.spec("post.sinusoidal.fused.relu", **SMALL, **{axis: {"name": name, "no_such_setting": 1}})
    assert isinstance(err.value.__cause__, ValidationError), "the zoo's error, pydantic's as its cause"
    (error,) = err.value.__cause__.errors()
    assert error["loc"] == (axis,) and "unknown setting 'no_such_setting'" in error["msg"]
    if model.model_fields:
        assert all(key in error["msg"] for key in model.model_fields)
    else:
        assert f"{axis} '{name}' has no settings" in error["msg"]


@pytest.mark.parametrize("value, text", [
    ({"base": 3}, "part's name"),
    (7, "a part's name or a mapping"),
    ({"name": "sinusoidal", "bse": 5.0}, "did you mean 'base'"),
    ({"name": "sinusoidal", "base": "big"}, "base: Input should be a valid number"),
    ({"name": "sinusoidal", "base": 0.5}, "base: Input should be greater than 1"),
    ({"name": "sinusoida"}, "did you mean 'sinusoidal'"),
])
def test_bad_axis_values_say_what_would_work(value, text):
    with pytest.raises(zoo.ConfigError, match=text) as err:
        zoo.ModelSpec(vocab_size=9, position=value)
    assert err.value.__cause__.errors()[0]["loc"] == ("position",)


def test_the_json_schema_lists_every_part_and_its_settings():
    schema = zoo.ModelSpec.model_json_schema()["properties"]
    for axis in zoo.AXES:
        options = schema[axis].get("anyOf", [schema[axis]])
        assert options[0]["enum"] == zoo.registry(axis).names()
        mappings = {option["title"]: option for option in options[1:]}
        expected = [name for a, name in WITH_SETTINGS if a == axis]
        assert sorted(mappings) == expected
        for name, option in mappings.items():
            fields = settings_model(zoo.registry(axis).get(name)).model_fields
            assert option["properties"]["name"] == {"const": name}
            assert set(option["properties"]) == {"name", *fields} and option["additionalProperties"] is False


def test_a_setting_changes_on_the_part_a_name_or_preset_gives():
    experiment = load_experiment(None, ["model.position.base=500000", "wandb.mode=disabled"])
    assert experiment.variant == "post.sinusoidal+base=500000.0.fused.relu"
    spec = zoo.spec("pre-ln", vocab_size=9, position={"base": 20.0})
    assert spec.position.name == "sinusoidal" and spec.position.base == 20.0 and spec.norm == "pre"
    with pytest.raises(zoo.ConfigError, match="model: position: unknown setting 'bse'; did you mean 'base'"):
        load_experiment(None, ["model.position.bse=500000"])


def test_a_setting_changes_what_the_part_computes():
    low, high = (zoo.build("post.sinusoidal.fused.relu", seed=0, **SMALL, position={"base": b}) for b in (100.0, 10000.0))
    x = torch.zeros(1, 5, 16)
    columns = torch.arange(x.size(1))[None]
    assert not torch.allclose(low.encoder.embed.position(x, columns), high.encoder.embed.position(x, columns))
    assert torch.equal(high.encoder.embed.position(x, columns), zoo.build("post.sinusoidal.fused.relu", seed=0, **SMALL)
                       .encoder.embed.position(x, columns))


def test_a_sweep_grid_varies_a_setting_and_each_cell_gets_its_folder(tmp_path):
    sweep = SweepSpec.model_validate({"name": "b", "grid": {"model.position.base": [10000, 500000]},
                                      "out_dir": str(tmp_path)})
    cells = expand(sweep)
    assert [c.name for c in cells] == ["base=10000,seed=0", "base=500000,seed=0"]
    experiments = [cell_experiment(sweep, {"model": {"preset": "pre-ln"}}, cell) for cell in cells]
    assert [e.variant for e in experiments] == ["pre.sinusoidal.fused.relu", "pre.sinusoidal+base=500000.0.fused.relu"]
    assert len({fingerprint(e) for e in experiments}) == 2


def test_a_trained_run_keeps_its_settings_in_the_checkpoint(tmp_path):
    experiment = tiny_experiment(tmp_path, model={"position": {"name": "sinusoidal", "base": 100.0}},
                                 train={"steps": 2, "eval_every": 2, "log_every": 1, "checkpoint_every": 2})
    result = zoo.train(experiment)
    assert result.run_dir.name.startswith("post.sinusoidal+base=100.0.fused.relu-seed0-")
    _, spec = zoo.load(result.checkpoint)
    assert spec.position.base == 100.0 and spec.name == "post.sinusoidal+base=100.0.fused.relu"
