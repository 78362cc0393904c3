"""`train.compile` on batches of varying length: bucketed shapes bound the graphs torch.compile
makes (counted with dynamo's own counters), the log says what compiling cost, and a bucketed
batch trains what the batch it pads trains. The graphs are counted with the "eager" backend: how
many graphs dynamo captures does not depend on what compiles them, and it takes seconds, not
minutes, on 2 cores. test_gpu.py runs inductor on CUDA."""

import pytest
import torch

import zoo
import zoo.trainer.compiled as compiled
from trainkit import tiny_experiment
from zoo.model.kinds import model_class
from zoo.tasks import build_task
from zoo.trainer.buckets import bucket, bucketed, explicit
from zoo.trainer.feed import BatchFeed
from zoo.trainer.parallelism import Parallelism

pytestmark = pytest.mark.slow  # trains whole runs, starts processes or runs benchmarks: not in the fast tier

LENGTHS = {"name": "reverse", "min_len": 3, "max_len": 40}
"""Strings of 3 to 40 symbols in batches of 4: nearly every step has other lengths."""


def test_buckets_are_few_and_waste_at_most_a_third():
    assert [bucket(n) for n in (1, 8, 9, 12, 13, 17, 25, 33, 49, 65, 97, 1000)] == [
        8, 8, 12, 12, 16, 24, 32, 48, 64, 96, 128, 1024]
    sizes = [bucket(n) for n in range(1, 1025)]
    assert len(set(sizes)) == 15 and sizes == sorted(sizes)
    assert all(n <= size <= max(8, 1.5 * n) for n, size in zip(range(1, 1025), sizes))


def test_a_bucketed_batch_is_the_batch_padded_with_masks_written_out():
    spec = zoo.spec("decoder.pre.rope.sdpa.relu", vocab_size=30, max_len=60)
    task = build_task(LENGTHS, seed=0)
    src, tgt = task.train_batch(3, 5)
    inputs, labels = model_class(spec).frame(spec, src, tgt)
    (padded,), padded_labels = bucketed(inputs, labels, spec.pad_id, spec.max_len, rows=True)
    assert inputs[0].size(1) > 48, "prompt and continuation in one sequence"
    assert padded.shape == padded_labels.shape == (8, 60), "5 rows -> 8; the length's bucket, 64, stops at max_len"
    assert torch.equal(padded[:5, : inputs[0].size(1)], inputs[0]) and (padded[5:] == spec.pad_id).all()
    assert torch.equal(padded_labels[:5, : labels.size(1)], labels) and (padded_labels[:, labels.size(1):] == 0).all()
    (mask,) = explicit((None,), (padded,))
    assert mask.shape == (8, 1, 1, 60) and mask.all()


def losses(result) -> list[float]:
    return [row["train/loss"] for row in result.history if "train/loss" in row]


def test_compiled_training_on_many_lengths_makes_a_graph_per_bucket_and_trains_the_same(tmp_path, monkeypatch):
    monkeypatch.setattr(compiled, "BACKEND", "eager")
    train = {"steps": 40, "batch_size": 4, "eval_every": 40, "log_every": 10, "device": "cpu"}
    task = build_task(LENGTHS, seed=0)
    shapes = {(src.size(1), tgt.size(1)) for src, tgt in (task.train_batch(step, 4) for step in range(1, 41))}
    buckets = {(bucket(s), bucket(t - 1)) for s, t in shapes}
    assert len(shapes) > 3 * len(buckets)

    before = compiled.graphs_so_far()
    result = zoo.train(tiny_experiment(tmp_path / "compiled", task=LENGTHS, train={**train, "compile": True}))
    assert compiled.graphs_so_far() - before == len(buckets), "one static graph per bucket, none per length"
    last = [row for row in result.history if "train/loss" in row][-1]
    assert last["train/compiled_graphs"] == len(buckets) and 0 < last["train/compile_s"] < last["train/wall_s"]

    eager = zoo.train(tiny_experiment(tmp_path / "eager", task=LENGTHS, train=train))
    assert "train/compile_s" not in eager.history[0]
    assert losses(result) == pytest.approx(losses(eager), rel=1e-5), "padding changes no real token's result"
    assert result.metrics["eval/loss"] == pytest.approx(eager.metrics["eval/loss"], rel=1e-5)


def test_token_batches_bucket_their_rows_too(tmp_path, monkeypatch):
    """Token batches vary in rows as well as lengths: one graph per bucketed shape of the batch."""
    monkeypatch.setattr(compiled, "BACKEND", "eager")
    experiment = tiny_experiment(tmp_path, task=LENGTHS, train={"steps": 30, "batch_size": 4, "batch_tokens": 120,
                                                                "eval_every": 30, "device": "cpu", "compile": True})
    model = dict(experiment["model"])
    spec = zoo.spec(model.pop("preset"), **model, vocab_size=64)
    task = build_task(LENGTHS, seed=0)
    raw, padded = set(), set()
    for step in range(1, 31):
        [batch] = BatchFeed(task, 4, spec, Parallelism(), torch.device("cpu"), 120, buckets=True).take(step)
        src, tgt = task.token_batch(step, 120)
        raw.add((src.shape, tgt.shape))
        padded.add(tuple(t.shape for t in batch.inputs))
        assert all(mask is not None for mask in batch.padding)
    assert len(raw) > 2 * len(padded)
    before = compiled.graphs_so_far()
    zoo.train(experiment)
    assert compiled.graphs_so_far() - before == len(padded)
