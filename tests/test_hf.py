"""The reference encoder-decoders of transformers (T5 1.0 and 1.1, mT5, BART, Marian) in the zoo: the same
logits with padding, the same greedy and beam decoding, the same count of trained parameters, an
exact round trip, and presets that are their architectures. The references are built from small
random configurations, offline, with every weight moved away from its initial value."""

import copy
import functools
import math
import sys

import pytest
import torch
import transformers as hf
from hf_references import ENCODER_DECODERS, SMALL, VOCAB, untied
from torch import nn

import zoo
from zoo.interop.hf import FAMILIES, family_of
from zoo.model.canonical import canonical_state
from zoo.model.generate import never_emitted
from zoo.model.size_checks import exact_parameters


def reference(name: str):
    """A fresh copy of the prepared reference (tests may change theirs)."""
    return copy.deepcopy(prepared(name))


@functools.cache
@torch.no_grad()
def prepared(name: str):
    """The reference in eval mode, every trained weight and the fixed logits bias moved off its
    initial value (Marian's sinusoid tables are computed, so they stay), then eos made likely
    enough that greedy rows end at different steps."""
    torch.manual_seed(0)
    model = ENCODER_DECODERS[name]()
    for param in model.parameters():
        if param.requires_grad:
            param.add_(torch.randn_like(param) * 0.3)
    for buffer_name, buffer in model.named_buffers():
        if buffer_name == "final_logits_bias":
            buffer.add_(torch.randn_like(buffer))
    return ending_at_different_steps(model.eval())


@torch.no_grad()
def ending_at_different_steps(model):
    """Raise the eos logit (its bias, or the scale of its output row) in small steps until the
    reference's own greedy decoding of the test batch ends its rows at different lengths."""
    eos, row = model.config.eos_token_id, model.get_output_embeddings().weight
    bias = getattr(model, "final_logits_bias", None)
    spec = zoo.from_hf(model).spec
    src, _, mask, _ = inputs(spec, seed=2)
    for _ in range(100):
        out = model.generate(input_ids=src, attention_mask=mask, max_new_tokens=8, do_sample=False,
                             suppress_tokens=never_emitted(spec), use_cache=False)
        if len({len(kept) for kept in ended(out, eos)}) >= 2:
            return model
        if bias is not None:
            bias[0, eos] += 0.1
        else:
            row[eos] *= 1.05
    raise AssertionError("no eos logit makes the rows end at different steps")


def inputs(spec: zoo.ModelSpec, seed: int = 1):
    """Right-padded sources and decoder inputs starting with the decoder's start token, with the
    masks the reference takes: the start is never padding, even where it is the pad id."""
    gen = torch.Generator().manual_seed(seed)
    ordinary = [i for i in range(spec.src_vocab_size) if i not in (spec.pad_id, spec.eos_id, spec.bos_id)]
    pick = lambda shape: torch.tensor(ordinary)[torch.randint(len(ordinary), shape, generator=gen)]
    src, tgt = pick((4, 7)), pick((4, 6))
    for row, (s, t) in enumerate([(7, 6), (3, 2), (5, 6), (1, 4)]):
        src[row, s:], tgt[row, t:] = spec.pad_id, spec.pad_id
    tgt[:, 0] = spec.bos_id
    decoder_mask = (tgt != spec.pad_id).long()
    decoder_mask[:, 0] = 1
    return src, tgt, (src != spec.pad_id).long(), decoder_mask


def reference_logits(model, spec):
    src, tgt, mask, decoder_mask = inputs(spec)
    with torch.no_grad():
        return model(input_ids=src, attention_mask=mask, decoder_input_ids=tgt, decoder_attention_mask=decoder_mask).logits


def trained(model) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


@pytest.mark.parametrize("name", ENCODER_DECODERS)
def test_the_logits_are_the_references_with_padding(name):
    ref = reference(name)
    model = zoo.from_hf(ref)
    src, tgt, _, real = inputs(model.spec)
    real = real.bool()  # M2M100 gives a padded position its pad row: real tokens are what must agree
    # 1e-5, and float32's rounding at the logits' size (T5 1.1: 1.2e-5 at 13.5, transformers' RMSNorm written
    # out by hand against torch's fused one)
    with torch.no_grad():
        torch.testing.assert_close(model(src, tgt)[real], reference_logits(ref, model.spec)[real], rtol=1e-6, atol=1e-5)
    assert not model.training and model.spec.name.split(".")[1] in (
        "t5", "learned+offset=2", "sinusoidal+layout=halves", "sinusoidal+layout=halves+spacing=tensor2tensor+offset=2")


@pytest.mark.parametrize("name", ENCODER_DECODERS)
def test_every_attention_layout_computes_the_imported_function(name):
    model = zoo.from_hf(reference(name))
    src, tgt, _, _ = inputs(model.spec)
    with torch.no_grad():
        for attention in zoo.registry("attention").names():
            torch.testing.assert_close(zoo.convert(model, attention=attention).eval()(src, tgt), model(src, tgt),
                                       rtol=1e-5, atol=1e-5)  # float rounding of another kernel


@pytest.mark.parametrize("name", ENCODER_DECODERS)
def test_the_trained_parameters_are_the_references(name):
    ref = reference(name)
    model = zoo.from_hf(ref)
    assert model.num_parameters() == trained(ref) == exact_parameters(model.spec, buffers=False)


def ended(ids: torch.Tensor, eos: int) -> list[list[int]]:
    """Each row up to its first eos after the start token. transformers' beam search fills the rest
    with eos where the pad id is 0 (`pad_token_id or eos_token_id` on a tensor 0); the zoo, with pad."""
    rows = []
    for row in ids.tolist():
        end = row.index(eos, 1) + 1 if eos in row[1:] else len(row)
        rows.append(row[:end])
    return rows


def decode_both(ref, model, **settings):
    """Both decodings, and the zoo's ids after each row's eos (all of them pad)."""
    src, _, mask, _ = inputs(model.spec, seed=2)
    spec = model.spec
    expected = ref.generate(input_ids=src, attention_mask=mask, max_new_tokens=8, do_sample=False,
                            suppress_tokens=never_emitted(spec), forced_eos_token_id=None, forced_bos_token_id=None,
                            use_cache=False, **settings)  # its cache cannot hold T5 stacks of unequal depth
    settings.pop("early_stopping", None)
    generated = model.generate(src, max_new_tokens=8, **settings)
    after = [token for row, kept in zip(generated.tolist(), ended(generated, spec.eos_id)) for token in row[len(kept):]]
    assert set(after) <= {spec.pad_id}
    return ended(expected, spec.eos_id), ended(generated, spec.eos_id)


@pytest.mark.parametrize("name", ENCODER_DECODERS)
def test_greedy_decoding_is_the_references_token_for_token(name):
    ref = reference(name)
    model = zoo.from_hf(ref)
    expected, generated = decode_both(ref, model, num_beams=1)
    assert generated == expected
    assert all(row[0] == model.spec.bos_id for row in generated), "decoding starts from the reference's start token"
    assert len({len(row) for row in generated}) >= 2, "rows end at different steps"


@pytest.mark.parametrize("name", ENCODER_DECODERS)
@pytest.mark.parametrize("beams, length_penalty", [(2, 1.0), (3, 0.6), (4, 1.5)])
def test_beam_search_is_the_references_with_matching_settings(name, beams, length_penalty):
    """The zoo's beam search stops a source at k finished hypotheses: transformers' early_stopping."""
    ref = reference(name)
    model = zoo.from_hf(ref)
    expected, generated = decode_both(ref, model, num_beams=beams, length_penalty=length_penalty, early_stopping=True)
    assert generated == expected


@pytest.mark.parametrize("name", ENCODER_DECODERS)
def test_to_hf_gives_back_the_same_weights_and_function(name):
    ref = reference(name)
    back = zoo.to_hf(zoo.from_hf(ref), family=family_of(ref).name)  # mT5 computes what T5 1.1 does
    assert type(back) is type(ref)
    mine, theirs = back.state_dict(), ref.state_dict()
    assert mine.keys() == theirs.keys()
    assert all(torch.equal(mine[key], theirs[key]) for key in theirs), "a weight changed on the way"
    assert trained(back) == trained(ref)
    spec = zoo.from_hf(ref).spec
    torch.testing.assert_close(reference_logits(back.eval(), spec), reference_logits(ref, spec), rtol=0, atol=0)


PUBLISHED_ENCODER_DECODERS = {"t5": (32128, 60_506_624), "t5-v1_1": (32128, 76_961_152),
                              "mt5": (250112, 300_176_768), "bart": (50265, 139_420_416),
                              "marian": (58101, 73_886_208), "pegasus": (96103, 568_699_904),
                              "m2m100": (128112, 483_905_536)}
"""Each encoder-decoder preset's published vocabulary and parameter count."""


@pytest.mark.parametrize("name", PUBLISHED_ENCODER_DECODERS)
def test_each_preset_is_its_reference_architecture(name):
    """At the preset's own sizes (built on the meta device, so nothing is allocated): the spec
    from_hf reads from the reference is the preset's, but for the vocabulary and the special ids,
    which come from the tokenizer; and at the published vocabulary, the published size."""
    preset = zoo.spec(name, vocab_size=1000)
    with torch.device("meta"):
        ref = FAMILIES[name.split("-")[0]].reference()(FAMILIES[name.split("-")[0]].config(preset))
        if name in ("t5-v1_1", "mt5"):
            untied(ref)
    fields = family_of(ref).spec_fields(ref)
    ids = {"pad_id": 1, "bos_id": 2, "eos_id": 2} if name == "m2m100" else {"pad_id": 0, "bos_id": 1, "eos_id": 2}
    read = zoo.spec("vaswani2017", **{**fields, **ids})  # M2M100's positions follow its pad id: its own ids
    assert read == preset and read.name == preset.name
    assert exact_parameters(preset, buffers=False) == trained(ref)
    published = PUBLISHED_ENCODER_DECODERS[name]
    assert exact_parameters(zoo.spec(name, vocab_size=published[0]), buffers=False) == published[1]


@pytest.mark.parametrize("name", list(FAMILIES))
def test_every_family_names_a_preset_that_is_its_architecture(name):
    """A family without its preset, or whose preset it cannot express, fails here at once (it was
    caught only by the 140 s benchmark smoke): the preset at a tiny size goes to the family's
    reference class and comes back as the same model."""
    family = FAMILIES[name]
    ids = {"pad_id": 0, "bos_id": 1, "eos_id": 2}
    kv = zoo.spec(family.preset_name, vocab_size=100, **ids).attn.n_kv_heads
    size = {"d_model": 32, "n_heads": 2, "head_width": 16, "d_ff": 128, "n_encoder_layers": 1, "n_decoder_layers": 1,
            "n_kv_heads": math.gcd(kv or 2, 2)}
    try:
        spec = zoo.spec(family.preset_name, vocab_size=100, **size)
    except zoo.ConfigError:  # a tokenizer's ids past the tiny vocabulary
        spec = zoo.spec(family.preset_name, vocab_size=100, **size, **ids)
    reference = zoo.to_hf(zoo.build(spec, seed=0), family=name)
    assert type(reference) is family.reference()
    back = zoo.from_hf(reference, pad_id=spec.pad_id).spec

    def each_layer(model_spec):
        return [model_spec.at_layer(stack, i).axes_name
                for stack, depth in zip(("encoder", "decoder"), model_spec.depths, strict=True) for i in range(depth)]
    assert each_layer(back) == each_layer(spec), "each layer read back as the preset builds it"


def test_a_reference_weight_with_no_place_in_the_zoo_is_an_error():
    ref = reference("bart")
    ref.model.encoder.layers[0].register_parameter("extra", nn.Parameter(torch.zeros(3)))
    with pytest.raises(zoo.ConfigError, match=r"from_hf \(bart\): model\.encoder\.layers\.0\.extra has no place in the zoo"):
        zoo.from_hf(ref)


@pytest.mark.parametrize("row, said", [
    ({"self_attn.out.bias": "self_attn.o_proj.weight"}, r"the reference's model\.layers\.0\.self_attn\.o_proj\.weight has "
     r"no zoo weight decoder\.layers\.0\.self_attn\.out\.bias"),  # a row of a tensor only the reference has
    ({"self_attn.out.weight": "self_attn.o_proj.bias"}, r"model\.layers\.0\.self_attn\.o_proj\.bias is not a weight "
     r"of the reference"),  # a row of a tensor only the zoo has
])
def test_a_table_row_only_one_side_has_is_an_error_and_one_neither_has_is_left_out(monkeypatch, row, said):
    spec = zoo.spec("llama", vocab_size=VOCAB, d_model=16, n_heads=2, head_width=8, d_ff=32, n_decoder_layers=1,
                    pad_id=0, bos_id=1, eos_id=2)
    llama = FAMILIES["llama"]
    neither = llama.names.derive(layer={"ffn.linear9.*": "mlp.nowhere.*"})  # a row of a part neither model has
    table, _ = zoo.interop.hf.mapped_state(
        llama.derive("llama", "LlamaForCausalLM", names=neither), spec, set(canonical_state(zoo.build(spec))),
        zoo.interop.hf.reference_tensors(zoo.to_hf(zoo.build(spec), family="llama")), "to_hf")
    assert "decoder.layers.0.ffn.linear9.weight" in neither(spec) and table == llama.names(spec)
    monkeypatch.setitem(FAMILIES, "llama", llama.derive("llama", "LlamaForCausalLM", names=neither.derive(layer=row)))
    with pytest.raises(zoo.ConfigError, match=said):
        zoo.to_hf(zoo.build(spec), family="llama")


def test_a_marian_position_table_that_is_not_the_sinusoids_is_an_error():
    ref = reference("marian")
    with torch.no_grad():
        ref.model.encoder.embed_positions.weight[3, 0] += 0.5
    with pytest.raises(zoo.ConfigError, match=r"model\.encoder\.embed_positions\.weight differs from the table the zoo computes"):
        zoo.from_hf(ref)


def test_another_reference_class_names_the_ones_taken():
    taken = sorted(family.reference().__name__ for family in FAMILIES.values())
    assert {"T5ForConditionalGeneration", "MT5ForConditionalGeneration", "Qwen3ForCausalLM"} <= set(taken)
    with pytest.raises(zoo.ConfigError) as err:
        zoo.from_hf(nn.Linear(2, 2))
    assert str(err.value) == f"from_hf takes {', '.join(taken)}; got Linear"


def test_a_spec_no_family_expresses_names_the_fields_and_the_nearest_family():
    model = zoo.build("t5", vocab_size=VOCAB, d_model=16, n_heads=2, head_width=8, d_ff=32, n_encoder_layers=1,
                      n_decoder_layers=1, position="rope", bias=True)
    with pytest.raises(zoo.ConfigError) as err:
        zoo.to_hf(model)
    assert "is not a t5 model (the nearest family); it cannot express" in str(err.value)
    assert "position 'rope' (t5: 't5')" in str(err.value) and "bias True (t5: False)" in str(err.value)
    with pytest.raises(zoo.ConfigError) as err:
        zoo.to_hf(model, family="no_such_family")
    assert str(err.value) == f"to_hf family 'no_such_family'; choices: {', '.join(sorted(FAMILIES))}"
    layernorm = zoo.build("t5", vocab_size=VOCAB, d_model=16, n_heads=2, head_width=8, d_ff=32, n_encoder_layers=1,
                          n_decoder_layers=1, norm_type="layernorm")
    with pytest.raises(zoo.ConfigError, match=r"it cannot express norm_type 'layernorm' \(t5: 'rmsnorm'\)$"):
        zoo.to_hf(layernorm)


def test_a_zoo_trained_t5_goes_to_transformers_and_back():
    """The zoo's own initialization (not the reference's) survives both ways."""
    model = zoo.build("t5-v1_1", vocab_size=VOCAB, d_model=16, n_heads=2, head_width=8, d_ff=24, n_encoder_layers=1,
                      n_decoder_layers=2, seed=5).eval()
    again = zoo.from_hf(zoo.to_hf(model))
    assert again.spec == model.spec
    before, after = canonical_state(model), canonical_state(again)
    assert all(torch.equal(before[key], after[key]) for key in before)


def test_a_reference_the_spec_cannot_hold_says_why():
    ref = hf.BartForConditionalGeneration(hf.BartConfig(vocab_size=VOCAB, **{**SMALL, "decoder_ffn_dim": 48}))
    with pytest.raises(zoo.ConfigError, match=r"from_hf \(bart\): BART with stacks of different widths \(attention heads 2 "
                                              r"and 2, ffn 32 and 48\) has no zoo spec"):
        zoo.from_hf(ref)


def test_without_transformers_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # what `import transformers` meets where it is not installed
    with pytest.raises(zoo.ConfigError, match=r"t5 needs transformers \(.*transformers.*\): pip install 'zoo\[hf\]'"):
        zoo.to_hf(zoo.build("t5", vocab_size=VOCAB, d_model=16, n_heads=2, head_width=8, d_ff=32, n_encoder_layers=1,
                            n_decoder_layers=1), family="t5")


def test_a_family_whose_class_the_installed_transformers_lacks_says_so(monkeypatch):
    monkeypatch.setitem(FAMILIES, "t5", FAMILIES["t5"].derive("t5", "T5ForTomorrow"))
    with pytest.raises(zoo.ConfigError, match=r"t5 needs transformers' T5ForTomorrow, which transformers \S+ lacks"):
        zoo.to_hf(zoo.build("t5", vocab_size=VOCAB, d_model=16, n_heads=2, head_width=8, d_ff=32, n_encoder_layers=1,
                            n_decoder_layers=1), family="t5")
