"""A model's training FLOPs by formula, the measure of compute at which variants compare fairly.

Counted as model FLOPs are counted (Kaplan et al. 2020; PaLM, Chowdhery et al. 2022, appendix B):
the matrix products of the forward pass, 2 FLOPs per multiply-add, times 3 for a training step (the
backward pass computes two products for each: the input's gradient and the weight's). Elementwise
work (norms, activations, softmax, rotations) is not counted, nor is recomputation (a chunked
loss recomputes its logits: hardware FLOPs, not model FLOPs). For a stack of B rows of T positions
(padding included: it is computed), each layer counts

- attention projections, 2·B·T·d·(2·q + 2·kv): queries and output at the heads' width q, keys and
  values at the key/value heads' width kv;
- scores and weighted values, 2·2·B·h·T·T·d_head: every pair of positions is computed, masked
  (causal, window, padding) or not;
- cross-attention (a decoder reading an encoder's S positions): queries and output over T, keys and
  values over S, scores T·S;
- the feed-forward: its part's `forward_flops` (2·B·T·m·d·d_ff for m weight matrices; a mixture of
  experts its router and every expert's buffer);

then a factorized embedding's projection, and the output transform and projection to the
vocabulary at every position of the last stack. tests/test_flops.py holds it within 5% of torch's
FLOP counter for every variant of the test grid.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from zoo.model.assembly import stack_sites
from zoo.model.stacks import narrow_embedding
from zoo.specs.hooks import CountsFlops, implements
from zoo.specs.model_spec import ModelSpec
from zoo.specs.registries import registry

TRAINING = 3
"""A training step's FLOPs per forward FLOP: the forward, and the backward's two products."""


def uncounted(spec: ModelSpec) -> list[str]:
    """The feed-forward parts of the spec's layers that do not declare their FLOPs (zoo.specs.hooks.CountsFlops)."""
    names = {spec.at_layer(stack, index).ffn.name for stack, site in stack_sites(spec).items() for index in range(site.layers)}
    return sorted(name for name in names if not implements(registry("ffn").get(name), CountsFlops))


def attention_flops(layer: ModelSpec, rows: int, queries: int, keys: int, projected_keys: int) -> int:
    """One attention layer: projections of the queries (and output) over `queries` positions and of
    the keys and values over `projected_keys` (the memory's, for cross-attention), then the
    scores and weighted values of every query against every key."""
    q, kv = layer.attention_width, layer.kv_heads * layer.d_head
    projections = 2 * rows * layer.d_model * (2 * q * queries + 2 * kv * projected_keys)
    return projections + 2 * 2 * rows * layer.n_heads * queries * keys * layer.d_head


def head_flops(spec: ModelSpec, tokens: int) -> int:
    """The output transform and projection to the vocabulary over `tokens` positions."""
    narrow = narrow_embedding(spec)
    factorized = spec.embeddings.dim is not None and (spec.embeddings.tie or narrow)
    width = spec.embedding_width if factorized else spec.d_model
    flops = 2 * tokens * width * spec.tgt_vocab_size
    if spec.output.transform:
        flops += 2 * tokens * spec.d_model * (spec.embedding_width if narrow else spec.d_model)
    if factorized and not (narrow and spec.output.transform):
        flops += 2 * tokens * spec.d_model * spec.embeddings.dim
    return flops


def forward_flops(spec: ModelSpec, shapes: Mapping[str, Sequence[int]]) -> int | None:
    """The forward pass's counted FLOPs for inputs of these (rows, length) per stack (`encoder`,
    `decoder`, as zoo.model.assembly names them); None where a part does not declare its FLOPs."""
    if uncounted(spec):
        return None
    sites, flops, last = stack_sites(spec), 0, 0
    for stack, site in sites.items():
        rows, length = shapes[stack]
        tokens = rows * length
        memory = shapes["encoder"][1] if stack == "decoder" and "encoder" in sites else None
        if spec.embeddings.dim is not None:
            flops += 2 * tokens * spec.embeddings.dim * spec.d_model
        for index in range(site.layers):
            layer = spec.at_layer(stack, index)
            flops += attention_flops(layer, rows, length, length, length)
            if memory is not None:
                flops += attention_flops(layer, rows, length, memory, memory)
            flops += registry("ffn").get(layer.ffn.name).forward_flops(layer, tokens)
        last = tokens
    return flops + head_flops(spec, last)


def training_flops(spec: ModelSpec, shapes: Mapping[str, Sequence[int]]) -> int | None:
    """A training step's model FLOPs over inputs of these shapes (TRAINING times the forward's)."""
    forward = forward_flops(spec, shapes)
    return None if forward is None else TRAINING * forward


def stack_shapes(reads: Sequence[str], inputs: Sequence) -> dict[str, tuple[int, int]]:
    """Each stack's (rows, length), from a kind's `reads` (its stacks, in the order of its inputs)
    and the framed input tensors."""
    return {stack: (int(t.shape[0]), int(t.shape[1])) for stack, t in zip(reads, inputs, strict=True)}
