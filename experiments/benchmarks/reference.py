"""Training speed of the zoo's import of every family of transformers it reads (zoo.interop.FAMILIES)
against transformers' own model, measured interleaved in one process (ratios of medians).

    python experiments/benchmarks/reference.py [--rounds 5] [--smoke] [--device cuda] [--only t5 gpt2]   # JSON

Each family at one shared size, its own layout: its preset with d_model 512, 8 heads of 64, d_ff 2048,
4 layers per stack and a 4,000-token vocabulary (so that the stacks, not the output softmax, take
the time; the presets' published sizes run to 35B), its own key/value head count, windows and
per-layer rules. transformers' model is `zoo.to_hf` of the zoo's, so both hold the same weights; its
attention is the one its configuration picks by default (sdpa where the class supports it, else
eager: the row says which). The zoo's contenders: `zoo.from_hf` of that model (the `fused` layout
the import gives) and the same converted to `sdpa`. One Adam step on a batch of 16 x 64 tokens, half
the rows a quarter padding, dropout 0.1 in train mode at the sites where the family drops (its
preset's: Llama's attention weights only, GPT-2's no activations, ...), the same token-mean
cross-entropy on the logits for all: translation for encoder-decoders, next tokens for decoders, every token for encoders. The
target: the better zoo layout at least 1.0x transformers' tokens per second, for every family.
`--device cuda` runs the same steps in bf16 autocast.
"""

from __future__ import annotations

import argparse
import math

import torch
import torch.nn.functional as F
from common import emit, interleaved, machine, say

import zoo

VOCAB, ROWS, LENGTH, TARGET = 4000, 16, 64, 1.0
SIZE = dict(d_model=512, n_heads=8, head_width=64, d_ff=2048, n_encoder_layers=4, n_decoder_layers=4, dropout=0.1)
IDS = dict(pad_id=0, bos_id=1, eos_id=2)
SMOKE = dict(SIZE, d_model=32, n_heads=2, head_width=16, d_ff=128, n_encoder_layers=1, n_decoder_layers=1)
NO_DROPOUT = {"mpt"}
"""Families whose configuration cannot hold dropout 0.1 (transformers 5's MptConfig types attn_pdrop as
an int): measured without dropout, in both models."""


def data(spec: zoo.ModelSpec, rows: int, length: int, device: str) -> dict[str, torch.Tensor]:
    """Inputs, decoder inputs and targets with the family's pad and start ids, and the masks
    transformers takes (built once, outside the timed step, as a data loader would)."""
    gen = torch.Generator().manual_seed(0)
    ordinary = torch.tensor([i for i in range(spec.tgt_vocab_size) if i not in (spec.pad_id, spec.bos_id, spec.eos_id)])
    src, tgt = (ordinary[torch.randint(len(ordinary), (rows, length), generator=gen)] for _ in range(2))
    src[1::2, -length // 4 :], tgt[1::2, -length // 4 :] = spec.pad_id, spec.pad_id
    tgt_in = torch.cat([torch.full((rows, 1), spec.bos_id), tgt[:, :-1]], dim=1)
    decoder_mask = (tgt_in != spec.pad_id).long()
    decoder_mask[:, 0] = 1
    batch = {"src": src, "tgt_in": tgt_in, "tgt": tgt, "mask": (src != spec.pad_id).long(), "decoder_mask": decoder_mask}
    return {name: t.to(device) for name, t in batch.items()}


def logits_of(model, batch: dict[str, torch.Tensor], kind: str, reference: bool) -> torch.Tensor:
    """The logits each model computes for the task of its kind, called as its users call it."""
    if kind == "encoder_decoder":
        if reference:
            return model(input_ids=batch["src"], attention_mask=batch["mask"], decoder_input_ids=batch["tgt_in"],
                         decoder_attention_mask=batch["decoder_mask"]).logits
        return model(batch["src"], batch["tgt_in"])
    if reference:
        return model(input_ids=batch["src"], attention_mask=batch["mask"]).logits
    return model(batch["src"])


def step(model, batch: dict[str, torch.Tensor], spec: zoo.ModelSpec, reference: bool, dtype: torch.dtype | None):
    """One Adam step: cross-entropy against the next token (decoders), the target (encoder-decoders)
    or the token itself (encoders, as an unmasked masked-LM step)."""
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    model.train()
    device = batch["src"].device
    target = {"encoder_decoder": batch["tgt"], "encoder": batch["src"],
              "decoder": torch.cat([batch["src"][:, 1:], torch.full_like(batch["src"][:, :1], spec.pad_id)], dim=1)}
    target = target[spec.kind]

    def run() -> None:
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            logits = logits_of(model, batch, spec.kind, reference)
        loss = F.cross_entropy(logits.float().flatten(0, 1), target.flatten(), ignore_index=spec.pad_id)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize()

    return run


def shrunk(preset: str, size: dict) -> zoo.ModelSpec:
    """The preset at the benchmark's size, with its own special ids where its tokenizer's fit the
    small vocabulary (RoBERTa's positions start after its pad id), else 0, 1 and 2, and its key/value
    heads where they divide the query heads (else the largest count that does)."""
    kv = zoo.spec(preset, vocab_size=VOCAB, **IDS).attn.n_kv_heads
    size = {**size, "n_kv_heads": math.gcd(kv or size["n_heads"], size["n_heads"])}
    try:
        return zoo.spec(preset, vocab_size=VOCAB, **size)
    except zoo.ConfigError:
        return zoo.spec(preset, vocab_size=VOCAB, **size, **IDS)


def family(name: str, rounds: int, smoke: bool, device: str) -> dict:
    preset = zoo.interop.FAMILIES[name].preset_name
    spec = shrunk(preset, {**(SMOKE if smoke else SIZE), **({"dropout": 0.0} if name in NO_DROPOUT else {})})
    reference = zoo.to_hf(zoo.build(spec, seed=0), family=name).to(device)
    imported = zoo.from_hf(reference, pad_id=spec.pad_id)
    dtype = torch.bfloat16 if device == "cuda" else None
    batch = data(imported.spec, 4 if smoke else ROWS, 8 if smoke else LENGTH, device)
    contenders = {"transformers": step(reference, batch, imported.spec, True, dtype),
                  "zoo fused": step(imported, batch, imported.spec, False, dtype),
                  "zoo sdpa": step(zoo.convert(imported, attention="sdpa"), batch, imported.spec, False, dtype)}
    attention = reference.config._attn_implementation
    say(f"{name} ({type(reference).__name__}, {attention}): {imported.num_parameters():,d} parameters")
    seconds = interleaved(contenders, rounds)
    tokens = batch["src"].numel() + batch["tgt_in"].numel() * (spec.kind == "encoder_decoder")
    per_s = {contender: tokens / s for contender, s in seconds.items()}
    ratios = {contender: per_s[contender] / per_s["transformers"] for contender in per_s if contender != "transformers"}
    return {"family": name, "preset": preset, "reference": type(reference).__name__, "kind": spec.kind,
            "dropout": spec.dropout,
            "parameters": imported.num_parameters(), "batch": list(batch["src"].shape), "tokens_per_step": tokens,
            "transformers_attention": attention, "tokens_per_s": per_s, "ratio_to_transformers": ratios,
            "best_ratio": max(ratios.values()), "target": TARGET, "meets_target": max(ratios.values()) >= TARGET}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="tiny models and 1 round: checks that the script runs")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--only", nargs="*", default=None, help="these families alone (names of zoo.interop.FAMILIES)")
    args = parser.parse_args(argv)
    rounds = 1 if args.smoke else args.rounds
    names = args.only or list(zoo.interop.FAMILIES)
    unknown = sorted(set(names) - set(zoo.interop.FAMILIES))
    if unknown:
        parser.error(f"--only {', '.join(unknown)}: families are {', '.join(zoo.interop.FAMILIES)}")
    families = [family(name, rounds, args.smoke, args.device) for name in names]
    result = {"machine": machine(), "device": args.device, "rounds": rounds, "families": families,
              "below_target": [f["family"] for f in families if not f["meets_target"]]}
    emit(result)
    return result


if __name__ == "__main__":
    main()
