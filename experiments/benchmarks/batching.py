"""Sentence batches against token batches on Multi30k: padding and real-token training throughput.

    python experiments/benchmarks/batching.py --data-dir /path/to/multi30k [--rounds 6]   # prints JSON
    python experiments/benchmarks/batching.py --smoke     # a tiny corpus made on the spot: checks the script

Sentence batches hold `train.batch_size` (128) pairs in random order; token batches (`train.
batch_tokens`) hold pairs of similar length up to a budget of padded positions, set here to the
mean padded size of the sentence batches, so both cost about the same per step. Padding shares
are counted over 500 batches of each, source and target sides together. Throughput is real
(non-padding) target tokens per second of training steps of a 2+2-layer d_model 256 model,
interleaved: each round trains a few steps of each kind.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from common import emit, interleaved, machine, say

import zoo
from zoo.tasks import build_task

PAD = 0


def padding(batches) -> dict[str, float]:
    real = slots = 0
    for src, tgt in batches:
        real += int((src != PAD).sum() + (tgt != PAD).sum())
        slots += src.numel() + tgt.numel()
    return {"padding_share": round(1 - real / slots, 4), "positions_per_batch": round(slots / len(batches))}


def trainer_of(task, next_batch, steps: int, d: int = 256):
    """`steps` training steps per call on batches from next_batch(step); counts real target tokens."""
    torch.manual_seed(0)
    model = zoo.build("torch-transformer", src_vocab_size=len(task.src_vocab), tgt_vocab_size=len(task.tgt_vocab),
                      d_model=d, n_heads=4, d_ff=4 * d, n_encoder_layers=2, n_decoder_layers=2, dropout=0.1,
                      max_len=256, seed=0).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-4)
    state = {"step": 0, "tokens": 0, "seconds": 0.0}

    def run() -> None:
        start = time.perf_counter()
        for _ in range(steps):
            state["step"] += 1
            src, tgt = next_batch(state["step"])
            labels = tgt[:, 1:]
            tokens = int((labels != PAD).sum())
            logits = model(src, tgt[:, :-1])
            loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=PAD, reduction="sum") / tokens
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            state["tokens"] += tokens
        state["seconds"] += time.perf_counter() - start

    return run, state


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", help="the Multi30k folder (train, val, test_2016_flickr .de/.en[.gz]); with "
                        "--smoke and none given, a tiny corpus made on the spot")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--steps", type=int, default=5, help="training steps of each kind per round")
    parser.add_argument("--smoke", action="store_true", help="200 training pairs, one round: checks the script")
    args = parser.parse_args(argv)
    if args.data_dir is None and not args.smoke:
        parser.error("--data-dir is needed: the folder of the Multi30k files")
    with tempfile.TemporaryDirectory() as scratch:
        return measure(args, args.data_dir or tiny_corpus(Path(scratch)))


def tiny_corpus(folder: Path) -> str:
    """Sentence pairs of 2 to 30 made-up words, as Multi30k's file names: enough for --smoke."""
    gen = torch.Generator().manual_seed(0)
    words = [f"w{i}" for i in range(60)]
    for split, count in (("train", 300), ("val", 20), ("test_2016_flickr", 20)):
        lengths = torch.randint(2, 31, (count,), generator=gen).tolist()
        lines = [" ".join(words[i] for i in torch.randint(60, (n,), generator=gen).tolist()) for n in lengths]
        for lang in ("de", "en"):
            (folder / f"{split}.{lang}").write_text("".join(f"{line}\n" for line in lines))
    return str(folder)


def measure(args: argparse.Namespace, data_dir: str) -> dict:
    fields = {"name": "parallel", "data_dir": data_dir, "valid_split": "val", "test_split": "test_2016_flickr",
              "vocab_size": 8000, "max_tokens": 128}
    if args.smoke:
        fields.update(train_sentences=200, vocab_size=500)
    task = build_task(fields, seed=0)
    count = 20 if args.smoke else 500
    sentences = [task.train_batch(step, args.batch_size) for step in range(count)]
    budget = padding(sentences)["positions_per_batch"] // 2  # per side: rows x the longer side's length
    tokens = [task.token_batch(step, budget) for step in range(count)]
    shares = {"sentence batches": padding(sentences), "token batches": padding(tokens)}
    say(f"padding: {shares}")
    steps, d = (1, 32) if args.smoke else (args.steps, 256)
    sentence_run, sentence_state = trainer_of(task, lambda s: task.train_batch(s, args.batch_size), steps, d)
    token_run, token_state = trainer_of(task, lambda s: task.token_batch(s, budget), steps, d)
    interleaved({"sentence batches": sentence_run, "token batches": token_run}, 1 if args.smoke else args.rounds, 1)
    throughput = {name: round(state["tokens"] / state["seconds"]) for name, state in
                  (("sentence batches", sentence_state), ("token batches", token_state))}
    ratio = throughput["token batches"] / throughput["sentence batches"]
    say(f"real target tokens/s: {throughput}; token / sentence batches {ratio:.2f}x")
    corpus = "a tiny made-up corpus" if args.data_dir is None else "Multi30k de-en, bpe 8000"
    result = {"benchmark": "batching", "smoke": args.smoke, "machine": machine(), "corpus": corpus,
              "batch_size": args.batch_size, "batch_tokens": budget, "padding": shares,
              "real_target_tokens_per_s": throughput, "ratio_token_to_sentence_batches": round(ratio, 3),
              "note": "throughput counts every step run, warm-up included, interleaved"}
    emit(result)
    return result


if __name__ == "__main__":
    main()
