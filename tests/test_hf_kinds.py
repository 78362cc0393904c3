"""The decoder-only and encoder-only references of transformers (GPT-2, GPT-NeoX, Llama, Mistral, Qwen2,
Qwen3, OLMo 2, Gemma 1-3, Phi, GPT-J, StableLM, Persimmon, Cohere, OPT, BLOOM, Falcon, MPT, BERT,
RoBERTa, DistilBERT, ELECTRA, ModernBERT) in the zoo: the same logits with padding, the same greedy
decoding for the decoders, the same count of trained parameters, an exact round trip, presets that
are their architectures (tests/test_hf_choices.py: what their configurations hold beyond that). Built
from small random configurations, offline, with every weight moved away from its initial value."""

import copy
import functools
import re

import pytest
import torch
import transformers as hf
from hf_references import DECODERS, IDS, ONE_PER_KIND, ONE_STACK, VOCAB

import zoo
from zoo.interop.hf import FAMILIES
from zoo.model.generate import never_emitted
from zoo.model.size_checks import exact_parameters

ONE_OF_TWO = {"electra-one-width": "electra", "phi3": "phi3"}
"""References whose spec another family expresses too (ELECTRA without factorized embeddings is
BERT's layout, Phi-3 without a window or partial rotation Llama's, which to_hf picks first): to_hf
is asked for theirs."""


@functools.cache
@torch.no_grad()
def prepared(name: str):
    torch.manual_seed(0)
    model = ONE_STACK[name]()
    for param in model.parameters():
        param.add_(torch.randn_like(param) * 0.3)
    model.eval()
    if name in DECODERS:  # eos made likely enough that greedy rows end at different steps
        row = model.get_output_embeddings().weight[2]
        for _ in range(60):
            ends = [2 in out[1:] for out in zoo.from_hf(model).generate(batch(seed=3), max_new_tokens=8).tolist()]
            if any(ends) and not all(ends):
                break
            row.mul_(1.15 if not any(ends) else 0.9)
    return model


def reference(name: str):
    return copy.deepcopy(prepared(name))


def batch(seed: int = 1) -> torch.Tensor:
    """Right-padded rows of different lengths, starting with bos."""
    gen = torch.Generator().manual_seed(seed)
    lengths = [7, 3, 5, 1]
    ids = torch.zeros(len(lengths), max(lengths), dtype=torch.long)
    for row, n in enumerate(lengths):
        ids[row, 0] = 1
        ids[row, 1:n] = torch.randint(3, VOCAB, (n - 1,), generator=gen)
    return ids


@pytest.mark.parametrize("name", ONE_STACK)
def test_the_logits_are_the_references_with_padding(name):
    ref, ids = reference(name), batch()
    model = zoo.from_hf(ref)
    with torch.no_grad():
        expected = ref(input_ids=ids, attention_mask=(ids != 0).long()).logits
        got = model(ids)
    real = ids != 0
    torch.testing.assert_close(got[real], expected[real], atol=1e-5, rtol=0)
    for attention in zoo.registry("attention").names():
        with torch.no_grad():
            torch.testing.assert_close(zoo.convert(model, attention=attention)(ids)[real], expected[real],
                                       atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", ONE_STACK)
def test_the_trained_parameters_are_the_references(name):
    ref = reference(name)
    model = zoo.from_hf(ref)
    assert model.num_parameters() == sum(p.numel() for p in ref.parameters()) == exact_parameters(model.spec,
                                                                                                   buffers=False)


@pytest.mark.parametrize("name", DECODERS)
def test_greedy_decoding_is_the_references_token_for_token(name):
    """transformers decodes left-padded prompts, the zoo right-padded ones: the same rows."""
    ref, ids = reference(name), batch(seed=3)
    model = zoo.from_hf(ref)
    lengths = (ids != 0).sum(1)
    left = torch.zeros_like(ids)
    for row, n in enumerate(lengths.tolist()):
        left[row, ids.size(1) - n :] = ids[row, :n]
    expected = ref.generate(input_ids=left, attention_mask=(left != 0).long(), max_new_tokens=8, do_sample=False,
                            suppress_tokens=never_emitted(model.spec), eos_token_id=2, pad_token_id=0)
    got = model.generate(ids, max_new_tokens=8)
    for ours, theirs in zip(got.tolist(), expected.tolist(), strict=True):
        strip = lambda row: [t for t in row if t != 0]
        assert strip(ours) == strip(theirs)
    assert any(2 in row for row in got.tolist()) and any(2 not in row[1:] for row in got.tolist()), \
        "some rows end at eos and some run to the limit"


@pytest.mark.parametrize("name", ONE_STACK)
def test_to_hf_gives_back_the_same_weights_and_function(name):
    ref = reference(name)
    back = zoo.to_hf(zoo.from_hf(ref), family=ONE_OF_TWO.get(name))
    assert type(back) is type(ref)
    expected, got = ref.state_dict(), back.state_dict()
    assert expected.keys() == got.keys()
    for key, tensor in expected.items():
        assert torch.equal(got[key], tensor), key


PUBLISHED = [
    ("gpt2", lambda: hf.GPT2Config(pad_token_id=0), {"bos_id": 50256, "eos_id": 50256}, 124_439_808),
    ("llama", lambda: hf.LlamaConfig(vocab_size=32000, hidden_size=4096, intermediate_size=11008,
                                     num_hidden_layers=32, num_attention_heads=32, max_position_embeddings=4096,
                                     pad_token_id=0), {}, 6_738_415_616),
    ("pythia", lambda: hf.GPTNeoXConfig(vocab_size=50304, hidden_size=512, num_hidden_layers=6, num_attention_heads=8,
                                        intermediate_size=2048, max_position_embeddings=2048, bos_token_id=0,
                                        eos_token_id=0, pad_token_id=1), {"bos_id": 0, "eos_id": 0, "pad_id": 1}, 70_426_624),
    ("mistral", lambda: hf.MistralConfig(vocab_size=32000, hidden_size=4096, intermediate_size=14336,
                                         num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                                         max_position_embeddings=32768, sliding_window=4096, pad_token_id=0), {},
     7_241_732_096),
    ("qwen3", lambda: hf.Qwen3Config(vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                                     num_attention_heads=16, num_key_value_heads=8, head_dim=128,
                                     max_position_embeddings=40960, tie_word_embeddings=True, pad_token_id=0,
                                     rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0},
                                     bos_token_id=151643, eos_token_id=151645), {"bos_id": 151643, "eos_id": 151645},
     596_049_920),
    ("qwen2", lambda: hf.Qwen2Config(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                                     num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768,
                                     tie_word_embeddings=True, rope_parameters={"rope_type": "default",
                                                                                "rope_theta": 1_000_000.0},
                                     pad_token_id=0, bos_token_id=151643, eos_token_id=151643),
     {"bos_id": 151643, "eos_id": 151643}, 494_032_768),
    ("olmo2", lambda: hf.Olmo2Config(vocab_size=100352, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                                     num_attention_heads=16, max_position_embeddings=4096, rms_norm_eps=1e-6,
                                     rope_parameters={"rope_type": "default", "rope_theta": 500_000.0}, pad_token_id=1,
                                     bos_token_id=100257, eos_token_id=100257),
     {"bos_id": 100257, "eos_id": 100257, "pad_id": 1}, 1_484_916_736),
    ("gemma", lambda: hf.GemmaConfig(vocab_size=256000, hidden_size=2048, intermediate_size=16384, num_hidden_layers=18,
                                     num_attention_heads=8, num_key_value_heads=1, head_dim=256),
     {"bos_id": 2, "eos_id": 1}, 2_506_172_416),
    ("gemma2", lambda: hf.Gemma2Config(vocab_size=256000, hidden_size=2304, intermediate_size=9216, num_hidden_layers=26,
                                       num_attention_heads=8, num_key_value_heads=4, head_dim=256),
     {"bos_id": 2, "eos_id": 1}, 2_614_341_888),
    ("gemma3", lambda: hf.Gemma3TextConfig(vocab_size=262144, hidden_size=1152, intermediate_size=6912,
                                           num_hidden_layers=26, num_attention_heads=4, num_key_value_heads=1,
                                           head_dim=256, sliding_window=512, max_position_embeddings=32768),
     {"bos_id": 2, "eos_id": 1}, 999_885_952),
    ("phi3", lambda: hf.Phi3Config(vocab_size=32064, hidden_size=3072, intermediate_size=8192, num_hidden_layers=32,
                                   num_attention_heads=32, max_position_embeddings=4096, sliding_window=2047,
                                   bos_token_id=1, eos_token_id=32000, pad_token_id=0),  # its pad is its eos
     {"bos_id": 1, "eos_id": 32000}, 3_821_079_552),
    ("phi", lambda: hf.PhiConfig(vocab_size=51200, hidden_size=2048, intermediate_size=8192, num_hidden_layers=24,
                                 num_attention_heads=32, pad_token_id=0), {}, 1_418_270_720),
    ("gptj", lambda: hf.GPTJConfig(pad_token_id=0), {"bos_id": 50256, "eos_id": 50256}, 6_050_882_784),
    ("stablelm", lambda: hf.StableLmConfig(vocab_size=100352, hidden_size=2048, intermediate_size=5632,
                                           num_hidden_layers=24, num_attention_heads=32, num_key_value_heads=32,
                                           use_qkv_bias=True, max_position_embeddings=4096, pad_token_id=0,
                                           bos_token_id=100257, eos_token_id=100257),
     {"bos_id": 100257, "eos_id": 100257}, 1_644_515_328),
    ("persimmon", lambda: hf.PersimmonConfig(vocab_size=262144, hidden_size=4096, intermediate_size=16384,
                                             num_hidden_layers=36, num_attention_heads=64, max_position_embeddings=16384,
                                             rope_parameters={"rope_type": "default", "rope_theta": 25000.0,
                                                              "partial_rotary_factor": 0.5}, pad_token_id=0),
     {}, 9_397_175_296),
    ("cohere", lambda: hf.CohereConfig(vocab_size=256000, hidden_size=8192, intermediate_size=22528,
                                       num_hidden_layers=40, num_attention_heads=64, num_key_value_heads=64,
                                       max_position_embeddings=8192, logit_scale=0.0625, bos_token_id=5,
                                       eos_token_id=255001, pad_token_id=0,
                                       rope_parameters={"rope_type": "default", "rope_theta": 8_000_000.0}),
     {"bos_id": 5, "eos_id": 255001}, 34_980_831_232),
    ("opt", lambda: hf.OPTConfig(vocab_size=50272, hidden_size=768, ffn_dim=3072, num_hidden_layers=12,
                                 num_attention_heads=12, max_position_embeddings=2048),
     {"bos_id": 2, "eos_id": 2, "pad_id": 1}, 125_239_296),
    ("bloom", lambda: hf.BloomConfig(vocab_size=250880, hidden_size=1024, n_layer=24, n_head=16, bos_token_id=1,
                                     eos_token_id=2, pad_token_id=3), {"pad_id": 3}, 559_214_592),
    ("falcon", lambda: hf.FalconConfig(vocab_size=65024, hidden_size=4544, num_hidden_layers=32, num_attention_heads=71,
                                       pad_token_id=0), {"bos_id": 11, "eos_id": 11}, 6_921_720_704),
    ("mpt", lambda: hf.MptConfig(vocab_size=50432, d_model=4096, n_layers=32, n_heads=32, max_seq_len=2048,
                                 pad_token_id=1, bos_token_id=0, eos_token_id=0),
     {"bos_id": 0, "eos_id": 0, "pad_id": 1}, 6_649_286_656),
    ("modernbert", lambda: hf.ModernBertConfig(), {"pad_id": 50283, "bos_id": 50281, "eos_id": 50282}, 149_655_232),
    ("roberta", lambda: hf.RobertaConfig(vocab_size=50265, max_position_embeddings=514, type_vocab_size=1,
                                         layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0, eos_token_id=2), {},
     124_697_433),
    ("distilbert", lambda: hf.DistilBertConfig(), {}, 66_985_530),
    ("electra", lambda: hf.ElectraConfig(vocab_size=30522, embedding_size=128, hidden_size=256, intermediate_size=1024,
                                         num_attention_heads=4, num_hidden_layers=12), {}, 13_546_682),
    ("bert", lambda: hf.BertConfig(), {}, 109_514_298),
]
"""Each decoder and encoder preset at its published size: (preset, its reference configuration,
its tokenizer's special ids, the published parameter count)."""


def test_every_family_is_held_to_a_published_size():
    """A family added to the registry is held to its published size here or in test_hf's
    encoder-decoders; none is left out by a forgotten line."""
    from test_hf import PUBLISHED_ENCODER_DECODERS

    held = {name for name, *_ in PUBLISHED} | set(PUBLISHED_ENCODER_DECODERS)
    assert {family.preset_name for family in FAMILIES.values()} <= held


@pytest.mark.parametrize("name, config, ids, count", PUBLISHED)
def test_each_preset_is_its_reference_architecture(name, config, ids, count):
    """GPT-2 (124M), Pythia 70M, Llama 2 7B, Mistral 7B, Qwen3 0.6B, Qwen2.5 0.5B, OLMo 2 1B, Gemma 2B,
    Gemma 2 2B, Gemma 3 1B, Phi-3-mini, Phi-1.5, GPT-J 6B, StableLM 2 1.6B, Persimmon 8B, Command R 35B, OPT-125m,
    BLOOM-560m, Falcon 7B, MPT 7B, ModernBERT-base, RoBERTa-base, DistilBERT-base, ELECTRA's small
    generator and BERT-base (uncased) at their published sizes, with their tokenizers' vocabularies and
    special ids."""
    cls = next(family for family in FAMILIES.values() if family.preset_name == name).reference()
    with torch.device("meta"):
        ref = cls(config())
    assert sum(p.numel() for p in ref.parameters()) == count
    preset = zoo.spec(name, vocab_size=ref.config.vocab_size, **ids)
    assert exact_parameters(preset, buffers=False) == count
    expected = zoo.specs.catalog.validated(zoo.interop.hf.family_of(ref).spec_fields(ref))
    assert zoo.interop.hf.expressible(expected) == zoo.interop.hf.expressible(preset)


@pytest.mark.parametrize("build", [
    lambda: hf.BertForMaskedLM(hf.BertConfig(vocab_size=VOCAB, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                             intermediate_size=24, is_decoder=True)),
    lambda: hf.RobertaForMaskedLM(hf.RobertaConfig(vocab_size=VOCAB, hidden_size=16, num_hidden_layers=1,
                                                   num_attention_heads=2, intermediate_size=24, is_decoder=True)),
], ids=["bert", "roberta"])
def test_a_bert_like_model_that_attends_causally_is_refused_not_read_as_an_encoder(build):
    with pytest.raises(zoo.InteropError, match=r"with is_decoder True \(the zoo reads false: the zoo's encoder attends "
                                               r"both ways.*\) has no zoo spec"):
        zoo.from_hf(build())


UNFIT = [  # (reference, config field, a value no zoo spec reads, the other fields the same refusal checks)
    ("gpt_neox", "attention_bias", False, ["hidden_act"]),
    ("gpt_neox", "hidden_act", "tanh", ["attention_bias"]),
    ("llama", "mlp_bias", True, ["attention_bias", "hidden_act"]),
    ("cohere", "attention_bias", True, ["hidden_act"]),
    ("gemma", "attention_bias", True, ["hidden_activation"]),
    ("gpt2", "reorder_and_upcast_attn", True, ["scale_attn_by_inverse_layer_idx", "scale_attn_weights"]),
    ("bloom", "apply_residual_connection_post_layernorm", True, ["slow_but_exact"]),
    ("mpt", "attn_config.clip_qkv", 5.0, ["alibi_bias_max"]),
    ("opt", "enable_bias", False, ["layer_norm_elementwise_affine"]),
    ("phi", "qk_layernorm", True, ["num_key_value_heads"]),
    ("gptj", "embd_pdrop", 0.3, ["resid_pdrop", "rotary_dim"]),
    ("modernbert", "decoder_bias", False, ["hidden_activation", "classifier_activation", "mlp_bias"]),
    ("bert", "is_decoder", True, ["add_cross_attention"]),
]


@pytest.mark.parametrize("name, field, value, others", UNFIT, ids=[f"{n}-{f}" for n, f, _, _ in UNFIT])
def test_a_refusal_names_the_field_that_does_not_fit_and_no_other(name, field, value, others):
    """A refusal that listed every field it checks ("hidden_act 'gelu' or without attention_bias")
    sent the user to a field that was fine; it names the one set, with its value."""
    reference = ONE_STACK[name]()
    config = copy.deepcopy(reference.config)
    holder, _, last = field.rpartition(".")
    setattr(getattr(config, holder) if holder else config, last, value)
    with pytest.raises(zoo.InteropError) as refused:
        zoo.from_hf(type(reference)(config))
    said = str(refused.value)
    assert f" with {last if not holder else field} {value!r} (the zoo reads " in said, said
    assert not any(other in said for other in others), said


@pytest.mark.parametrize("build, said", [
    (lambda: hf.CohereForCausalLM(hf.CohereConfig(vocab_size=VOCAB, hidden_size=16, intermediate_size=24,
                                                  num_hidden_layers=1, num_attention_heads=2, logit_scale=None, **IDS)),
     "Cohere logit_scale None: transformers' model multiplies its logits by it"),
    (lambda: hf.BertForMaskedLM(hf.BertConfig(vocab_size=VOCAB, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                              intermediate_size=24, type_vocab_size=0)),
     "BERT type_vocab_size 0: its embeddings add the row of token type 0"),
    (lambda: hf.M2M100ForConditionalGeneration(hf.M2M100Config(
        vocab_size=VOCAB, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=24, decoder_ffn_dim=24, **IDS)),
     "M2M100 with pad_token_id 0 has no zoo spec"),
], ids=["cohere", "bert", "m2m100"])
def test_a_configuration_the_zoo_cannot_read_is_one_named_refusal(build, said):
    with pytest.raises(zoo.InteropError, match=re.escape(said)):
        zoo.from_hf(build())


def test_a_roberta_whose_pad_id_is_past_the_first_three_ids_imports_exactly():
    ref = hf.RobertaForMaskedLM(hf.RobertaConfig(vocab_size=VOCAB, hidden_size=16, num_hidden_layers=1,
                                                 num_attention_heads=2, intermediate_size=24, pad_token_id=5)).eval()
    ids = torch.tensor([[0, 6, 7, 8, 2, 5]])
    with torch.no_grad():
        ours, theirs = zoo.from_hf(ref).eval()(ids), ref(ids, attention_mask=ids != 5).logits
    torch.testing.assert_close(ours[:, :5], theirs[:, :5], atol=1e-5, rtol=1e-5)  # at the real tokens


def test_a_reference_without_a_pad_token_asks_for_one():
    ref = hf.GPT2LMHeadModel(hf.GPT2Config(vocab_size=VOCAB, n_embd=16, n_layer=1, n_head=2, n_positions=40,
                                           bos_token_id=1, eos_token_id=2))
    with pytest.raises(zoo.ConfigError, match=r"from_hf \(gpt2\): pad_id"):
        zoo.from_hf(ref)
    assert zoo.from_hf(ref, pad_id=0).spec.pad_id == 0


def test_a_reference_without_start_and_end_tokens_asks_for_them():
    ref = hf.GPT2LMHeadModel(hf.GPT2Config(vocab_size=VOCAB, n_embd=16, n_layer=1, n_head=2, n_positions=40,
                                           bos_token_id=None, eos_token_id=None, pad_token_id=0))
    with pytest.raises(zoo.InteropError, match=re.escape("from_hf (gpt2): bos_id, eos_id: the reference's configuration "
                                                         "has no bos and eos token (bos_token_id and eos_token_id None)"
                                                         ", and the zoo's decoding starts and stops at them; give "
                                                         "zoo.from_hf(model, bos_id=ID, eos_id=ID)")):
        zoo.from_hf(ref)
    assert (zoo.from_hf(ref, bos_id=1, eos_id=2).spec.bos_id, zoo.from_hf(ref, bos_id=1, eos_id=2).spec.eos_id) == (1, 2)


@pytest.mark.parametrize("name", ONE_PER_KIND.values())  # expressible's rule, the same for every family of a kind
@pytest.mark.parametrize("layers", [1, 12])
def test_to_hf_ignores_the_layer_count_of_the_stack_the_kind_lacks(name, layers):
    """The probe's case: a decoder identical to GPT-2 whose spec holds n_encoder_layers 1 (the
    decoder kind ignores it) was refused; an encoder likewise with n_decoder_layers."""
    ref = reference(name)
    ours = zoo.from_hf(ref)
    ignored = "n_decoder_layers" if ours.spec.kind == "encoder" else "n_encoder_layers"
    same = zoo.build(ours.spec.model_copy(update={ignored: layers}).model_dump())
    same.load_state_dict(ours.state_dict())
    back = zoo.to_hf(same.eval(), family=ONE_OF_TWO.get(name))
    assert type(back) is type(ref)
    for key, tensor in ref.state_dict().items():
        assert torch.equal(back.state_dict()[key], tensor), key


def test_a_reference_that_pads_with_its_eos_token_names_the_argument_that_imports_it():
    """Phi-3's published configuration pads with its end-of-text token; the zoo's batches need a pad
    apart from eos, and the refusal said so without naming from_hf's pad_id."""
    config = hf.Phi3Config(vocab_size=VOCAB, hidden_size=16, intermediate_size=24, num_hidden_layers=1,
                           num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=40, bos_token_id=1,
                           eos_token_id=2, pad_token_id=2)
    ref = hf.Phi3ForCausalLM(config)
    with pytest.raises(zoo.InteropError, match=re.escape("from_hf (phi3): pad_id: the reference's configuration pads with "
                                                         "its eos token (2), and the zoo's batches need a pad apart from "
                                                         "eos (a padded row must not read as ended); give "
                                                         "zoo.from_hf(model, pad_id=ID)")):
        zoo.from_hf(ref)
    assert zoo.from_hf(ref, pad_id=0).spec.pad_id == 0
