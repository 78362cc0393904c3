"""Beam search with the same incremental cache as greedy decoding, batched over sources and beams,
through the model's public decoding step, for both kinds that decode.

The rules are fairseq's (and Hugging Face's): each step scores every continuation of every live
beam and takes the 2k best candidates of each source. An eos among the first k of them finishes
a hypothesis, scored as its summed log-probability over its length (generated tokens, eos
included) to the power `length_penalty`; the first k candidates that are not eos are the next
beams, and the cache follows them. A source is done once it holds k finished hypotheses; the
finished ones are kept until then. At the length limit every one of the first k candidates of the
last step counts, ending in eos or not (transformers' rule: they all meet a stopping criterion).
The output is each source's best hypothesis. With k = 1 this is greedy decoding exactly.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from zoo.errors import ConfigError
from zoo.model.generate import eval_mode, never_emitted, prepare

Hypothesis = tuple[float, list[int]]
"""(length-normalized score, generated ids)."""


def normalized(score: float, length: int, length_penalty: float) -> float:
    return score / length**length_penalty if length else score


@torch.no_grad()
def beam_search(model, inputs: Tensor, num_beams: int, max_new_tokens: int | None = None,
                length_penalty: float = 1.0, use_cache: bool = True) -> Tensor:
    """int64 ids like greedy's: an encoder-decoder's bos, best hypothesis, eos and padding; a
    decoder-only model's prompts each followed by its best continuation.

    `use_cache=False` re-decodes every beam's whole prefix each step (the reference)."""
    max_new_tokens = prepare(model, inputs, max_new_tokens, num_beams)
    if not isinstance(length_penalty, int | float) or isinstance(length_penalty, bool) or not math.isfinite(length_penalty):
        raise ConfigError(f"length_penalty must be a finite number, got {length_penalty!r}")
    if inputs.size(0) == 0:
        return type(model).joined(model.spec, inputs, inputs.new_zeros((0, 0)))
    with eval_mode(model):
        best = _search(model, inputs, num_beams, max_new_tokens, length_penalty, use_cache)
    generated = torch.full((inputs.size(0), max(map(len, best))), model.spec.pad_id, dtype=torch.long)
    for row, ids in enumerate(best):
        generated[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
    return type(model).joined(model.spec, inputs, generated.to(inputs.device))


def _search(model, inputs: Tensor, k: int, max_new_tokens: int, length_penalty: float, use_cache: bool) -> list[list[int]]:
    spec, sources, device = model.spec, inputs.size(0), inputs.device
    tokens, state = model.start_decoding(inputs, use_cache, beams=k)
    start = tokens.size(1)
    sums = torch.zeros(sources, k, device=device)
    sums[:, 1:] = float("-inf")  # the k beams start as one: only beam 0 may expand at first
    finished: list[list[Hypothesis]] = [[] for _ in range(sources)]
    block = torch.arange(sources, device=device)[:, None] * k
    for step in range(max_new_tokens):
        logp = model.decode_step(tokens, state).float().log_softmax(dim=-1)
        logp[:, never_emitted(spec)] = float("-inf")
        vocab = logp.size(-1)
        scores, flat = (sums.reshape(-1, 1) + logp).reshape(sources, k * vocab).topk(2 * k, dim=1)
        beam, token = flat // vocab, flat % vocab
        ends = token == spec.eos_id
        last = step == max_new_tokens - 1
        _finish(finished, k, ends, scores, beam, token, tokens[:, start:], step + 1, length_penalty, last)
        rank = torch.arange(2 * k, device=device).expand(sources, -1)
        keep = torch.where(ends, rank + 2 * k, rank).argsort(dim=1)[:, :k]  # the first k that go on
        rows = (block + beam.gather(1, keep)).reshape(-1)
        tokens = torch.cat([tokens[rows], token.gather(1, keep).reshape(-1, 1)], dim=1)
        sums = scores.gather(1, keep)
        state.reorder(rows)
        if all(len(hypotheses) >= k for hypotheses in finished):
            break
    for hypotheses in finished:
        if not hypotheses:  # no step at all (max_new_tokens 0): no generated token
            hypotheses.append((0.0, []))
    return [max(hypotheses, key=lambda h: h[0])[1] for hypotheses in finished]


def _finish(finished: list[list[Hypothesis]], k: int, ends: Tensor, scores: Tensor, beam: Tensor, token: Tensor,
            generated: Tensor, length: int, length_penalty: float, last: bool) -> None:
    """Hypotheses among each source's first k candidates: those that end in eos, best first, while
    the source has room; at the last step, every one of them for each source that had room before it.
    `generated` holds each beam's ids so far."""
    open_before = [len(hypotheses) < k for hypotheses in finished]
    hits = ((ends[:, :k] | last) & torch.isfinite(scores[:, :k])).nonzero().tolist()
    for source, rank in hits:
        if (last and open_before[source]) or len(finished[source]) < k:
            ids = [*generated[source * k + int(beam[source, rank])].tolist(), int(token[source, rank])]
            finished[source].append((normalized(float(scores[source, rank]), length, length_penalty), ids))
