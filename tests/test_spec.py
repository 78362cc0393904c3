"""ModelSpec: defaults, validation that names the field, immutability and round trips."""

import json

import pytest
from conftest import AXIS_VALUE_NAMES
from pydantic import ValidationError

import zoo


def errors_of(**fields) -> list[dict]:
    """pydantic's errors behind the zoo's ConfigError that building a spec by calling it raises."""
    with pytest.raises(zoo.ConfigError) as err:
        zoo.ModelSpec(**fields)
    assert isinstance(err.value.__cause__, ValidationError)
    return err.value.__cause__.errors()


def test_defaults_are_the_transformer_base():
    spec = zoo.ModelSpec(vocab_size=100)
    assert (spec.src_vocab_size, spec.tgt_vocab_size) == (100, 100)
    assert (spec.d_model, spec.n_heads, spec.d_ff, spec.n_encoder_layers, spec.n_decoder_layers) == (512, 8, 2048, 6, 6)
    assert (spec.dropout, spec.max_len, spec.pad_id, spec.bos_id, spec.eos_id) == (0.1, 512, 0, 1, 2)
    assert spec.name == "post.sinusoidal.fused.relu"
    assert spec.final_norm == "auto" and not spec.uses_final_norm
    assert spec.embeddings.scale and not spec.embeddings.norm and not spec.embeddings.tie and spec.bias
    assert spec.d_head == 64


def test_vocab_sizes_can_differ_and_shorthand_must_agree():
    spec = zoo.ModelSpec(src_vocab_size=50, tgt_vocab_size=70)
    assert (spec.src_vocab_size, spec.tgt_vocab_size) == (50, 70)
    assert zoo.ModelSpec(vocab_size=50, src_vocab_size=50).tgt_vocab_size == 50
    (error,) = errors_of(vocab_size=50, tgt_vocab_size=70)
    assert "vocab_size 50 conflicts with tgt_vocab_size 70" in error["msg"]
    assert errors_of(d_model=64)[0]["loc"] in {("src_vocab_size",), ("tgt_vocab_size",)}


def test_unknown_keys_are_rejected_by_name():
    (error,) = errors_of(vocab_size=10, d_modle=64)
    assert error["type"] == "unknown_field"
    assert error["msg"].startswith("unknown field 'd_modle' (did you mean 'd_model'?); fields: activation_dropout, "
                                "attention, ")
    assert all(name in error["msg"] for name in zoo.ModelSpec.model_fields), "every field of the level is listed"


def test_spec_is_immutable_and_hashable():
    spec = zoo.ModelSpec(vocab_size=10)
    with pytest.raises(zoo.ConfigError, match=r"ModelSpec is frozen: spec.replace\(d_model=\.\.\.\) gives a changed copy"):
        spec.d_model = 64
    assert hash(spec) == hash(zoo.ModelSpec(vocab_size=10))


@pytest.mark.parametrize(
    "fields, loc, text",
    [
        ({"d_model": 100, "n_heads": 8}, "n_heads", "d_model 100 is not divisible by n_heads 8"),
        ({"d_model": 0}, "d_model", "greater than 0"),
        ({"d_ff": -1}, "d_ff", "greater than 0"),
        ({"n_encoder_layers": 0}, "n_encoder_layers", "greater than 0"),
        ({"max_len": 0}, "max_len", "greater than 0"),
        ({"dropout": 1.0}, "dropout", "less than 1"),
        ({"dropout": -0.1}, "dropout", "greater than or equal to 0"),
        ({"eos_id": 10}, "eos_id", "eos_id 10 is outside src_vocab_size 10 (valid ids 0..9)"),
        ({"tgt_vocab_size": 4, "src_vocab_size": 10, "bos_id": 5}, "bos_id", "outside tgt_vocab_size 4"),
        ({"eos_id": 0}, "eos_id", "pad_id and eos_id must differ (bos_id may equal either), got pad_id 0, bos_id 1, "
                                  "eos_id 0"),
        ({"src_vocab_size": 10, "tgt_vocab_size": 12, "share_embeddings": True}, "share_embeddings",
         "share_embeddings needs one vocabulary: src_vocab_size 10 and tgt_vocab_size 12 differ"),
        ({"head_width": 0}, "attn.head_width", "greater than 0"),
        ({"output_bias": "learned"}, "output.bias", "'auto', 'trained', 'fixed' or 'none'"),
        ({"pad_id": -1}, "pad_id", "greater than or equal to 0"),
        ({"final_norm": "sometimes"}, "final_norm", "auto"),
    ],
)
def test_bad_values_name_their_field(fields, loc, text):
    base = {"vocab_size": 10} if "src_vocab_size" not in fields else {}
    errors = errors_of(**base, **fields)
    # a field's own rule is reported at the field (a switch in its group); a rule between fields on the whole spec
    at = [".".join(map(str, e["loc"][:loc.count(".") + 1])) for e in errors]
    assert any((where == loc or (e["loc"] == () and loc in e["msg"])) and text in e["msg"]
               for where, e in zip(at, errors)), errors


@pytest.mark.parametrize("axis", zoo.AXES)
def test_unknown_axis_value_names_the_axis_and_its_choices(axis):
    (error,) = errors_of(vocab_size=10, **{axis: "qqqq"})
    assert error["loc"] == (axis,)
    assert error["msg"] == f"unknown {axis} 'qqqq'; choices: {', '.join(zoo.registry(axis).names())}"


@pytest.mark.parametrize("norm", zoo.registry("norm").names())
def test_final_norm_auto_follows_the_placement(norm):
    wants = zoo.registry("norm").get(norm).wants_final_norm
    spec = zoo.ModelSpec(vocab_size=10, norm=norm)
    assert spec.uses_final_norm is (wants(spec) if callable(wants) else wants)
    assert zoo.ModelSpec(vocab_size=10, norm=norm, final_norm=True).uses_final_norm is True
    assert zoo.ModelSpec(vocab_size=10, norm=norm, final_norm=False).uses_final_norm is False
    assert zoo.ModelSpec(vocab_size=10, norm="pre").uses_final_norm


@pytest.mark.parametrize("name", AXIS_VALUE_NAMES)
def test_round_trips_dict_json_yaml(name, tmp_path):
    one_stack = name.startswith(("decoder.", "encoder."))  # one vocabulary
    sizes = {"vocab_size": 30} if one_stack else {"src_vocab_size": 30, "tgt_vocab_size": 40}
    spec = zoo.spec(name, **sizes, d_model=64, n_heads=4, final_norm=True, tie_embeddings=True)
    axes = name.partition(".layers=")[0]  # a grid name with a per-layer pattern ends in it
    assert spec.axes_name == axes and spec.name.startswith(f"{axes}.") and spec.switches()["tie_embeddings"] is True
    assert zoo.spec(spec.name, **sizes, d_model=64, n_heads=4).name == spec.name, "the name gives back the model"
    assert zoo.ModelSpec.model_validate(spec.model_dump()) == spec
    assert zoo.ModelSpec.model_validate_json(spec.model_dump_json()) == spec
    assert zoo.ModelSpec.model_validate(json.loads(json.dumps(spec.model_dump()))) == spec
    path = tmp_path / "spec.yaml"
    path.write_text(spec.to_yaml())
    assert zoo.load_spec(path) == spec


def test_json_schema_lists_registered_choices():
    schema = zoo.ModelSpec.model_json_schema()
    for axis in zoo.AXES:
        names = schema["properties"][axis].get("anyOf", [schema["properties"][axis]])[0]
        assert names["enum"] == zoo.registry(axis).names()
    assert schema["additionalProperties"] is False


SIZES = ("d_model", "n_heads", "d_ff", "n_encoder_layers", "n_decoder_layers", "dropout", "max_len", "src_vocab_size",
         "tgt_vocab_size", "pad_id", "bos_id", "eos_id", "attention_dropout", "activation_dropout", "residual_dropout",
         "embedding_dropout")
"""What a canonical name leaves to the sizes a user gives (and to the dropout rates of training)."""


@pytest.mark.parametrize("preset", zoo.list_variants("*"))
def test_a_presets_name_with_its_sizes_is_the_same_model_and_an_equal_spec(preset):
    """A default that stands for a value (final_norm on pre-norm, head_width of d_model / n_heads)
    written out, as presets do, is the same model: equal specs, equal hashes."""
    spec = zoo.spec(preset, vocab_size=100)
    again = zoo.spec(spec.name, **{field: getattr(spec, field) for field in SIZES})
    assert again == spec and hash(again) == hash(spec) and again.name == spec.name
    assert spec.replace(final_norm=not spec.uses_final_norm) != spec, "a final norm away from the default's is another"
