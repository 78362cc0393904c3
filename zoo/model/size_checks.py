"""Size checks before allocation: a model or a batch that cannot fit fails at once with its
estimated size, not after minutes of swapping, by the kernel's OOM killer or with the allocator's
message from deep inside torch."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

import torch

from zoo.errors import ConfigError
from zoo.files import human_bytes
from zoo.model.assembly import stack_sites
from zoo.model.stacks import OutputProjection, layer_block, model_stack
from zoo.specs.hooks import Copies, implements
from zoo.specs.layer_rules import distinct_layers
from zoo.specs.model_spec import ModelSpec
from zoo.specs.registries import registry

FLOAT_BYTES = 4


def copies_of(spec: ModelSpec) -> dict[str, tuple[str, int]]:
    """Each axis whose part holds N copies of a module (an MoE's experts): the setting that counts
    them and its value. Such a part declares `copies = "SETTING"`; its size is linear in it."""
    found = {}
    for axis, choice in spec.axes().items():
        part = registry(axis).get(choice.name)
        if implements(part, Copies):
            found[axis] = (part.copies, int(getattr(choice.settings, part.copies)))
    return found


def most_copies(spec: ModelSpec) -> int:
    """The largest number of copies any part holds (1 without such a part)."""
    return max([count for _, count in copies_of(spec).values()], default=1)


def rough_layer(spec: ModelSpec, cross: bool) -> int:
    """A quick count of one block's big matrices: attention at its head width and key/value heads
    (twice with cross-attention), the feed-forward times its copies (a gated one has three matrices)."""
    d, kv = spec.d_model, spec.kv_heads * spec.d_head
    attention = d * (2 * spec.attention_width + 2 * kv)
    copies = most_copies(spec)
    return attention * (1 + cross) + 3 * d * spec.ffn_width * copies + d * copies


def rough_parameters(spec: ModelSpec) -> int:
    """A quick count of the big matrices (token tables with their factorized projection, position
    tables, and each block as its per-layer rules make it), made from the spec's numbers alone, so
    no size is too large to count: a rule's layers count once per distinct group, times its size."""
    d, (enc, dec), width = spec.d_model, spec.depths, spec.embedding_width
    tables = width * (spec.src_vocab_size * bool(enc) + spec.tgt_vocab_size * (1 + bool(dec)))
    blocks = sum(count * rough_layer(spec.at_layer(stack, index), cross=stack == "decoder" and bool(enc))
                 for stack, depth in (("encoder", enc), ("decoder", dec)) if depth
                 for index, count in distinct_layers(spec.layers, stack, depth).items())
    return tables + d * width * (spec.embeddings.dim is not None) * 2 + 2 * spec.max_len * d + blocks


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
    depth of 10^6 counts as fast as 2. Where per-layer rules make layers differ, an empty stack
    plus one block of each kind of layer times its count."""
    check_countable(spec)
    linear = {axis: (setting, n) for axis, (setting, n) in copies_of(spec).items() if n > 3}
    if linear:  # N copies counted from 2 and 3: a million experts count as fast as two
        axis, (setting, n) = next(iter(linear.items()))
        def with_copies(count: int) -> ModelSpec:
            data = spec.model_dump()
            given = data[axis] if isinstance(data[axis], dict) else {"name": data[axis]}  # a default is its name
            data[axis] = {**given, setting: count}
            return ModelSpec.model_validate(data)

        two, three = exact_parameters(with_copies(2), buffers), exact_parameters(with_copies(3), buffers)
        return two + (n - 2) * (three - two)
    sites = stack_sites(spec)

    def held(part: torch.nn.Module) -> int:
        return sum(t.numel() for t in (*(p for p in part.parameters() if buffers or p.requires_grad),
                                        *(part.buffers() if buffers else ())))

    def count(name: str, layers: int) -> int:
        with torch.device("meta"):
            return held(model_stack(spec, name, sites, layers))

    def block(name: str, index: int) -> int:
        with torch.device("meta"):
            return held(layer_block(spec, index, sites[name], cross=name == "decoder" and "encoder" in sites))

    total = 0
    for name, site in sites.items():
        if spec.layers:  # layers differ by the rules: one block of each kind, times how many there are
            groups = distinct_layers(spec.layers, name, site.layers)
            total += count(name, 0) + sum(n * block(name, index) for index, n in groups.items())
            continue
        one, two = count(name, 1), count(name, 2)
        total += one + (site.layers - 1) * (two - one)
    return total - shared_table(spec, sites) + head_parameters(spec, buffers)


def shared_table(spec: ModelSpec, sites: dict) -> int:
    """Parameters each stack's count holds though the encoder's stack holds them: with shared
    embeddings, the decoder's table (and its projection where factorized)."""
    if not spec.embeddings.share:
        return 0
    with torch.device("meta"):
        embed = model_stack(spec, "decoder", sites, 0).embed
    return sum(p.numel() for name, p in embed.named_parameters() if name.split(".")[0] in ("tokens", "project"))


def head_parameters(spec: ModelSpec, buffers: bool = False) -> int:
    """The output projection's own parameters: a tied table is counted in its stack."""
    with torch.device("meta"):
        head = OutputProjection(spec)
    return sum(p.numel() for name, p in head.named_parameters()
               if not (name == "weight" and spec.embeddings.tie) and (buffers or p.requires_grad))


def non_embedding_parameters(spec: ModelSpec) -> int:
    """Trained parameters but the token and position tables and the output projection (Kaplan et
    al.'s N): what grows with the model's width and depth, not with its vocabulary or context."""
    sites = stack_sites(spec)
    with torch.device("meta"):
        tables = sum(p.numel() for name in sites for p in model_stack(spec, name, sites, 0).embed.parameters()
                     if p.requires_grad)
    return exact_parameters(spec, buffers=False) - (tables - shared_table(spec, sites)) - head_parameters(spec)


def size_text(spec: ModelSpec) -> str:
    layers = "+".join(str(n) for n in spec.depths if n)
    extra = [f"{spec.n_heads} heads of width {spec.d_head}"] if spec.attention_width != spec.d_model else []
    extra += [f"embedding_dim {spec.embeddings.dim}"] if spec.embeddings.dim is not None else []
    extra += [f"ffn {setting} {count}" for setting, count in copies_of(spec).values()]
    return ", ".join([f"d_model {spec.d_model}", f"d_ff {spec.ffn_width}", *extra, f"{layers} layers",
                      f"vocabularies {spec.src_vocab_size}/{spec.tgt_vocab_size}", f"max_len {spec.max_len}"])


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


def layer_activation_floats(spec: ModelSpec, batch: int, src_len: int, tgt_len: int) -> tuple[int, int, int]:
    """Floats kept for the backward pass of one batch by one encoder layer, by one decoder layer
    (hidden states, feed-forward and attention weights), and by the head (the logits with their
    softmax and gradient)."""
    d, f, h, (enc, dec) = spec.d_model, spec.ffn_width, spec.n_heads, spec.depths
    a = spec.attention_width + 2 * spec.kv_heads * spec.d_head  # queries, keys and values
    copies = most_copies(spec)
    routed = 2 * f if copies == 1 else 3 * (d + 2 * f)  # top-k slots at a capacity above 1, and the router's
    buffers = 2 * copies * (d + f)  # each expert's buffer and hidden states, however few tokens it gets
    memory = src_len if enc and dec else 0
    encoder = batch * src_len * (10 * d + a + routed + 3 * h * src_len) + buffers
    decoder = batch * tgt_len * (14 * d + 2 * a + routed + 3 * h * (tgt_len + memory)) + buffers
    head = 3 * batch * tgt_len * (spec.tgt_vocab_size + spec.embedding_width)
    return encoder, decoder, head


def activation_floats(spec: ModelSpec, batch: int, src_len: int, tgt_len: int) -> int:
    """Floats kept for the backward pass of one batch, every layer's and the head's."""
    encoder, decoder, head = layer_activation_floats(spec, batch, src_len, tgt_len)
    enc, dec = spec.depths
    return enc * encoder + dec * decoder + head


def check_fits(spec: ModelSpec, device: torch.device | str = "cpu", *, training: bool = False,
               batch: tuple[int, int, int] | None = None, per_rank: Callable[[int], int] | None = None) -> int | None:
    """Raise a ConfigError when the model (for training: with gradients, Adam's two moments and
    the activations of a (rows, src_len, tgt_len) batch) would not fit in the device's memory.
    Returns the exact parameter count where it counted them (always when given a batch).
    `per_rank`: one rank's training bytes from the exact parameter count, where train.parallel or
    activation checkpointing change them (zoo.model.memory.training_memory)."""
    check_countable(spec)
    free = available_bytes(device)
    copies = 4 if training else 1
    rough = rough_parameters(spec)
    if rough * FLOAT_BYTES * copies < free // 4 and batch is None:
        return None
    what = "its weights, gradients and Adam state" if training else "its weights"
    if spec.layers and rough * FLOAT_BYTES * copies > free:  # the big matrices alone are too many, and a layer a
        # rule changes is counted whole on the meta device (a billion experts would take hours): no exact count
        raise ConfigError(too_large(spec, device, f"at least {rough:,}", what,
                                    f"at least {human_bytes(rough * FLOAT_BYTES * copies)}", free))
    params = exact_parameters(spec)
    need = params * FLOAT_BYTES * copies
    if training and batch is not None:
        need = per_rank(params) if per_rank is not None else need + activation_floats(spec, *batch) * FLOAT_BYTES
        what += f" and the activations of a batch of {batch[0]} rows of up to {max(batch[1:])} tokens"
        what += " on each rank" if per_rank is not None else ""
    if need > free:
        raise ConfigError(too_large(spec, device, f"{params:,}", what, f"about {human_bytes(need)}", free))
    return params


def too_large(spec: ModelSpec, device: torch.device | str, count: str, what: str, need: str, free: int) -> str:
    """Why a model the device's memory cannot hold is refused: its size and what it needs."""
    return (f"too large for {torch.device(device).type} memory: {count} parameters ({size_text(spec)}); {what} need "
            f"{need}, but only {human_bytes(free)} is available")


def check_decoding_fits(spec: ModelSpec, sources: int, src_len: int, beams: int, new_tokens: int,
                        device: torch.device | str = "cpu") -> None:
    """Refuse a decoding whose beams, key/value cache and scores cannot fit, before any allocation:
    per row (a source's beam) each decoder layer caches keys and values of the generated tokens and
    of the source, and every step scores the whole vocabulary."""
    rows, d, length = sources * beams, spec.d_model, 1 + new_tokens
    kv = spec.kv_heads * spec.d_head
    cache = spec.n_decoder_layers * 2 * kv * (length + src_len) + src_len * d
    # a decoder-only model's prompt (src_len here) is cached as its own keys, as a memory would be
    floats = rows * (2 * cache + 6 * spec.tgt_vocab_size)  # reordering copies the cache; scores, top-k and softmax
    finished = rows * length * 40 if beams > 1 else 0  # ended hypotheses, lists of Python ints
    need, free = floats * FLOAT_BYTES + finished, available_bytes(device)
    if need > free:
        raise ConfigError(f"decoding {sources} source(s) with {beams} beam(s) of up to {length} tokens needs about "
                          f"{human_bytes(need)} for its cache and scores, but only {human_bytes(free)} is available; "
                          "use fewer beams, fewer new tokens or smaller batches")


def check_evaluation_fits(spec: ModelSpec, device: torch.device | str, split: str, rows: int, src_len: int,
                          tgt_len: int, beams: int, start: int = 1) -> None:
    """Refuse an evaluation batch whose forward pass (one layer's activations at a time, and the
    logits) or whose decoding (`beams` > 0, from `start` columns: the model kind's start_columns)
    cannot fit, naming the split and its longest line."""
    one_layer = spec.model_copy(update={"n_encoder_layers": 1, "n_decoder_layers": 1})
    need, free = activation_floats(one_layer, rows, src_len, tgt_len) * FLOAT_BYTES, available_bytes(device)
    if need > free:
        raise ConfigError(f"evaluating the {split} split: a batch of {rows} rows of up to {max(src_len, tgt_len):,} "
                          f"tokens needs about {human_bytes(need)}, but only {human_bytes(free)} is available; use "
                          "shorter held-out lines or a smaller train.batch_size (found before any training step)")
    if beams:
        new_tokens = max(0, min(spec.max_len - start, 2 * src_len + 10))
        try:
            check_decoding_fits(spec, rows, src_len, beams, new_tokens, device)
        except ConfigError as err:
            raise ConfigError(f"evaluating the {split} split: {err}") from None
