"""What transformers' configurations hold beyond the layout of each family: the choices the zoo
refuses (one line naming each), per-layer rules read by what they change, dropout by site both
ways, and a reference under test for every family the zoo reads."""

import functools

import pytest
import torch
import transformers as hf
from hf_references import IDS, REFERENCES, VOCAB
from test_hf_kinds import batch

import zoo

REFUSED = {
    "stablelm-qk-layernorm": (lambda: hf.StableLmForCausalLM(hf.StableLmConfig(
        vocab_size=VOCAB, hidden_size=16, intermediate_size=24, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=2, qk_layernorm=True, **IDS)), r"from_hf \(stablelm\): qk_layernorm: StableLM's per-head"),
    "opt-350m-projections": (lambda: hf.OPTForCausalLM(hf.OPTConfig(
        vocab_size=VOCAB, hidden_size=16, ffn_dim=24, num_hidden_layers=1, num_attention_heads=2, word_embed_proj_dim=8,
        **IDS)), r"from_hf \(opt\): word_embed_proj_dim 8 beside hidden_size 16 \(OPT-350m's projected embeddings\)"),
    "falcon-alibi": (lambda: hf.FalconForCausalLM(hf.FalconConfig(
        vocab_size=VOCAB, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, alibi=True, **IDS)),
        r"from_hf \(falcon\): alibi: Falcon's ALiBi divides the slopes by sqrt\(head width\)"),
    "mpt-clip-qkv": (lambda: hf.MptForCausalLM(hf.MptConfig(
        vocab_size=VOCAB, d_model=16, n_layers=1, n_heads=2, attn_config={"clip_qkv": 8.0}, **IDS)),
        r"from_hf \(mpt\): MPT with attn_config.clip_qkv 8.0 \(the zoo reads None\) has no zoo spec"),
    "bloom-residual-after-norm": (lambda: hf.BloomForCausalLM(hf.BloomConfig(
        vocab_size=VOCAB, hidden_size=16, n_layer=1, n_head=2, apply_residual_connection_post_layernorm=True, **IDS)),
        r"from_hf \(bloom\): BLOOM with apply_residual_connection_post_layernorm"),
}


@pytest.mark.parametrize("name", REFUSED)
def test_a_family_choice_the_zoo_refuses_is_one_line_naming_it(name):
    build, message = REFUSED[name]
    with pytest.raises(zoo.ConfigError, match=message) as err:
        zoo.from_hf(build())
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("preset, layers, kv, cls", [("gemma3", 4, 1, hf.Gemma3ForCausalLM),
                                                      ("gemma2", 1, 1, hf.Gemma2ForCausalLM),
                                                      ("modernbert", 1, 2, hf.ModernBertForMaskedLM)])
def test_to_hf_reads_per_layer_rules_by_what_they_change_in_the_layers_there_are(preset, layers, kv, cls):
    """Gemma 3's every-sixth-layer rule selects none of 4 layers; ModernBERT's global first layer is
    the only one of 1, so its rope base is the spec's own there: transformers' configurations write
    these without a rule, and to_hf still finds the family, with the same function."""
    spec = zoo.spec(preset, vocab_size=VOCAB, d_model=16, n_heads=2, head_width=8, n_kv_heads=kv, d_ff=24,
                    n_encoder_layers=layers, n_decoder_layers=layers, pad_id=0, bos_id=1, eos_id=2)
    model = zoo.build(spec, seed=0).eval()
    back = zoo.to_hf(model)
    assert type(back) is cls
    ids = batch()
    with torch.no_grad():
        torch.testing.assert_close(zoo.from_hf(back, pad_id=0)(ids)[ids != 0], model(ids)[ids != 0], atol=1e-5, rtol=0)


DROPPING = {  # a reference with its dropout rates apart, and the rate the zoo reads at each site
    "llama": (lambda: hf.LlamaForCausalLM(hf.LlamaConfig(
        vocab_size=VOCAB, hidden_size=16, intermediate_size=24, num_hidden_layers=1, num_attention_heads=2,
        attention_dropout=0.2, **IDS)), {"attention": 0.2, "activation": 0.0, "residual": 0.0, "embedding": 0.0}),
    "gpt2": (lambda: hf.GPT2LMHeadModel(hf.GPT2Config(
        vocab_size=VOCAB, n_embd=16, n_layer=1, n_head=2, resid_pdrop=0.1, attn_pdrop=0.2, embd_pdrop=0.3, **IDS)),
        {"attention": 0.2, "activation": 0.0, "residual": 0.1, "embedding": 0.3}),
    "bert": (lambda: hf.BertForMaskedLM(hf.BertConfig(
        vocab_size=VOCAB, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=24,
        hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.2)),
        {"attention": 0.2, "activation": 0.0, "residual": 0.1, "embedding": 0.1}),
    "opt": (lambda: hf.OPTForCausalLM(hf.OPTConfig(
        vocab_size=VOCAB, hidden_size=16, ffn_dim=24, num_hidden_layers=1, num_attention_heads=2, dropout=0.1,
        attention_dropout=0.2, **IDS)), {"attention": 0.2, "activation": 0.0, "residual": 0.1, "embedding": 0.0}),
    "bart": (lambda: hf.BartForConditionalGeneration(hf.BartConfig(
        vocab_size=VOCAB, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=24, decoder_ffn_dim=24, dropout=0.1, attention_dropout=0.2,
        activation_dropout=0.3, **IDS)), {"attention": 0.2, "activation": 0.3, "residual": 0.1, "embedding": 0.1}),
}


@pytest.mark.parametrize("name", DROPPING)
def test_each_dropout_site_takes_the_references_rate_both_ways(name):
    """Llama drops attention weights only, GPT-2 embeddings at a rate of their own, BERT and OPT no
    activations, BART activations at theirs: the zoo trains as the reference does, and to_hf writes
    the rates back."""
    build, rates = DROPPING[name]
    ref = build()
    spec = zoo.from_hf(ref, pad_id=0).spec
    assert {site: spec.dropout_at(site) for site in rates} == rates
    assert zoo.from_hf(zoo.to_hf(zoo.from_hf(ref, pad_id=0)), pad_id=0).spec == spec


@functools.cache
def families_under_test() -> set[str]:
    return {zoo.interop.hf.family_of(build()).name for build in REFERENCES.values()}


@pytest.mark.parametrize("name", zoo.interop.FAMILIES)
def test_every_family_the_zoo_reads_has_a_reference_under_test(name):
    """A family added to zoo.interop without a reference in tests/hf_references.py fails by name."""
    assert name in families_under_test()


@pytest.mark.parametrize("name", zoo.interop.FAMILIES)
def test_a_family_registered_twice_is_refused_and_the_first_stays(name):
    """A second family of a name once replaced the first in silence: from_hf and to_hf then did
    the second's mapping for every model of the first. It is refused, as a part's second is."""
    from zoo.interop.family import FAMILIES, register

    first = FAMILIES[name]
    with pytest.raises(zoo.ConfigError, match=rf"family '{name}' is already registered .*pick another name"):
        register(first.derive(name, first.transformers))
    assert FAMILIES[name] is first
