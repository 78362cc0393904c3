"""Greedy decoding with an incremental key/value cache, for both kinds that decode.

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
from zoo.model.inputs import check_ids
from zoo.model.size_checks import check_decoding_fits


def default_new_tokens(model, inputs: Tensor) -> int:
    """New tokens decoded when the caller names no number: twice the input's (padded) length plus
    10, a length that fits a translation of the input, within max_len (which a decoder-only
    model's prompt shares); decoding up to max_len would cost a long step loop for short inputs
    whose rows never stop."""
    spec = model.spec
    room = spec.max_len - type(model).start_columns(spec, inputs.size(1))
    return max(0, min(room, 2 * inputs.size(1) + 10))


def prepare(model, inputs: Tensor, max_new_tokens: int | None, num_beams: int = 1) -> int:
    """Checks shared by every decoder, all before any allocation; returns the number of new tokens
    to decode at most (by default default_new_tokens)."""
    spec = model.spec
    name, vocab = type(model).decoding_input(spec)
    check_ids(name, inputs, vocab)
    if max_new_tokens is None:
        max_new_tokens = default_new_tokens(model, inputs)
    max_new_tokens = whole_number("max_new_tokens", max_new_tokens, 0)
    num_beams = whole_number("num_beams", num_beams, 1)
    model.check_decoding_length(type(model).start_columns(spec, inputs.size(1)) + max_new_tokens)
    check_decoding_fits(spec, inputs.size(0), inputs.size(1), num_beams, max_new_tokens, inputs.device)
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
def greedy(model, inputs: Tensor, max_new_tokens: int | None = None, use_cache: bool = True) -> Tensor:
    """int64 ids: an encoder-decoder's (B, 1 + steps) starting with bos, a decoder-only model's
    prompts and their continuations; each row stops at its eos and is padded after. Never emits
    pad or bos (see never_emitted)."""
    max_new_tokens = prepare(model, inputs, max_new_tokens)
    if inputs.size(0) == 0:
        return type(model).joined(model.spec, inputs, inputs.new_zeros((0, 0)))
    with eval_mode(model):
        return type(model).joined(model.spec, inputs, _greedy(model, inputs, max_new_tokens, use_cache))


def _greedy(model, inputs: Tensor, max_new_tokens: int, use_cache: bool) -> Tensor:
    """The generated ids (B, steps), by the model's public decoding step."""
    spec = model.spec
    tokens, state = model.start_decoding(inputs, use_cache)
    start = tokens.size(1)
    done = torch.zeros(tokens.size(0), dtype=torch.bool, device=tokens.device)
    for _ in range(max_new_tokens):
        logits = model.decode_step(tokens, state)
        logits[:, never_emitted(spec)] = float("-inf")
        next_token = logits.argmax(dim=-1).masked_fill(done, spec.pad_id)
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)
        done |= next_token == spec.eos_id
        if bool(done.all()):
            break
    return tokens[:, start:]
