"""Size checks before allocation: a model or a batch that cannot fit fails at once with its
estimated size, not after minutes of swapping, by the kernel's OOM killer or with the allocator's
message from deep inside torch."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import torch

from zoo.errors import ConfigError
from zoo.files import human_bytes
from zoo.specs.model_spec import ModelSpec

FLOAT_BYTES = 4


def rough_parameters(spec: ModelSpec) -> int:
    """A quick count of the big matrices (embeddings, position tables, attention, feed-forward)."""
    d, (enc, dec) = spec.d_model, spec.depths
    per_layer = 4 * d * d + 3 * d * spec.ffn_width  # a gated ffn has three matrices
    cross = 4 * d * d if enc and dec else 0
    return (d * (spec.src_vocab_size * bool(enc) + spec.tgt_vocab_size * (1 + bool(dec))) + 2 * spec.max_len * d
            + enc * per_layer + dec * (per_layer + cross))


MOST_PARAMETERS = 1 << 48
"""More parameters than any machine holds (a PiB of float32): a spec past it is refused before
anything is built, even on the meta device, whose sizes would overflow."""


def check_countable(spec: ModelSpec) -> None:
    rough = rough_parameters(spec)
    if rough > MOST_PARAMETERS:
        raise ConfigError(f"too large to build anywhere: about {rough:.3g} parameters ({size_text(spec)}), "
                          f"{human_bytes(rough * FLOAT_BYTES)} in float32")


def exact_parameters(spec: ModelSpec, buffers: bool = True) -> int:
    """Parameters and buffers of the real model (without buffers: its trained parameters), counted
    on the meta device (no memory used) from stacks of one and two layers: every layer after the
    first is the same as the second, so a stack of N holds one + (N - 1) x (two - one), and a
    depth of 10^6 counts as fast as 2."""
    from zoo.model.stacks import model_stack
    from zoo.parts import stack_sites

    check_countable(spec)
    sites = stack_sites(spec)

    def count(name: str, layers: int) -> int:
        with torch.device("meta"):
            part = model_stack(spec, name, sites, layers)
        return sum(t.numel() for t in (*(p for p in part.parameters() if buffers or p.requires_grad),
                                        *(part.buffers() if buffers else ())))

    total = 0
    for name, site in sites.items():
        one, two = count(name, 1), count(name, 2)
        total += one + (site.layers - 1) * (two - one)
    width, projection = spec.embedding_width, spec.d_model * (spec.embedding_dim or 0)
    shared = (width * spec.tgt_vocab_size + projection) * spec.share_embeddings  # the decoder's are the encoder's
    counted_bias = spec.logits_bias == "trained" or (buffers and spec.logits_bias == "fixed")
    generator = (spec.d_model * spec.tgt_vocab_size * (not spec.tie_embeddings) + projection * spec.tie_embeddings
                 + spec.tgt_vocab_size * counted_bias)
    if spec.output_transform:
        from zoo.model.stacks import OutputTransform

        with torch.device("meta"):
            generator += sum(p.numel() for p in OutputTransform(spec).parameters())
    return total - shared + generator


def size_text(spec: ModelSpec) -> str:
    layers = "+".join(str(n) for n in spec.depths if n)
    return (f"d_model {spec.d_model}, d_ff {spec.ffn_width}, {layers} layers, "
            f"vocabularies {spec.src_vocab_size}/{spec.tgt_vocab_size}, max_len {spec.max_len}")


def available_bytes(device: torch.device | str = "cpu") -> int:
    """Free memory on the device: CUDA's free memory, or the host's available memory within any
    container (cgroup) limit."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    limits = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                limits.append(int(line.split()[1]) * 1024)
    except OSError:
        pass
    try:
        text = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if text.isdigit():
            used = int(Path("/sys/fs/cgroup/memory.current").read_text().strip())
            limits.append(int(text) - used)
    except (OSError, ValueError):
        pass
    if not limits and hasattr(os, "sysconf"):
        with contextlib.suppress(ValueError, OSError):
            limits.append(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    return min(limits) if limits else 1 << 62


def activation_floats(spec: ModelSpec, batch: int, src_len: int, tgt_len: int) -> int:
    """Floats kept for the backward pass of one batch: each layer's hidden states, feed-forward
    and attention weights, and the logits with their softmax and gradient."""
    d, f, h, (enc, dec) = spec.d_model, spec.ffn_width, spec.n_heads, spec.depths
    memory = src_len if enc and dec else 0
    encoder = batch * src_len * enc * (12 * d + 2 * f + 3 * h * src_len)
    decoder = batch * tgt_len * dec * (18 * d + 2 * f + 3 * h * (tgt_len + memory))
    return encoder + decoder + 3 * batch * tgt_len * spec.tgt_vocab_size


def check_fits(spec: ModelSpec, device: torch.device | str = "cpu", *, training: bool = False,
               batch: tuple[int, int, int] | None = None) -> int | None:
    """Raise a ConfigError when the model (for training: with gradients, Adam's two moments and
    the activations of a (rows, src_len, tgt_len) batch) would not fit in the device's memory.
    Returns the exact parameter count where it counted them (always when given a batch)."""
    check_countable(spec)
    free = available_bytes(device)
    copies = 4 if training else 1
    if rough_parameters(spec) * FLOAT_BYTES * copies < free // 4 and batch is None:
        return None
    params = exact_parameters(spec)
    need = params * FLOAT_BYTES * copies
    what = "its weights"
    if training:
        what = "its weights, gradients and Adam state"
        if batch is not None:
            need += activation_floats(spec, *batch) * FLOAT_BYTES
            what += f" and the activations of a batch of {batch[0]} rows of up to {max(batch[1:])} tokens"
    if need > free:
        raise ConfigError(f"too large for {torch.device(device).type} memory: {params:,} parameters ({size_text(spec)}); "
                          f"{what} need about {human_bytes(need)}, but only {human_bytes(free)} is available")
    return params


def check_decoding_fits(spec: ModelSpec, sources: int, src_len: int, beams: int, new_tokens: int,
                        device: torch.device | str = "cpu") -> None:
    """Refuse a decoding whose beams, key/value cache and scores cannot fit, before any allocation:
    per row (a source's beam) each decoder layer caches keys and values of the generated tokens and
    of the source, and every step scores the whole vocabulary."""
    rows, d, length = sources * beams, spec.d_model, 1 + new_tokens
    floats = rows * (spec.n_decoder_layers * 2 * d * (length + src_len) + src_len * d + 4 * spec.tgt_vocab_size)
    # a decoder-only model's prompt (src_len here) is cached as its own keys, as a memory would be
    need, free = floats * FLOAT_BYTES, available_bytes(device)
    if need > free:
        raise ConfigError(f"decoding {sources} source(s) with {beams} beam(s) of up to {length} tokens needs about "
                          f"{human_bytes(need)} for its cache and scores, but only {human_bytes(free)} is available; "
                          "use fewer beams, fewer new tokens or smaller batches")
