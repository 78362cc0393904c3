"""The invariants every model must keep, whatever its kind, parts and settings: checked over the
grid of variants (test_variants.py) and over the spec's other fields (test_spec_fields.py)."""

import torch
from conftest import padded_batch, reference_greedy

from zoo.model.generate import never_emitted

ROUNDING = 3e-5
"""float32 rounding of two computations that differ in shape (batch or length) only; a real leak
of padding or of later tokens moves logits by orders of magnitude more."""


@torch.no_grad()
def away_from_init(model, seed: int = 0):
    """The model with every trained parameter moved by noise, so that parts which start as the
    identity (ReZero's scalar 0, Fixup's zeroed projections) are checked doing something."""
    generator = torch.Generator().manual_seed(seed)
    for param in model.parameters():
        if param.requires_grad:
            param.add_(0.1 * torch.randn(param.shape, generator=generator))
    return model


def with_bos(tgt: torch.Tensor, bos: int = 1) -> torch.Tensor:
    return torch.cat([torch.full((tgt.size(0), 1), bos), tgt[:, :-1]], dim=1)


def logits_of(model, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    """The logits of a target given a source: an encoder-decoder reads both; a model of one stack
    reads the target alone (a decoder-only model's input starts with the start token too)."""
    return model(src, tgt) if model.spec.kind == "encoder_decoder" else model(tgt)


def check_padding_invariance(model):
    """Each row alone gives its logits in a padded batch; decoder inputs start with the spec's
    start token, which may be the pad id (then it is not padding)."""
    src, tgt = padded_batch([9, 4, 6], 19, seed=4), with_bos(padded_batch([7, 3, 5], 19, seed=5), model.spec.bos_id)
    batched = logits_of(model, src, tgt)
    for row, (s_len, t_len) in enumerate([(9, 7), (4, 4), (6, 6)]):  # targets: the start token, then their own
        alone = logits_of(model, src[row : row + 1, :s_len], tgt[row : row + 1, :t_len])
        assert (batched[row, :t_len] - alone[0]).abs().max() <= ROUNDING, f"row {row} depends on padding"


def check_causality(model):
    """Changing token j changes the logit at j, and, where the model is causal, no logit before j;
    an encoder's earlier logits must change (it reads the whole row). With a sliding window, a
    token reaches (window - 1) positions further per layer (each layer's own), and never past that. All changes in
    one batch, row j of which has token j replaced."""
    spec = model.spec
    src, tgt = padded_batch([6], 19, seed=6), padded_batch([8], 19, seed=7)
    length = tgt.size(1)
    changed = tgt.repeat(length, 1)
    steps = torch.arange(length)
    changed[steps, steps] = 3 + (changed[steps, steps] - 2) % 16  # another ordinary token
    before, after = logits_of(model, src, tgt), logits_of(model, src.repeat(length, 1), changed)
    moved = (after - before).abs().amax(dim=-1)  # (changed token j, position)
    distance = (steps[None, :] - steps[:, None]).abs()  # row j, position i: |i - j|
    stack, layers = ("encoder", spec.n_encoder_layers) if spec.kind == "encoder" else ("decoder", spec.n_decoder_layers)
    windows = [spec.at_layer(stack, i).attn.window for i in range(layers)]  # per-layer rules may differ
    reached = distance < (length if None in windows else sum(window - 1 for window in windows) + 1)
    earlier = torch.ones(length, length, dtype=torch.bool).tril(-1)  # row j, positions before j
    if spec.kind == "encoder":
        assert (moved[earlier & reached] > ROUNDING).all(), "an encoder position does not see a later token"
    else:
        assert moved[earlier].max() <= ROUNDING, "a position sees a later token"
    assert not (moved[~reached] > ROUNDING).any(), "a position sees a token beyond its window"
    assert (moved.diagonal() > ROUNDING).all(), "a position does not see its own token"


def check_all_padding_rows(model):
    src, tgt = padded_batch([5, 5], 19, seed=8), padded_batch([4, 4], 19, seed=9)
    src[1], tgt[1] = 0, 0
    model.train()
    logits = logits_of(model, src, tgt)
    assert torch.isfinite(logits).all()
    logits.sum().backward()
    for name, param in model.named_parameters():
        if param.requires_grad:  # a fixed logits bias is never trained
            assert param.grad is not None and torch.isfinite(param.grad).all(), name
    model.eval()
    if model.spec.kind != "encoder":
        assert torch.isfinite(model.generate(src if model.spec.kind == "encoder_decoder" else tgt,
                                             max_new_tokens=3)).all()


def check_cached_decoding_equals_recompute(model):
    """Greedy and beam search, for the kinds that decode. On a vocabulary of 3 ordinary tokens, so
    that rows stop at eos early and feed padding on, and beams finish at different steps; a
    decoder-only model's prompts are right-padded, of different lengths."""
    spec = model.spec
    if spec.kind == "encoder":
        return
    inputs = padded_batch([6, 3, 5, 4, 6, 2], 6, seed=10)
    if spec.kind == "decoder":  # prompts: the start token, then a right-padded row
        inputs = torch.cat([torch.full((inputs.size(0), 1), spec.bos_id), inputs], dim=1)
    with torch.no_grad():
        expected = reference_greedy(model, inputs, steps=7)
    generated = model.generate(inputs, max_new_tokens=7)
    assert torch.equal(generated, expected)
    prompt = 1 if spec.kind == "encoder_decoder" else 0
    for row, ids in zip(inputs, generated, strict=True):
        if spec.kind == "decoder":
            prompt = int((row != spec.pad_id).sum())
            assert torch.equal(ids[:prompt], row[:prompt]), "the output starts with the prompt"
        else:
            assert ids[0] == spec.bos_id
        new = ids[prompt : prompt + 7]  # after 7 new tokens, only the padding of shorter rows
        eos = (new == spec.eos_id).nonzero()
        end = int(eos[0, 0]) if len(eos) else len(new)
        assert not torch.isin(new[:end], torch.tensor(never_emitted(spec))).any(), "emitted pad or the start token"
        assert (new[end + 1 :] == spec.pad_id).all(), "a row goes on after its eos"
    some = inputs[:3]
    beams = model.generate(some, max_new_tokens=5, num_beams=2, length_penalty=0.6)
    assert torch.equal(beams, model.generate(some, max_new_tokens=5, num_beams=2, length_penalty=0.6, use_cache=False))
    one_beam = model.generate(some, max_new_tokens=5, num_beams=1)
    assert torch.equal(model.generate(some, max_new_tokens=5, num_beams=1, use_cache=False), one_beam)
