"""Helpers for the trainer tests: a tiny experiment and W&B's own reader of offline runs."""

import gzip
import json
import subprocess
import sys
from functools import cache
from pathlib import Path

MULTI30K = Path(__file__).resolve().parent / "fixtures" / "multi30k"
"""A sample of the real Multi30k files that ships with the tests (2,000 training pairs, 200 valid
and 200 test; tests/fixtures/multi30k/README.md), so the suite needs nothing beside the clone."""


def task_fields(name: str, **overrides) -> dict:
    """Fields that make the registered task `name` small; tasks that read files get the
    sample of Multi30k."""
    fields = {"name": name}
    if name == "parallel":
        fields.update(data_dir=str(MULTI30K), valid_split="val", test_split="test_2016_flickr",
                      train_sentences=2000, vocab_size=1000)
    if name in ("lm", "mlm"):  # one side of the corpus
        fields.update(data_dir=str(MULTI30K), lang="en", valid_split="val", test_split="test_2016_flickr",
                      train_sentences=2000, vocab_size=1000)
    if name == "lm_shards":  # a token store of the English side, prepared once per process
        fields.update(path=str(sample_store("documents")), pack=32)
    if name == "parallel_shards":
        fields.update(path=str(sample_store("pairs")), max_tokens=64)
    return {**fields, **overrides}


@cache
def sample_store(corpus: str) -> Path:
    """A token store of the Multi30k sample (its English side as documents, or its pairs with the
    corpus's own splits), prepared once per test process into a folder removed at its exit."""
    import atexit
    import shutil
    import tempfile

    from zoo.tasks.shard_prepare import Preparation, PrepareSettings

    folder = Path(tempfile.mkdtemp(prefix=f"zoo-store-{corpus}-"))
    atexit.register(shutil.rmtree, folder, True)
    if corpus == "documents":
        settings = PrepareSettings(vocab_size=1000, valid_share=0.1, test_share=0.1, max_unknown=0.05)
        sources = [str(MULTI30K / "train.en.gz")]
    else:
        settings = PrepareSettings(vocab_size=1000, pair=("de", "en"), parallel_splits=("train", "val", "test_2016_flickr"),
                                   max_unknown=0.05)
        sources = [str(MULTI30K)]
    Preparation(sources, folder / "store", settings, command="tests", progress=False).run()
    return folder / "store"


def tiny_experiment(out_dir, **groups) -> dict:
    """A run of a few seconds on 2 cores; `groups` update the model, train or wandb fields, or
    replace the task."""
    experiment = {
        "model": {"preset": "vaswani2017", "d_model": 32, "n_heads": 2, "d_ff": 64,
                  "n_encoder_layers": 1, "n_decoder_layers": 1, "dropout": 0.0},
        "task": {"name": "reverse", "min_len": 3, "max_len": 6},
        "train": {"steps": 120, "batch_size": 32, "eval_every": 60, "eval_size": 32, "log_every": 20,
                  "checkpoint_every": 60, "warmup_steps": 5, "schedule": "constant",
                  "optimizer": {"lr": 3e-3}, "out_dir": str(out_dir)},
        "wandb": {"mode": "disabled", "dir": str(out_dir)},
    }
    for group, fields in groups.items():
        experiment[group] = fields if group == "task" else {**experiment[group], **fields}
    return experiment


DIVERGING = {"optimizer": {"lr": 1e30}, "warmup_steps": 0, "grad_clip": None, "schedule": "constant"}
"""Train fields whose first steps are not finite."""


def diverged_run(tmp_path, match: str, **train) -> tuple[Exception, int, Path, dict]:
    """Train the tiny experiment with DIVERGING and `train` fields, expect zoo.Diverged matching
    `match`; returns the error, the step it names, the run folder and its result.json."""
    import pytest

    import zoo

    with pytest.raises(zoo.Diverged, match=match) as err:
        zoo.train(tiny_experiment(tmp_path, train={**DIVERGING, **train}))
    failed = int(err.value.args[0].split("step ")[1].split(":")[0])
    (run_dir,) = Path(tmp_path).glob("post.sinusoidal.fused.relu-seed0-*")
    return err.value, failed, run_dir, json.loads((run_dir / "result.json").read_text())


def run_dir_of(experiment: dict) -> Path:
    """The folder the trainer gives an experiment: out_dir/<variant>-seed<seed>-<fingerprint>."""
    from zoo.specs.experiment import ExperimentSpec
    from zoo.specs.identity import run_name

    spec = ExperimentSpec.model_validate(experiment)
    return Path(spec.train.out_dir) / run_name(spec)


def wandb_cli() -> str:
    return str(Path(sys.executable).with_name("wandb"))


def read_run(run_dir) -> tuple[dict, list[dict]]:
    """(summary, records) of an offline run, read with `wandb leet inspect`, W&B's own reader."""
    def inspect(*flags: str) -> str:
        done = subprocess.run([wandb_cli(), "leet", "inspect", *flags, "--json", str(run_dir)], capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, f"wandb leet inspect {' '.join(flags)} {run_dir}: {done.stderr[-2000:]}"
        return done.stdout

    summary, records = inspect("--summary"), inspect()
    return json.loads(summary), [json.loads(line) for line in records.splitlines() if line.strip()]


def offline_run(wandb_dir) -> tuple[dict, list[dict]]:
    """read_run of the one offline W&B run under wandb_dir/wandb."""
    runs = sorted((Path(wandb_dir) / "wandb").glob("offline-run-*"))
    assert len(runs) == 1, f"expected one offline run in {wandb_dir}/wandb, found {runs}"
    return read_run(runs[0])


WORDS = ["the", "cat", "sat", "on", "a", "mat", "and", "the", "dog", "ran", "in", "a", "park", "while", "birds", "sang"]


def write_corpus(folder, name="txt", lines=200, gz=False):
    """Deterministic lines of the words of WORDS in train, valid and test files (`lm`, `mlm`)."""
    folder.mkdir(parents=True, exist_ok=True)
    for split, count in (("train", lines), ("valid", 40), ("test", 40)):
        text = "".join(" ".join(WORDS[(i * 7 + j * 3 + len(split)) % len(WORDS)] for j in range(3 + i % 6)) + "\n"
                       for i in range(count))
        path = folder / f"{split}.{name}"
        if gz:
            with gzip.open(f"{path}.gz", "wt", encoding="utf-8") as handle:
                handle.write(text)
        else:
            path.write_text(text, encoding="utf-8")
    return str(folder)


def text_task(name, data_dir, **fields):
    return {"name": name, "data_dir": data_dir, "tokenizer": "word", "vocab_size": 64, "min_frequency": 1, **fields}


def signal_after_first_checkpoint(process, checkpoint, signum=None, wait_s: float = 120.0) -> None:
    """Send `signum` (SIGKILL) to a training process once `checkpoint` exists (or it ended, or
    `wait_s` passed), and wait for it to go."""
    import signal
    import time

    deadline = time.monotonic() + wait_s
    while not Path(checkpoint).exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL if signum is None else signum)
    process.wait(timeout=30)
