"""Token stores: the zoo's shards against litdata, memory against corpus size, and the loader
against what a training step consumes.

    python experiments/benchmarks/data.py [--smoke] [--corpus-mb 50]     # prints JSON

1. Stores, side by side on one corpus (the Python standard library's sources on this machine, and
   the installed packages' to reach --corpus-mb) and one tokenizer (byte-level BPE of 8,000,
   learned once by the zoo's first preparation, which is timed apart): the zoo's shards (`zoo
   data prepare`: raw files read by positioned reads) and litdata's (litgpt's: `optimize` with a
   TokensLoader, read back by a shuffled StreamingDataset), each made and read in a child process
   of its own, each encoding with one process and the tokenizer's own threads: tokens/s to
   prepare and to read rows of 1,024, and each child's peak RSS. The zoo reads rows in a global
   permutation; litdata shuffles chunks and reads within a chunk in order.
2. Memory against corpus size: stores of random ids of 10 MB, 100 MB and 1 GB (written directly:
   tokenizing 1 GB would only time the tokenizer); a child opens each (every file's SHA-256
   checked, as training does) and reads 200 batches of 16 rows of 1,024. Target: peak RSS flat
   within 10% from the smallest to the largest.
3. The loader against a step: rows read by lm_shards against the tokens a d512 decoder (6 layers,
   d_ff 2048, a vocabulary of 8,000) trains on per second here, on batches of 4 rows of 1,024 (16
   rows hold 15 GB of activations on a CPU). Target: at least 20x.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import numpy as np
from common import emit, machine, say

ROW = 1024


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def corpus_files(limit_mb: float) -> list[Path]:
    """.py files of the standard library, then of the installed packages, up to `limit_mb`."""
    found, total = [], 0
    for root in (sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"]):
        for path in sorted(Path(root).rglob("*.py")):
            if total >= limit_mb * 1e6:
                return found
            try:
                path.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            found.append(path)
            total += path.stat().st_size
    return found


def child(*args: str) -> dict:
    """Run this script's `--child` mode in a fresh process; its JSON result."""
    done = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True, text=True, timeout=3600,
                          env={**os.environ, "TOKENIZERS_PARALLELISM": "true"})
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return json.loads(done.stdout)


def zoo_prepare(files_list: str, out: str, tokenizer_dir: str = "") -> dict:
    """The zoo's preparation of the files: learning its tokenizer and encoding, or with
    `tokenizer_dir` (the first preparation's tokenizer as a transformers folder) encoding alone."""
    from zoo.tasks.shard_prepare import Preparation, PrepareSettings
    from zoo.tasks.shard_store import ShardStore

    folder = Path(out).parent / "documents"  # a folder of documents: a file each (a file named alone: a line each)
    files = Path(files_list).read_text().split("\n")
    if not folder.exists():
        folder.mkdir()
        for number, path in enumerate(files):
            (folder / f"{number:06d}.py").symlink_to(path)
    share = max(0.01, 5 / len(files))  # a few held-out documents in a smoke run's small corpus too
    settings = PrepareSettings(tokenizer="bytes", vocab_size=8000, valid_share=share, test_share=share,
                               tokenizer_dir=tokenizer_dir or None)
    start = time.perf_counter()
    Preparation([str(folder)], out, settings, progress=False).run()
    seconds = time.perf_counter() - start
    tokens = sum(part["text"]["tokens"] for part in ShardStore.open(out, verify=False).summary().values())
    return {"seconds": seconds, "tokens": tokens, "tokens_per_s": tokens / seconds, "peak_rss_mb": peak_rss_mb()}


def tokenizer_folder(zoo_store: Path, out: Path) -> None:
    """The store's learned tokenizer as a transformers folder (tokenizer.json and its specials)."""
    state = json.loads((zoo_store / "codec.json").read_text())
    out.mkdir()
    (out / "tokenizer.json").write_text(state["tokenizer"])
    (out / "tokenizer_config.json").write_text(json.dumps({"pad_token": "<pad>", "bos_token": "<bos>",
                                                           "eos_token": "<eos>"}))


def zoo_read(store: str, batches: int, rows: int) -> dict:
    from zoo.tasks import build_task

    task = build_task({"name": "lm_shards", "path": store, "pack": ROW}, seed=0)
    opened = peak_rss_mb()
    start = time.perf_counter()
    for step in range(batches):
        task.train_batch(step, rows)
    seconds = time.perf_counter() - start
    return {"tokens_per_s": batches * rows * ROW / seconds, "peak_rss_mb": peak_rss_mb(), "rss_after_open_mb": opened}


def litdata_prepare(files_list: str, zoo_store: str, out: str) -> dict:
    """litdata's optimize over the same files, encoded by the zoo store's own tokenizer."""
    import torch
    from litdata import TokensLoader, optimize

    start = time.perf_counter()
    optimize(fn=LitTokenize(zoo_store), inputs=Path(files_list).read_text().split("\n"), output_dir=out,
             chunk_bytes="64MB", item_loader=TokensLoader(), num_workers=1, verbose=False, start_method="fork")
    seconds = time.perf_counter() - start
    tokens = sum(chunk["dim"] for chunk in json.loads((Path(out) / "index.json").read_text())["chunks"])
    del torch
    return {"seconds": seconds, "tokens": tokens, "tokens_per_s": tokens / seconds, "peak_rss_mb": peak_rss_mb()}


class LitTokenize:
    """One file's ids (bos ... eos), as the zoo stores them; picklable for litdata's workers."""

    def __init__(self, zoo_store: str):
        self.zoo_store, self.codec = zoo_store, None

    def __call__(self, path: str):
        import torch

        from zoo.tasks.shard_prepare import encode_documents
        from zoo.tasks.text import codec_from_state

        if self.codec is None:  # once per worker
            self.codec = codec_from_state(json.loads((Path(self.zoo_store) / "codec.json").read_text()))
        text = Path(path).read_text(encoding="utf-8").strip()
        if text:
            yield torch.tensor(encode_documents(self.codec, [text])[0], dtype=torch.int32)


def litdata_read(store: str, batches: int, rows: int) -> dict:
    from litdata import StreamingDataset, TokensLoader

    dataset = StreamingDataset(store, item_loader=TokensLoader(block_size=ROW), shuffle=True, seed=0)
    opened = peak_rss_mb()
    items = iter(dataset)
    start = time.perf_counter()
    for _ in range(batches * rows):
        next(items)
    seconds = time.perf_counter() - start
    return {"tokens_per_s": batches * rows * ROW / seconds, "peak_rss_mb": peak_rss_mb(), "rss_after_open_mb": opened}


def random_store(folder: str, megabytes: float) -> None:
    """A store of random documents (uint16 ids, 200 to 2,000 each) of about `megabytes` of ids."""
    from zoo.tasks.base import Vocabulary
    from zoo.tasks.shard_store import INDEX, index_text
    from zoo.tasks.shard_writer import ShardWriter, store_index

    out = Path(folder)
    out.mkdir(parents=True)
    vocab = Vocabulary([f"t{i}" for i in range(8000 - 3)])
    (out / "codec.json").write_text(json.dumps(vocab.state()))
    rng = np.random.default_rng(0)
    dtype = np.dtype("<u2")
    splits = {}
    for split, share in (("train", 1.0), ("valid", 0.002), ("test", 0.002)):
        writer, left = ShardWriter(out, split, "text", dtype, 100_000_000), int(megabytes * 1e6 * share / 2)
        while left > 0:
            sizes = rng.integers(200, 2000, 256)
            ids = rng.integers(3, 8000, int(sizes.sum()))
            documents = np.split(ids, np.cumsum(sizes)[:-1])
            writer.add([np.concatenate(([1], doc, [2])) for doc in documents], [int(size) * 4 for size in sizes])
            left -= int(sizes.sum())
        splits[split] = {"text": writer.finish()}
    index = store_index("documents", dtype, len(vocab), {"pad_id": 0, "bos_id": 1, "eos_id": 2}, out / "codec.json", splits,
                        pad_in_documents=0)
    (out / INDEX).write_text(index_text(index))


def step_tokens_per_s(rows: int, length: int, steps: int) -> float:
    """Tokens a d512 decoder trains on per second here (Adam, batches of rows x length)."""
    import torch

    import zoo

    torch.manual_seed(0)
    model = zoo.build(zoo.spec("decoder.pre.sinusoidal.fused.gelu", vocab_size=8000, d_model=512, n_heads=8, d_ff=2048,
                               n_decoder_layers=6, max_len=length))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    ids = torch.randint(3, 8000, (rows, length + 1))

    def step() -> None:
        logits = model(ids[:, :-1])
        torch.nn.functional.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten()).backward()
        optimizer.step()
        optimizer.zero_grad()

    step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return steps * rows * length / (time.perf_counter() - start)


def run_child(args: list[str]) -> None:
    what, *rest = args
    if what == "zoo_prepare":
        result = zoo_prepare(*rest)
    elif what == "zoo_read":
        result = zoo_read(rest[0], int(rest[1]), int(rest[2]))
    elif what == "litdata_prepare":
        result = litdata_prepare(*rest)
    elif what == "litdata_read":
        result = litdata_read(rest[0], int(rest[1]), int(rest[2]))
    else:
        raise SystemExit(f"unknown child {what}")
    print(json.dumps(result))


def stores(work: Path, corpus_mb: float, batches: int) -> dict:
    files = corpus_files(corpus_mb)
    listing = work / "files.txt"
    listing.write_text("\n".join(map(str, files)))
    say(f"stores: {len(files)} files, {sum(f.stat().st_size for f in files) / 1e6:.1f} MB")
    result = {"corpus_mb": sum(f.stat().st_size for f in files) / 1e6, "files": len(files)}
    learned = child("zoo_prepare", str(listing), str(work / "zoo"))
    tokenizer_folder(work / "zoo", work / "tokenizer")
    result["zoo"] = {"prepare, learning the tokenizer": learned,
                     "prepare": child("zoo_prepare", str(listing), str(work / "zoo-encode"), str(work / "tokenizer")),
                     "read": child("zoo_read", str(work / "zoo"), str(batches), "16")}
    try:
        import litdata  # noqa: F401
    except ImportError:
        result["litdata"] = "not installed (pip install litdata)"
        return result
    result["litdata"] = {"prepare": child("litdata_prepare", str(listing), str(work / "zoo"), str(work / "litdata")),
                         "read": child("litdata_read", str(work / "litdata"), str(batches), "16")}
    return result


def memory(work: Path, sizes_mb: list[float], batches: int) -> dict:
    rows = {}
    for size in sizes_mb:
        folder = work / f"random{size:g}"
        say(f"memory: writing a store of {size:g} MB of ids")
        random_store(str(folder), size)
        rows[f"{size:g} MB"] = child("zoo_read", str(folder), str(batches), "16")
    peaks = [row["peak_rss_mb"] for row in rows.values()]
    return {"stores": rows, "ratio_largest_to_smallest_peak": peaks[-1] / peaks[0]}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks the script, measures nothing")
    parser.add_argument("--corpus-mb", type=float, default=50.0)
    parser.add_argument("--parts", nargs="+", choices=("stores", "memory"), default=["stores", "memory"])
    parser.add_argument("--child", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.child:
        run_child(args.child)
        return {}
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        result = {"machine": machine()}
        if "stores" in args.parts:
            result["stores"] = stores(work, 1.0 if args.smoke else args.corpus_mb, 5 if args.smoke else 200)
        if "memory" not in args.parts:
            emit(result)
            return result
        result["memory"] = memory(work, [1, 4] if args.smoke else [10, 100, 1000], 5 if args.smoke else 200)
        loader = result["memory"]["stores"][next(reversed(result["memory"]["stores"]))]["tokens_per_s"]
        step = step_tokens_per_s(2 if args.smoke else 4, 64 if args.smoke else ROW, 1 if args.smoke else 3)
        result["loader"] = {"loader_tokens_per_s": loader, "d512_step_tokens_per_s": step,
                            "ratio_loader_to_step": loader / step}
    emit(result)
    return result


if __name__ == "__main__":
    main()
