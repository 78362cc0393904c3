"""A zoo model as a folder (config.json and model.safetensors): every part of every axis and every
kind round-trips to the same function with its ties kept; a transformers model saved locally is
read offline through from_hf; a damaged or foreign folder is a named error."""

import json

import pytest
import torch
from conftest import PARTS, padded_batch, tiny
from hf_references import REFERENCES

import zoo
from zoo.specs.registries import kinds


def same_function(a, b, spec) -> bool:
    src = padded_batch([5, 3], min(spec.src_vocab_size, spec.tgt_vocab_size))
    if spec.kind == "encoder_decoder":
        return torch.equal(a(src, src), b(src, src))
    return torch.equal(a(src), b(src))


@pytest.mark.parametrize("axis, name", PARTS)
@pytest.mark.parametrize("kind", kinds())
def test_every_part_and_kind_round_trips_to_the_same_function(tmp_path, axis, name, kind):
    spec = tiny("pre.sinusoidal.fused.relu", kind=kind, **{axis: name})
    model = zoo.build(spec, seed=3).eval()
    with torch.no_grad():  # trained weights, not the initial ones
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.1)
    loaded = zoo.from_pretrained(model.save_pretrained(tmp_path / "m"))
    assert loaded.spec == spec and not loaded.training
    assert same_function(model, loaded, spec)
    assert sorted(model.state_dict()) == sorted(loaded.state_dict())


def test_tied_and_shared_tables_are_stored_once_and_tied_again(tmp_path):
    spec = tiny("pre.sinusoidal.fused.relu", tie_embeddings=True, share_embeddings=True)
    model = zoo.build(spec)
    loaded = zoo.from_pretrained(model.save_pretrained(tmp_path / "m"))
    assert loaded.generator.weight is loaded.decoder.embed.tokens.weight is loaded.encoder.embed.tokens.weight
    from safetensors.torch import load_file

    stored = load_file(tmp_path / "m" / "model.safetensors")
    assert len(stored) < len(model.state_dict()), "a shared tensor is one entry"




@pytest.mark.parametrize("name", REFERENCES)
def test_a_transformers_folder_saved_locally_is_read_through_from_hf(tmp_path, name):
    """Held against what transformers itself reads back from the folder (transformers 5 ties T5
    1.1's output projection again on reading, whatever was saved: README, Starting from a
    reference model)."""
    reference = REFERENCES[name]().eval()
    reference.save_pretrained(tmp_path / name)
    loaded = zoo.from_pretrained(tmp_path / name)
    direct = zoo.from_hf(type(reference).from_pretrained(tmp_path / name, local_files_only=True).eval())
    assert loaded.spec == direct.spec
    for key, tensor in direct.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], tensor), key


@pytest.mark.parametrize("said", ["float16", "bfloat16"])
def test_a_folder_is_read_in_the_dtype_transformers_reads_and_says_which(tmp_path, said):
    """config.json saying float16 over float32 weights: transformers reads them rounded, and so does
    the zoo, saying so (model.float() does not bring the rounded bits back)."""
    reference = REFERENCES["gpt2"]().eval()
    reference.save_pretrained(tmp_path / "m")
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    (tmp_path / "m" / "config.json").write_text(json.dumps({**config, "dtype": said, "torch_dtype": said}))
    with pytest.warns(UserWarning, match=rf"read in {said}, as its config.json's dtype '{said}' says \(its weights "
                                         r"are stored in float32, so each was rounded\)"):
        loaded = zoo.from_pretrained(tmp_path / "m")
    theirs = type(reference).from_pretrained(tmp_path / "m", local_files_only=True)
    assert next(loaded.parameters()).dtype == theirs.dtype == getattr(torch, said)
    assert torch.equal(loaded.decoder.embed.tokens.weight, theirs.transformer.wte.weight)


@pytest.mark.parametrize("stored", ["float16", "bfloat16"])
def test_half_precision_weights_under_a_float32_config_compute_as_transformers_reads_them(tmp_path, stored):
    """A Llama (rotary positions) stored in half precision, its config saying float32: transformers
    reads float32, and the zoo's logits are its logits (they differed by 2.6e-3 to 2.1e-2 when the
    zoo read the stored dtype, and by 5e-3 after .float(), its rotary tables left at half precision)."""
    reference = REFERENCES["llama"]().eval()
    reference.to(getattr(torch, stored)).save_pretrained(tmp_path / "m")
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    (tmp_path / "m" / "config.json").write_text(json.dumps({**config, "dtype": "float32"}))
    with pytest.warns(UserWarning, match=rf"read in float32, as its config.json's dtype 'float32' says \(its weights "
                                         rf"are stored in {stored}\)"):
        loaded = zoo.from_pretrained(tmp_path / "m")
    theirs = type(reference).from_pretrained(tmp_path / "m", local_files_only=True).eval()
    ids = torch.randint(4, reference.config.vocab_size, (2, 9), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.allclose(loaded(ids), theirs(ids).logits, rtol=0, atol=1e-5)
        half = zoo.from_hf(theirs.to(getattr(torch, stored))).float()  # read half, then widened: tables in float32
        assert torch.allclose(half(ids), theirs.float()(ids).logits, rtol=0, atol=1e-5)


@pytest.mark.parametrize("name", zoo.registry("position").names())
def test_position_tables_survive_half_precision_and_back_bit_for_bit(name):
    model = zoo.build(tiny("decoder.pre.sinusoidal.fused.relu", position=name), seed=0)
    before = {key: buffer.clone() for key, buffer in model.named_buffers()}
    for dtype in (torch.float16, torch.bfloat16):
        model.to(dtype).float()
        for key, buffer in model.named_buffers():
            assert buffer.dtype == before[key].dtype and torch.equal(buffer, before[key]), (dtype, key)


def test_a_damaged_or_foreign_folder_is_a_named_error(tmp_path):
    model = zoo.build(tiny("pre.sinusoidal.fused.relu"))
    folder = model.save_pretrained(tmp_path / "m")
    with pytest.raises(zoo.ConfigError, match=r"nowhere: no such folder"):
        zoo.from_pretrained(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(zoo.ConfigError, match=r"empty: no config\.json; from_pretrained reads a folder"):
        zoo.from_pretrained(tmp_path / "empty")
    weights = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(weights[: len(weights) // 2])
    with pytest.raises(zoo.CheckpointError, match=r"model\.safetensors: not a readable safetensors file"):
        zoo.from_pretrained(folder)
    other = zoo.build(tiny("pre.sinusoidal.fused.swiglu")).save_pretrained(tmp_path / "other")
    (folder / "model.safetensors").write_bytes((other / "model.safetensors").read_bytes())
    unfit = r"its weights do not fit its spec pre\.sinusoidal\.fused\.relu\.n_kv_heads=2: "
    with pytest.raises(zoo.CheckpointError, match=unfit):
        zoo.from_pretrained(folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "zoo_format": 99}))
    with pytest.raises(zoo.ConfigError, match=r"zoo_format 99, written by a newer zoo"):
        zoo.from_pretrained(folder)
    (folder / "config.json").write_text(json.dumps({**config, "spec": {**config["spec"], "ffn": "swigluu"}}))
    with pytest.raises(zoo.ConfigError, match=r"config\.json: its spec: ffn: unknown ffn 'swigluu'"):
        zoo.from_pretrained(folder)
    (folder / "config.json").write_text(json.dumps({"architectures": ["NoSuchModel"]}))
    with pytest.raises(zoo.ConfigError, match=r"neither a zoo model's .* \(architectures: \['NoSuchModel'\]\)"):
        zoo.from_pretrained(folder)
