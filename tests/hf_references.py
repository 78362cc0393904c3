"""The one table of transformers' reference models the HF tests build: every family on small random
configurations (offline), by kind. tests/test_hf.py checks the encoder-decoders, tests/test_hf_kinds.py
the one-stack models, and the tests that need any reference take them from REFERENCES."""

import transformers as hf
from torch import nn

VOCAB = 12
"""A small vocabulary, so that eos is likely enough that some rows end early and some do not."""
IDS = dict(bos_token_id=1, eos_token_id=2, pad_token_id=0)
SMALL = dict(d_model=16, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2, decoder_attention_heads=2,
             encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=40)
T5_SMALL = dict(d_model=16, d_kv=6, d_ff=32, num_layers=2, num_decoder_layers=3, num_heads=2, decoder_start_token_id=0)


def untied(model):
    """T5 1.1 as its checkpoints hold it: an output projection of its own (transformers 5 ties it)."""
    model.lm_head.weight = nn.Parameter(model.shared.weight.detach().clone())
    return model


ENCODER_DECODERS = {
    "t5": lambda: hf.T5ForConditionalGeneration(hf.T5Config(vocab_size=VOCAB, **T5_SMALL)),
    "t5-v1_1": lambda: untied(hf.T5ForConditionalGeneration(hf.T5Config(
        vocab_size=VOCAB, feed_forward_proj="gated-gelu", tie_word_embeddings=False, **T5_SMALL))),
    "mt5": lambda: untied(hf.MT5ForConditionalGeneration(hf.MT5Config(vocab_size=VOCAB, **T5_SMALL))),
    "bart": lambda: hf.BartForConditionalGeneration(hf.BartConfig(vocab_size=VOCAB, **SMALL)),
    "bart-scaled": lambda: hf.BartForConditionalGeneration(hf.BartConfig(vocab_size=VOCAB, scale_embedding=True,
                                                                         activation_function="relu", **SMALL)),
    "marian": lambda: hf.MarianMTModel(hf.MarianConfig(
        vocab_size=VOCAB, pad_token_id=VOCAB - 1, eos_token_id=0, decoder_start_token_id=VOCAB - 1,
        activation_function="swish", scale_embedding=True, **SMALL)),
    "marian-two-vocabularies": lambda: hf.MarianMTModel(hf.MarianConfig(
        vocab_size=VOCAB, decoder_vocab_size=VOCAB + 3, share_encoder_decoder_embeddings=False,
        pad_token_id=VOCAB - 1, eos_token_id=0, decoder_start_token_id=VOCAB - 1, **SMALL)),
    "pegasus": lambda: hf.PegasusForConditionalGeneration(hf.PegasusConfig(
        vocab_size=VOCAB, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0, **SMALL)),  # pre-norm Marian
    "m2m100": lambda: hf.M2M100ForConditionalGeneration(hf.M2M100Config(
        vocab_size=VOCAB, pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2, **SMALL)),
}


ONE_STACK = {
    "gpt2": lambda: hf.GPT2LMHeadModel(hf.GPT2Config(vocab_size=VOCAB, n_embd=16, n_layer=2, n_head=2, n_positions=40,
                                                     **IDS)),
    "gpt2-untied": lambda: hf.GPT2LMHeadModel(hf.GPT2Config(vocab_size=VOCAB, n_embd=16, n_layer=2, n_head=2,
                                                            n_positions=40, tie_word_embeddings=False, **IDS)),
    "llama": lambda: hf.LlamaForCausalLM(hf.LlamaConfig(
        vocab_size=VOCAB, hidden_size=16, intermediate_size=40, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, rope_parameters={"rope_type": "default", "rope_theta": 500.0},
        **IDS)),
    "llama-tied-head-width": lambda: hf.LlamaForCausalLM(hf.LlamaConfig(
        vocab_size=VOCAB, hidden_size=16, intermediate_size=24, num_hidden_layers=3, num_attention_heads=2,
        num_key_value_heads=1, head_dim=6, tie_word_embeddings=True, **IDS)),
    "llama-geglu": lambda: hf.LlamaForCausalLM(hf.LlamaConfig(  # a gated MLP by hidden_act: GEGLU
        vocab_size=VOCAB, hidden_size=16, intermediate_size=24, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=2, hidden_act="gelu", max_position_embeddings=64, **IDS)),
    "phi3": lambda: hf.Phi3ForCausalLM(hf.Phi3Config(  # packed q/k/v of 4 query and 2 key/value heads, packed gate/up
        vocab_size=VOCAB, hidden_size=16, intermediate_size=24, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, **IDS)),
    "phi3-window-half-rotated": lambda: hf.Phi3ForCausalLM(hf.Phi3Config(
        vocab_size=VOCAB, hidden_size=16, intermediate_size=24, num_hidden_layers=2, num_attention_heads=2,
        max_position_embeddings=64, sliding_window=3,
        rope_parameters={"rope_type": "default", "rope_theta": 500.0, "partial_rotary_factor": 0.5}, **IDS)),
    "qwen2-geglu-tanh": lambda: hf.Qwen2ForCausalLM(hf.Qwen2Config(
        vocab_size=VOCAB, hidden_size=16, intermediate_size=24, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, hidden_act="gelu_pytorch_tanh", max_position_embeddings=64, **IDS)),
    "gpt_neox": lambda: hf.GPTNeoXForCausalLM(hf.GPTNeoXConfig(
        vocab_size=VOCAB, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=24,
        max_position_embeddings=64, **IDS)),  # Pythia's parallel block, a quarter of each head rotated
    "gpt_neox-sequential": lambda: hf.GPTNeoXForCausalLM(hf.GPTNeoXConfig(
        vocab_size=VOCAB, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=24,
        use_parallel_residual=False, max_position_embeddings=64, tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": 500.0, "partial_rotary_factor": 0.5}, **IDS)),
    "mistral": lambda: hf.MistralForCausalLM(hf.MistralConfig(
        vocab_size=VOCAB, hidden_size=16, intermediate_size=40, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, sliding_window=3, max_position_embeddings=64, **IDS)),  # the window shapes the logits
    "qwen3": lambda: hf.Qwen3ForCausalLM(hf.Qwen3Config(
        vocab_size=VOCAB, hidden_size=16, intermediate_size=24, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=6, tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": 1000.0}, **IDS)),
    "qwen2": lambda: hf.Qwen2ForCausalLM(hf.Qwen2Config(
        vocab_size=VOCAB, hidden_size=16, intermediate_size=24, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, use_sliding_window=True, sliding_window=2, max_position_embeddings=64,
        layer_types=["sliding_attention", "full_attention", "sliding_attention"], **IDS)),  # windows per layer
    "gemma": lambda: hf.GemmaForCausalLM(hf.GemmaConfig(
        vocab_size=VOCAB, hidden_size=16, intermediate_size=24, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=6, max_position_embeddings=64, **IDS)),
    "gemma2": lambda: hf.Gemma2ForCausalLM(hf.Gemma2Config(
        vocab_size=VOCAB, hidden_size=16, intermediate_size=24, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, head_dim=6, sliding_window=2, query_pre_attn_scalar=9, attn_logit_softcapping=3.0,
        final_logit_softcapping=5.0, max_position_embeddings=64, **IDS)),  # windows in alternate layers
    "gemma3": lambda: hf.Gemma3ForCausalLM(hf.Gemma3TextConfig(
        vocab_size=VOCAB, hidden_size=16, intermediate_size=24, num_hidden_layers=6, num_attention_heads=4,
        num_key_value_heads=2, head_dim=6, sliding_window=2, query_pre_attn_scalar=9, max_position_embeddings=64,
        rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 100.0},
                         "full_attention": {"rope_type": "default", "rope_theta": 5000.0}}, **IDS)),  # 5:1
    "gemma3-softcap": lambda: hf.Gemma3ForCausalLM(hf.Gemma3TextConfig(  # a field its attention never applies
        vocab_size=VOCAB, hidden_size=16, intermediate_size=24, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=6, sliding_window=2, query_pre_attn_scalar=9, attn_logit_softcapping=0.5,
        max_position_embeddings=64, **IDS)),
    "olmo2": lambda: hf.Olmo2ForCausalLM(hf.Olmo2Config(
        vocab_size=VOCAB, hidden_size=16, intermediate_size=24, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-5, **IDS)),  # qk-norm over all heads
    "phi": lambda: hf.PhiForCausalLM(hf.PhiConfig(
        vocab_size=VOCAB, hidden_size=16, intermediate_size=24, num_hidden_layers=2, num_attention_heads=2,
        max_position_embeddings=64, rope_parameters={"rope_type": "default", "rope_theta": 500.0,
                                                     "partial_rotary_factor": 0.5}, **IDS)),  # half of each head rotated
    "gptj": lambda: hf.GPTJForCausalLM(hf.GPTJConfig(
        vocab_size=VOCAB, n_embd=16, n_layer=2, n_head=2, rotary_dim=4, n_positions=64, **IDS)),  # adjacent pairs
    "stablelm": lambda: hf.StableLmForCausalLM(hf.StableLmConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=24, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, use_qkv_bias=True, max_position_embeddings=64, **IDS)),  # a quarter rotated, q/k/v biases
    "stablelm-parallel": lambda: hf.StableLmForCausalLM(hf.StableLmConfig(
        vocab_size=VOCAB, hidden_size=16, intermediate_size=24, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=2, use_parallel_residual=True, tie_word_embeddings=True, max_position_embeddings=64,
        **IDS)),  # StableLM 2 12B's block
    "persimmon": lambda: hf.PersimmonForCausalLM(hf.PersimmonConfig(
        vocab_size=VOCAB, hidden_size=16, intermediate_size=24, num_hidden_layers=2, num_attention_heads=2,
        max_position_embeddings=64, **IDS)),  # packed per-head q/k/v, per-head LayerNorm of q and k
    "cohere": lambda: hf.CohereForCausalLM(hf.CohereConfig(
        vocab_size=VOCAB, hidden_size=16, intermediate_size=24, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, logit_scale=0.5, **IDS)),  # adjacent pairs, one norm
    "cohere-qk-norm": lambda: hf.CohereForCausalLM(hf.CohereConfig(
        vocab_size=VOCAB, hidden_size=16, intermediate_size=24, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, use_qk_norm=True, **IDS)),  # a norm per head (Command R+)
    "opt": lambda: hf.OPTForCausalLM(hf.OPTConfig(
        vocab_size=VOCAB, hidden_size=16, ffn_dim=24, num_hidden_layers=2, num_attention_heads=2,
        max_position_embeddings=40, dropout=0.0, **IDS)),  # pre-norm, positions from row p + 2
    "opt-post-norm": lambda: hf.OPTForCausalLM(hf.OPTConfig(
        vocab_size=VOCAB, hidden_size=16, ffn_dim=24, num_hidden_layers=2, num_attention_heads=2,
        max_position_embeddings=40, do_layer_norm_before=False, dropout=0.0, **IDS)),  # OPT-350m's placement
    "bloom": lambda: hf.BloomForCausalLM(hf.BloomConfig(
        vocab_size=VOCAB, hidden_size=16, n_layer=2, n_head=4, **IDS)),  # ALiBi, packed per-head q/k/v
    "bloom-3-heads": lambda: hf.BloomForCausalLM(hf.BloomConfig(
        vocab_size=VOCAB, hidden_size=18, n_layer=2, n_head=3, **IDS)),  # the slopes of a head count not a power of 2
    "falcon": lambda: hf.FalconForCausalLM(hf.FalconConfig(
        vocab_size=VOCAB, hidden_size=16, num_hidden_layers=2, num_attention_heads=4, ffn_hidden_size=24,
        max_position_embeddings=64, **IDS)),  # Falcon 7B: multi-query [q..., k, v], one norm, no biases
    "falcon-new-architecture": lambda: hf.FalconForCausalLM(hf.FalconConfig(
        vocab_size=VOCAB, hidden_size=16, num_hidden_layers=2, num_attention_heads=4, num_kv_heads=2,
        new_decoder_architecture=True, ffn_hidden_size=24, max_position_embeddings=64, bias=True,
        **IDS)),  # Falcon 40B: q/k/v per group, two norms
    "falcon-sequential": lambda: hf.FalconForCausalLM(hf.FalconConfig(
        vocab_size=VOCAB, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, multi_query=False,
        parallel_attn=False, ffn_hidden_size=24, max_position_embeddings=64, **IDS)),  # per-head [q, k, v]
    "mpt": lambda: hf.MptForCausalLM(hf.MptConfig(
        vocab_size=VOCAB, d_model=24, n_layers=2, n_heads=6, max_seq_len=40, **IDS)),  # ALiBi of 6 heads, [q; k; v]
    "mpt-softmax-scale": lambda: hf.MptForCausalLM(hf.MptConfig(
        vocab_size=VOCAB, d_model=16, n_layers=2, n_heads=2, max_seq_len=40, attn_config={"softmax_scale": 0.2},
        **IDS)),
    "electra": lambda: hf.ElectraForMaskedLM(hf.ElectraConfig(
        vocab_size=VOCAB, embedding_size=8, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=24, max_position_embeddings=40, pad_token_id=0)),  # the embedding and the head at 8
    "electra-one-width": lambda: hf.ElectraForMaskedLM(hf.ElectraConfig(
        vocab_size=VOCAB, embedding_size=16, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=24, max_position_embeddings=40, pad_token_id=0)),
    "modernbert": lambda: hf.ModernBertForMaskedLM(hf.ModernBertConfig(
        vocab_size=VOCAB, hidden_size=16, intermediate_size=24, num_hidden_layers=4, num_attention_heads=2,
        local_attention=4, global_attn_every_n_layers=3, max_position_embeddings=64, cls_token_id=1, sep_token_id=2,
        **IDS)),  # global layers 0 and 3, two positions either side in 1 and 2; layer 0 without attn_norm
    "roberta": lambda: hf.RobertaForMaskedLM(hf.RobertaConfig(
        vocab_size=VOCAB, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
        max_position_embeddings=41, type_vocab_size=1, **IDS)),  # positions from the row after the pad id's
    "distilbert": lambda: hf.DistilBertForMaskedLM(hf.DistilBertConfig(
        vocab_size=VOCAB, dim=16, n_layers=2, n_heads=2, hidden_dim=32, max_position_embeddings=40, pad_token_id=0)),
    "bert": lambda: hf.BertForMaskedLM(hf.BertConfig(vocab_size=VOCAB, hidden_size=16, num_hidden_layers=2,
                                                     num_attention_heads=2, intermediate_size=32,
                                                     max_position_embeddings=40, type_vocab_size=2)),
}
ENCODERS = ("bert", "modernbert", "roberta", "distilbert", "electra", "electra-one-width")
DECODERS = [name for name in ONE_STACK if name not in ENCODERS]
REFERENCES = {**ENCODER_DECODERS, **ONE_STACK}
ONE_PER_KIND = {"decoder": "gpt2", "encoder": "bert"}
"""A reference of each one-stack kind, for checks that no family's layout changes."""
