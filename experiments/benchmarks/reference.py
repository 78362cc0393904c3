"""Training speed of the zoo's imports of transformers' T5 and BART against transformers' own models,
measured interleaved in one process (ratios of medians).

    python experiments/benchmarks/reference.py [--rounds 5] [--smoke] [--device cuda]   # prints JSON

Each family at its preset's size (T5-small: d_model 512, 8 heads of 64, d_ff 2048, 6+6 layers;
bart-base: d_model 768, 12 heads, d_ff 3072, 6+6 layers) with a 4,000-token vocabulary, so that the
stacks, not the output softmax, take the time: transformers' model from its configuration (its
default attention implementation), `zoo.from_hf` of it (the `fused` layout the import gives) and
that model converted to `sdpa`. One Adam step on a batch of 16 x 64 tokens, half the rows a
quarter padding, dropout 0.1 in train mode, the same token-mean cross-entropy on the logits for
all. The target: the zoo at least 1.05x transformers' tokens per second, for both families.
`--device cuda` runs the same steps in bf16 autocast.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from common import emit, interleaved, machine, say

import zoo

VOCAB, ROWS, LENGTH, TARGET = 4000, 16, 64, 1.05
SMOKE = dict(d_model=32, n_heads=2, head_width=16, d_ff=64, n_encoder_layers=1, n_decoder_layers=1)


def data(spec: zoo.ModelSpec, rows: int, length: int, device: str):
    """Source, decoder input and target with the family's pad and start ids, and the masks
    transformers takes (built once, outside the timed step, as a data loader would)."""
    gen = torch.Generator().manual_seed(0)
    ordinary = torch.tensor([i for i in range(spec.tgt_vocab_size) if i not in (spec.pad_id, spec.bos_id, spec.eos_id)])
    src, tgt = (ordinary[torch.randint(len(ordinary), (rows, length), generator=gen)] for _ in range(2))
    src[1::2, -length // 4 :], tgt[1::2, -length // 4 :] = spec.pad_id, spec.pad_id
    tgt_in = torch.cat([torch.full((rows, 1), spec.bos_id), tgt[:, :-1]], dim=1)
    decoder_mask = (tgt_in != spec.pad_id).long()
    decoder_mask[:, 0] = 1
    return [t.to(device) for t in (src, tgt_in, tgt, (src != spec.pad_id).long(), decoder_mask)]


def step(model, batch, pad: int, reference: bool, dtype: torch.dtype | None):
    src, tgt_in, tgt, mask, decoder_mask = batch
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    model.train()

    def run() -> None:
        with torch.autocast(src.device.type, dtype=dtype, enabled=dtype is not None):
            if reference:
                logits = model(input_ids=src, attention_mask=mask, decoder_input_ids=tgt_in,
                               decoder_attention_mask=decoder_mask).logits
            else:
                logits = model(src, tgt_in)
        loss = F.cross_entropy(logits.float().flatten(0, 1), tgt.flatten(), ignore_index=pad)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if src.device.type == "cuda":
            torch.cuda.synchronize()

    return run


def family(preset: str, rounds: int, smoke: bool, device: str) -> dict:
    spec = zoo.spec(preset, vocab_size=VOCAB, **(SMOKE if smoke else {}))
    reference = zoo.to_hf(zoo.build(spec, seed=0)).to(device)
    imported = zoo.from_hf(reference)
    dtype = torch.bfloat16 if device == "cuda" else None
    batch = data(spec, 4 if smoke else ROWS, 8 if smoke else LENGTH, device)
    contenders = {"transformers": step(reference, batch, spec.pad_id, True, dtype),
                  "zoo fused": step(imported, batch, spec.pad_id, False, dtype),
                  "zoo sdpa": step(zoo.convert(imported, attention="sdpa"), batch, spec.pad_id, False, dtype)}
    say(f"{preset}: {imported.num_parameters():,d} parameters, {', '.join(contenders)}")
    seconds = interleaved(contenders, rounds)
    tokens = batch[0].numel() + batch[1].numel()
    per_s = {name: tokens / s for name, s in seconds.items()}
    ratios = {name: per_s[name] / per_s["transformers"] for name in per_s if name != "transformers"}
    return {"preset": preset, "parameters": imported.num_parameters(), "batch": list(batch[0].shape),
            "tokens_per_step": tokens,
            "transformers_attention": reference.config._attn_implementation, "tokens_per_s": per_s,
            "ratio_to_transformers": ratios, "target": TARGET,
            "meets_target": {name: ratio >= TARGET for name, ratio in ratios.items()}}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="tiny models and 1 round: checks that the script runs")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    rounds = 1 if args.smoke else args.rounds
    result = {"machine": machine(), "device": args.device, "rounds": rounds,
              "families": [family(preset, rounds, args.smoke, args.device) for preset in ("t5", "bart")]}
    emit(result)
    return result


if __name__ == "__main__":
    main()
