"""Presets as data, picking by canonical name, resolving specs from every kind of source."""

import pytest
from conftest import TINY

import zoo


def test_list_variants_filters_like_fnmatch():
    names = zoo.list_variants()
    assert {"vaswani2017", "pre-ln", "res-post", "torch-transformer"} <= set(names)
    assert names == sorted(names)
    assert zoo.list_variants("*post*") == ["res-post"]
    assert zoo.list_variants("nothing*") == []


def test_vaswani2017_is_the_transformer_base():
    spec = zoo.spec("vaswani2017", vocab_size=37000)
    assert spec.name == "post.sinusoidal.fused.relu"
    assert (spec.d_model, spec.n_heads, spec.d_ff, spec.n_encoder_layers, spec.n_decoder_layers) == (512, 8, 2048, 6, 6)
    assert spec.dropout == 0.1 and spec.embeddings.scale and not spec.uses_final_norm


def test_presets_chain_from_their_base():
    base = zoo.spec("vaswani2017", vocab_size=10)
    pre = zoo.spec("pre-ln", vocab_size=10)
    assert pre.norm == "pre" and pre.final_norm is True
    assert pre.model_copy(update={"norm": "post", "final_norm": "auto"}) == base
    assert zoo.spec("res-post", vocab_size=10).norm == "res_post"
    torch_layout = zoo.spec("torch-transformer", vocab_size=10)
    assert torch_layout.norm == "post" and torch_layout.uses_final_norm


@pytest.mark.parametrize("preset", zoo.list_variants())
def test_every_preset_builds_and_overrides_win(preset):
    sizes = {**TINY, "n_heads": 2}  # heads of 8, so that Pythia's rotated quarter holds a pair
    model = zoo.build(preset, **sizes)
    assert model.spec.d_model == sizes["d_model"] and model.spec.n_heads == 2
    assert model.spec == zoo.spec(preset, **sizes)


def test_a_preset_shrunk_below_what_its_parts_need_says_why():
    with pytest.raises(zoo.ConfigError, match=r"int\(0\.25 x d_head 4\) = 1 dimensions must be even"):
        zoo.build("pythia", **TINY)


def test_canonical_names_need_not_be_listed():
    spec = zoo.spec("pre.learned.per_head.gelu", vocab_size=32)
    assert spec.axes() == {"norm": "pre", "position": "learned", "attention": "per_head", "ffn": "gelu", "norm_type": "layernorm"}
    assert "pre.learned.per_head.gelu" not in zoo.list_variants()


def test_unknown_names_say_what_would_work():
    with pytest.raises(ValueError, match=r"unknown variant 'vaswani'; did you mean 'vaswani2017'\? .*canonical name"):
        zoo.spec("vaswani", vocab_size=10)
    with pytest.raises(ValueError, match="unknown ffn 'gleu'; did you mean 'gelu'"):
        zoo.spec("pre.learned.per_head.gleu", vocab_size=10)


def test_overrides_are_validated():
    with pytest.raises(ValueError, match="d_modle"):
        zoo.spec("pre-ln", vocab_size=10, d_modle=3)
    spec = zoo.spec("pre-ln", src_vocab_size=10, tgt_vocab_size=12)
    assert zoo.resolve(spec, vocab_size=20).tgt_vocab_size == 20
    assert zoo.resolve(zoo.ModelSpec(vocab_size=20), src_vocab_size=5).tgt_vocab_size == 20


def test_resolve_from_every_source(tmp_path):
    expected = zoo.spec("pre-ln", vocab_size=10, d_model=64)
    assert zoo.resolve(expected) is expected
    assert zoo.resolve("pre-ln", vocab_size=10, d_model=64) == expected
    assert zoo.resolve({"preset": "pre-ln", "vocab_size": 10, "d_model": 64}) == expected
    assert zoo.resolve({"preset": "pre-ln", "vocab_size": 10}, d_model=64) == expected
    assert zoo.resolve(expected.model_dump()) == expected
    path = tmp_path / "spec.yaml"
    path.write_text("preset: pre-ln\nvocab_size: 10\nd_model: 64\n")
    assert zoo.load_spec(path) == expected
    path.write_text("- not a mapping\n")
    with pytest.raises(ValueError, match="holds a mapping of fields"):
        zoo.load_spec(path)
    with pytest.raises(TypeError, match="cannot make a ModelSpec from int"):
        zoo.resolve(3)


def test_shipped_spec_file_loads():
    from pathlib import Path

    path = Path(__file__).parents[1] / "experiments" / "specs" / "small-pre-ln.yaml"
    spec = zoo.load_spec(path)
    assert spec.name == "pre.learned.fused.relu" and spec.d_model == 256 and spec.uses_final_norm


def test_register_preset_rejects_duplicates_and_dots():
    with pytest.raises(ValueError, match="already registered"):
        zoo.register_preset("vaswani2017", {})
    with pytest.raises(ValueError, match="free of dots"):
        zoo.register_preset("a.b", {})


def test_a_mistake_in_the_built_in_presets_names_the_real_file(monkeypatch):
    """zoo.variants is installed from the project's variants/ folder: zoo/variants/ does not exist."""
    import importlib
    from pathlib import Path

    import zoo.variants.presets
    from zoo.specs import catalog

    seen = []
    real = catalog.load_yaml
    monkeypatch.setattr(catalog, "load_yaml", lambda text, source: seen.append(source) or real(text, source))
    monkeypatch.setattr(catalog, "_PRESETS", {})
    importlib.reload(zoo.variants.presets)
    (source,) = seen
    assert Path(source).is_file() and Path(source).parts[-2:] == ("variants", "presets.yaml")
