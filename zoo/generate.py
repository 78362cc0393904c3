"""Greedy decoding with an incremental key/value cache.

Each step feeds only the newest token; self-attention keys and values of earlier steps and the
cross-attention keys of the memory come from the cache, so a step costs work proportional to the
current length. `use_cache=False` re-decodes the whole prefix each step (the reference).
"""

from __future__ import annotations

import operator
from contextlib import contextmanager

import torch
from torch import Tensor

from zoo.errors import ConfigError
from zoo.inputs import check_ids
from zoo.masks import padding_mask, target_mask
from zoo.memory import check_decoding_fits


def default_new_tokens(spec, src: Tensor) -> int:
    """New tokens decoded when the caller names no number: twice the source's (padded) length plus
    10, a length that fits a translation of the input, within max_len; decoding up to max_len
    would cost a long step loop for short inputs whose rows never stop."""
    return min(spec.max_len - 1, 2 * src.size(1) + 10)


def prepare(model, src: Tensor, max_new_tokens: int | None, num_beams: int = 1) -> int:
    """Checks shared by every decoder, all before any allocation; returns the number of new tokens
    to decode at most (by default default_new_tokens)."""
    check_ids("src", src, model.spec.src_vocab_size)
    if max_new_tokens is None:
        max_new_tokens = default_new_tokens(model.spec, src)
    max_new_tokens = whole_number("max_new_tokens", max_new_tokens, 0)
    num_beams = whole_number("num_beams", num_beams, 1)
    model.decoder.embed.position.check_length(1 + max_new_tokens)
    check_decoding_fits(model.spec, src.size(0), src.size(1), num_beams, max_new_tokens, src.device)
    return max_new_tokens


def whole_number(name: str, value, least: int) -> int:
    """`value` as an int of at least `least`; a float, a bool or a string is an error, not rounded."""
    if isinstance(value, bool):
        raise ConfigError(f"{name} must be a whole number, got {value!r}")
    try:
        number = operator.index(value)
    except TypeError:
        raise ConfigError(f"{name} must be a whole number, got {value!r} ({type(value).__name__})") from None
    if number < least:
        raise ConfigError(f"{name} must be >= {least}, got {number}")
    return number


def never_emitted(spec) -> list[int]:
    """Ids decoding never emits: pad, and the start token unless it is eos (BART starts from eos)."""
    return sorted({spec.pad_id, spec.bos_id} - {spec.eos_id})


def empty_result(model, src: Tensor) -> Tensor:
    """What decoding an empty batch gives: no rows, the bos column alone."""
    return torch.full((0, 1), model.spec.bos_id, dtype=torch.long, device=src.device)


@contextmanager
def eval_mode(model):
    """Decoding with dropout would not be the model's best guess: eval mode, then the caller's."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


@torch.no_grad()
def greedy(model, src: Tensor, max_new_tokens: int | None = None, use_cache: bool = True) -> Tensor:
    """int64 ids (B, 1 + steps) starting with bos; each row stops at its eos and is padded after.
    Never emits pad or bos (see never_emitted)."""
    max_new_tokens = prepare(model, src, max_new_tokens)
    if src.size(0) == 0:
        return empty_result(model, src)
    with eval_mode(model):
        return _greedy(model, src, max_new_tokens, use_cache)


def _greedy(model, src: Tensor, max_new_tokens: int, use_cache: bool) -> Tensor:
    spec = model.spec
    memory, _ = model._encode(src)
    cross_mask = padding_mask(src, spec.pad_id)
    tokens = torch.full((src.size(0), 1), spec.bos_id, dtype=torch.long, device=src.device)
    done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    cache = model.decoder.new_cache() if use_cache else None
    for _ in range(max_new_tokens):
        step = tokens[:, -1:] if use_cache else tokens
        self_mask = target_mask(tokens, spec)  # the decoder's self-attention adds causality
        hidden, _ = model.decoder(step, memory, self_mask, cross_mask, cache)
        logits = model.generator(hidden[:, -1])
        logits[:, never_emitted(spec)] = float("-inf")
        next_token = logits.argmax(dim=-1).masked_fill(done, spec.pad_id)
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)
        done |= next_token == spec.eos_id
        if bool(done.all()):
            break
    return tokens
