"""Every float setting is one float32 can hold: a value that overflows to infinity or underflows to
0 in the model's arithmetic is refused with its field's name, never trained into a faked result."""

import pytest
from pydantic import BaseModel, ValidationError

import zoo
from zoo.cli import main
from zoo.specs.choices import settings_model
from zoo.specs.experiment import ExplosionSpec, OptimizerSpec, TrainSpec


def part_settings() -> dict[str, type[BaseModel]]:
    """Every registered part's settings model, and the trainer's, by a readable name."""
    models = {f"{axis} {name}": settings_model(zoo.registry(axis).get(name))
              for axis in (*zoo.AXES, "norm_type") for name in zoo.registry(axis).names()}
    models |= {f"task {name}": zoo.registry("task").get(name).Params for name in zoo.registry("task").names()}
    return models | {"train": TrainSpec, "train.optimizer": OptimizerSpec, "train.explosion": ExplosionSpec}


SETTINGS = part_settings()
FLOAT_FIELDS = [(owner, field) for owner, model in SETTINGS.items()
                for field, info in model.model_fields.items() if "float" in str(info.annotation)]


@pytest.mark.parametrize("value", [1e39, -1e39, 1e-50])
@pytest.mark.parametrize(("owner", "field"), FLOAT_FIELDS, ids=[f"{o}.{f}" for o, f in FLOAT_FIELDS])
def test_a_float_setting_float32_cannot_hold_is_refused_by_name(owner, field, value):
    model = SETTINGS[owner]
    annotation = str(model.model_fields[field].annotation)
    given = [value, value] if "tuple" in annotation else value
    with pytest.raises(ValidationError) as err:
        model.model_validate({field: given})
    first = err.value.errors()[0]
    assert first["loc"][0] == field
    assert "cannot be held in float32" in first["msg"] or first["msg"].startswith("Input should be"), "or its own bound"


@pytest.mark.parametrize("field, path", [("attn_softcap", "attn.softcap"), ("logit_softcap", "output.softcap")])
def test_the_softcaps_of_the_probe_are_refused_in_a_spec(field, path):
    with pytest.raises(zoo.ConfigError, match=f"{path}: .*1e\\+39 cannot be held in float32"):
        zoo.spec("pre-ln", vocab_size=100, **{field: 1e39})


def test_the_command_line_says_one_line_and_exits_2(tmp_path, capsys):
    (tmp_path / "e.yaml").write_text("train: {optimizer: {lr: 1.0e-50}}\n")
    with pytest.raises(SystemExit) as done:
        main(["train", str(tmp_path / "e.yaml")])
    err = capsys.readouterr().err.strip()
    assert done.value.code == 2 and len(err.splitlines()) == 1
    assert "train.optimizer.lr" in err and "cannot be held in float32" in err
