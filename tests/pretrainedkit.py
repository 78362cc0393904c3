"""A pretrained model's folder as a user's save_pretrained writes it (the model's config.json and
weights, the tokenizer's tokenizer.json and tokenizer_config.json), made offline at a tiny size:
random weights and a Unigram tokenizer learned on the Multi30k sample, laid out with the family's
special tokens (T5: pad 0, eos 1, start from pad; BART: bos 0, pad 1, eos 2, start from eos)."""

import gzip
from pathlib import Path

from trainkit import MULTI30K

FAMILIES = ("t5", "bart")
VOCAB = 300


def sample_text() -> list[str]:
    return [line for name in ("train.de.gz", "train.en.gz")
            for line in gzip.open(MULTI30K / name, "rt", encoding="utf-8").read().splitlines()]


def family_tokenizer(family: str):
    import transformers
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    specials = ["<pad>", "</s>", "<unk>"] if family == "t5" else ["<s>", "<pad>", "</s>", "<unk>"]
    tokenizer = Tokenizer(models.Unigram())
    tokenizer.normalizer = normalizers.NFKC()
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    tokenizer.train_from_iterator(sample_text(), trainers.UnigramTrainer(
        vocab_size=VOCAB, special_tokens=specials, unk_token="<unk>", show_progress=False))
    if family == "t5":
        tokenizer.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
        return transformers.T5TokenizerFast(tokenizer_object=tokenizer, eos_token="</s>", pad_token="<pad>",
                                            unk_token="<unk>", extra_ids=0)
    tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A </s>", special_tokens=[("<s>", 0), ("</s>", 2)])
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>",
                                                pad_token="<pad>", unk_token="<unk>")


def family_model(family: str):
    import transformers

    if family == "t5":
        return transformers.T5ForConditionalGeneration(transformers.T5Config(
            vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, decoder_start_token_id=0,
            pad_token_id=0, eos_token_id=1, dropout_rate=0.0))
    return transformers.BartForConditionalGeneration(transformers.BartConfig(
        vocab_size=VOCAB, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=128,
        bos_token_id=0, pad_token_id=1, eos_token_id=2, decoder_start_token_id=2, forced_eos_token_id=None,
        dropout=0.0, attention_dropout=0.0, activation_dropout=0.0))


def save_pretrained_folder(folder, family: str = "t5"):
    """(folder, the transformers model, its tokenizer)."""
    import torch

    torch.manual_seed(0)
    model, tokenizer = family_model(family).eval(), family_tokenizer(family)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return Path(folder), model, tokenizer


def language_model_folder(folder, mask: bool = False):
    """A decoder-only Llama with BART's tokenizer (bos 0, pad 1, eos 2), as a user's save_pretrained
    of both writes them: (folder, the transformers model, its tokenizer); with `mask`, the tokenizer
    also names a mask_token, as a masked language model's does."""
    import torch
    import transformers

    tokenizer = family_tokenizer("bart")
    if mask:
        tokenizer.add_special_tokens({"mask_token": "<mask>"})
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=16, intermediate_size=40, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=128, bos_token_id=0, pad_token_id=1, eos_token_id=2)).eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return Path(folder), model, tokenizer
