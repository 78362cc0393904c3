"""Interop with the implementations researchers trust: the proof that the zoo's parts are theirs.

- `from_torch`: the usual torch.nn.Transformer wrapper of the PyTorch tutorials (zoo.interop.torch_nn).
- `from_hf` / `to_hf`: transformers' T5 (1.0 and 1.1), mT5, BART, Marian, Pegasus, M2M100, GPT-2,
  GPT-NeoX, Llama, Mistral, Qwen2, Qwen3, OLMo 2, Gemma, Gemma 2, Gemma 3 (text), OPT, BLOOM, Falcon,
  MPT, Phi, GPT-J, StableLM, Persimmon, Cohere, BERT, RoBERTa, DistilBERT, ELECTRA and ModernBERT
  (zoo.interop.hf and one small module per family or two), needing `pip install zoo[hf]`.
"""

from zoo.interop import (  # noqa: F401  (each registers its family)
    bart,
    bert,
    bloom,
    cohere,
    electra,
    falcon,
    gemma,
    gpt2,
    gpt_neox,
    llama,
    llama_layout,
    marian,
    modernbert,
    mpt,
    opt,
    phi,
    roberta,
    stablelm,
    t5,
)
from zoo.interop.hf import FAMILIES, from_hf, to_hf
from zoo.interop.torch_nn import from_torch

__all__ = ["FAMILIES", "from_hf", "from_torch", "to_hf"]
