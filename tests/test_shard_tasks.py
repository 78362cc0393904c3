"""Training from a token store: `lm_shards` cuts the training documents into rows exactly as `lm`
packs text, visits every row once an epoch in an order that is a function of (seed, step) alone,
lets each rank read only its rows, and scores its held-out documents in bits per byte;
`parallel_shards` trains an encoder-decoder from a store of sentence pairs."""

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from shardkit import SETTINGS, corpus_folder, prepare

import zoo
from trainkit import MULTI30K, run_dir_of, tiny_experiment
from zoo.errors import ConfigError
from zoo.model.kinds import model_class
from zoo.tasks import build_task
from zoo.tasks.packing import offsets_of, packed
from zoo.tasks.shard_order import RowPermutation, epoch_rows
from zoo.tasks.shard_store import ShardStore
from zoo.tasks.text import codec_from_state

PACK = 16
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("shards")
    prepare([corpus_folder(root / "corpus")], root / "store")
    return root / "store"


@pytest.fixture(scope="module")
def pair_store(tmp_path_factory):
    root = tmp_path_factory.mktemp("pairs")
    settings = dataclasses.replace(SETTINGS, pair=("de", "en"), parallel_splits=("train", "val", "test_2016_flickr"),
                                   vocab_size=300, shard_tokens=5000, max_unknown=0.05)
    prepare([MULTI30K], root / "store", settings)
    return root / "store"


def lm_shards(store, **fields):
    return build_task({"name": "lm_shards", "path": str(store), "pack": PACK, **fields}, seed=0)


def test_an_epoch_reads_every_row_lm_would_pack_once(store):
    task = lm_shards(store)
    codec = codec_from_state(json.loads(ShardStore.open(store).tokenizer_text()))
    texts = [codec.decode(task.train.document(n)[1:].tolist()) for n in range(task.train.documents)]
    assert [task.train.document(n).tolist() for n in range(len(texts))] == [codec.encode(t) for t in texts]
    rows = packed([codec.encode(t) for t in texts], PACK, keep_rest=False)[0]
    assert task.rows == len(rows) > 40
    first, second = (task.train_batch(epoch, task.rows)[1].tolist() for epoch in (0, 1))  # a batch an epoch
    assert sorted(first) == sorted(second) == sorted(rows) and first != second


def test_a_rows_offset_is_its_distance_from_its_documents_start_as_lm_packs_it(store):
    """The store's offsets come from its .docs files; lm's from packing text: the two agree."""
    task = lm_shards(store)
    documents = [task.train.document(n).tolist() for n in range(task.train.documents)]
    offsets = packed(documents, PACK, keep_rest=False)[1]
    assert max(offsets) >= PACK, "a document goes on past a row"
    numbers = epoch_rows(0, task.rows, 2 * 6, 6)
    assert offsets_of(task.train_batch(2, 6)).tolist() == [offsets[int(n)] for n in numbers]
    assert task.longest_document() == max(map(len, documents))
    held_out = [task.store.stream("valid").document(n).tolist() for n in range(task.store.stream("valid").documents)]
    expected = packed(held_out, PACK, keep_rest=True)[1]
    assert [o for batch in task.eval_batches(None, 5) for o in offsets_of(batch).tolist()] == expected


def test_the_row_order_is_a_permutation_each_epoch_and_a_function_of_the_seed_and_step_alone(store):
    for size in (1, 2, 5, 64, 1000, 4097):
        assert sorted(RowPermutation(size, 3, 7)(np.arange(size)).tolist()) == list(range(size))
    first, second = (RowPermutation(1000, 3, epoch)(np.arange(1000)) for epoch in (0, 1))
    assert not np.array_equal(first, second) and not np.array_equal(first, RowPermutation(1000, 4, 0)(np.arange(1000)))
    assert np.array_equal(epoch_rows(3, 10, 7, 6), [*RowPermutation(10, 3, 0)(np.arange(7, 10)),
                                                    *RowPermutation(10, 3, 1)(np.arange(3))]), "a batch across epochs"
    task, again = lm_shards(store), lm_shards(store)
    for step in (0, 3, 1000):
        assert torch.equal(task.train_batch(step, 4)[1], again.train_batch(step, 4)[1])
    assert not torch.equal(task.train_batch(0, 4)[1], build_task({"name": "lm_shards", "path": str(store), "pack": PACK},
                                                                 seed=1).train_batch(0, 4)[1])


@pytest.mark.parametrize("world", [2, 3])
def test_each_rank_reads_only_its_rows_of_the_global_batch(store, world):
    task = lm_shards(store)
    src, tgt = task.train_batch(5, 12)
    offsets = offsets_of(task.train_batch(5, 12))
    shares = [task.rank_share(5, 12, rank, world, frozenset({task.pad_id})) for rank in range(world)]
    for rank, (rows, tokens) in enumerate(shares):
        share_src, share_tgt = rows
        assert torch.equal(share_tgt, tgt[rank::world]) and torch.equal(share_src, src[rank::world])
        assert torch.equal(offsets_of(rows), offsets[rank::world]), "each row's offset in its document"
        assert tokens == 12 * (PACK - 1), "every label of the global batch"
    assert sum(len(share[0][1]) for share in shares) == 12
    bos = task.store.index["special_ids"]["bos_id"]
    assert task.rank_share(5, 12, 0, world, frozenset({task.pad_id, bos})) is None, \
        "a document's start left unscored is counted in the whole batch alone"


def test_held_out_documents_are_packed_and_scored_per_byte(store):
    task = lm_shards(store)
    valid = task.store.stream("valid")
    batches = task.eval_batches(5, 3)
    ids = torch.cat([t.flatten() for _, t in batches])
    joined = np.concatenate([valid.document(n) for n in range(5)])
    assert ids[ids != task.pad_id].tolist() == joined.tolist() and task.held_out_rows(5) == -(-len(joined) // PACK)
    assert task.held_out_bytes(5) == valid.first_documents(5)[2] > 0
    assert task.metrics() == ["loss", "token_acc", "perplexity", "bits_per_byte"]


def test_a_store_of_the_other_corpus_and_a_row_longer_than_the_split_are_refused(store, pair_store):
    with pytest.raises(ConfigError, match="a store of sentence pairs"):
        lm_shards(pair_store)
    with pytest.raises(ConfigError, match="a store of documents"):
        build_task({"name": "parallel_shards", "path": str(store)}, seed=0)
    with pytest.raises(ConfigError, match=r"task\.pack 100000: the training split holds"):
        lm_shards(store, pack=100_000)


def shard_experiment(tmp_path, store, **train):
    return tiny_experiment(tmp_path, model={"kind": "decoder", "n_decoder_layers": 1, "documents": "separate"},
                           task={"name": "lm_shards", "path": str(store), "pack": PACK},
                           train={"steps": 20, "eval_every": 10, "eval_size": 6, "log_every": 10, **train})


def test_an_lm_trains_from_shards_reports_bits_per_byte_and_warns_when_its_data_repeats(tmp_path, store):
    experiment = shard_experiment(tmp_path, store, steps=300, batch_size=8)
    with pytest.warns(UserWarning, match=r"reads the training set \d+\.\d\d times: its data repeats"):
        result = zoo.train(experiment)
    metrics = result.metrics
    assert metrics["eval/loss"] < math.log(120) and metrics["test/bits_per_byte"] > 0
    task, (model, _) = lm_shards(store), zoo.load(result.checkpoint)
    framed = [model_class(model.spec).frame(model.spec, src, tgt)[1] for src, tgt in task.eval_batches(6, 8)]
    labels = sum(int((t != task.pad_id).sum()) for t in framed)  # a document's bos is not scored under `separate`
    assert metrics["eval/bits_per_byte"] == pytest.approx(
        metrics["eval/loss"] * labels / (math.log(2) * task.held_out_bytes(6)), rel=1e-6)
    summary = json.loads((run_dir_of(experiment) / "result.json").read_text())
    assert summary["metrics"]["eval/bits_per_byte"] == metrics["eval/bits_per_byte"]
    assert zoo.trainer.evaluate.evaluate_checkpoint(result.checkpoint)["eval/bits_per_byte"] == pytest.approx(
        metrics["eval/bits_per_byte"], rel=1e-6), "zoo eval of the checkpoint reads the store again"


def test_an_encoder_decoder_trains_from_a_store_of_pairs(tmp_path, pair_store):
    task = build_task({"name": "parallel_shards", "path": str(pair_store), "max_tokens": 12}, seed=0)
    src, tgt = task.train_batch(0, 6)
    assert src.size(1) <= 12 and tgt.size(1) <= 12 and (tgt[:, 0] == 1).all()
    stored = ShardStore.open(pair_store)
    assert task.references(3)[0] == task.codec.decode(stored.stream("valid", "tgt").document(0)[1:].tolist())
    experiment = tiny_experiment(tmp_path, task={"name": "parallel_shards", "path": str(pair_store)},
                                 train={"steps": 10, "eval_every": 10, "eval_size": 8, "log_every": 10})
    metrics = zoo.train(experiment).metrics
    assert {"eval/bleu", "eval/bits_per_byte", "test/bits_per_byte"} <= set(metrics)


@pytest.mark.parametrize("rank", [0, 1])
def test_the_feed_of_a_rank_reads_its_rows_alone_and_they_equal_its_share_of_the_global_batch(store, rank,
                                                                                            monkeypatch):
    from zoo.trainer.feed import BatchFeed
    from zoo.trainer.parallelism import Parallelism

    task = lm_shards(store)
    spec = zoo.spec("decoder.pre.sinusoidal.fused.relu", vocab_size=len(task.codec), max_len=PACK)
    _, global_tgt = task.train_batch(3, 8)
    monkeypatch.setattr(task, "train_batch", lambda *args: pytest.fail("the global batch was read"))
    (batch,) = BatchFeed(task, 8, spec, Parallelism(rank=rank, world=2), torch.device("cpu")).take(3)
    assert torch.equal(batch.inputs[0], global_tgt[rank::2, :-1]) and torch.equal(batch.labels, global_tgt[rank::2, 1:])
    assert batch.tokens == 8 * (PACK - 1)
    apart = spec.replace(documents="separate")  # documents apart: each rank reads the whole batch to count
    monkeypatch.undo()
    (batch,) = BatchFeed(task, 8, apart, Parallelism(rank=rank, world=2), torch.device("cpu")).take(3)
    framed = model_class(apart).frame(apart, global_tgt[:, :1], global_tgt)[1]
    assert batch.tokens == int((framed != task.pad_id).sum()) < 8 * (PACK - 1)


def launch(tmp_path, name, store, processes=1, resume=False, steps=200, log_every=10, documents="separate"):
    import subprocess
    import sys

    import yaml

    experiment = shard_experiment(tmp_path / name, store, steps=steps, checkpoint_every=10, eval_every=100,
                                  log_every=log_every, schedule="cosine", device="cpu")
    experiment["model"]["documents"] = documents
    experiment["wandb"]["mode"] = "offline"
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(experiment))
    launcher = ["-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}"] if processes > 1 else []
    return subprocess.Popen([sys.executable, *launcher, "-m", "zoo.cli", "train", str(path), *(["--resume"] * resume)],
                            env={**__import__("os").environ, "OMP_NUM_THREADS": "1"}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True), run_dir_of(experiment) / "checkpoint.pt"


def finished(process):
    _, err = process.communicate(timeout=300)
    assert process.returncode == 0, err[-3000:]


STEPS = 150
"""Past several epochs of the training rows (a resume crosses an epoch's new order)."""


@pytest.mark.slow
def test_a_run_from_shards_killed_and_resumed_ends_bitwise_where_an_uninterrupted_one_ends(tmp_path, store):
    import signal

    from trainkit import signal_after_first_checkpoint

    killed, cut = launch(tmp_path, "cut", store, steps=STEPS)
    signal_after_first_checkpoint(killed, cut)
    assert killed.returncode == -signal.SIGKILL, "the run had ended before it could be killed"
    assert 0 < torch.load(cut, weights_only=True)["progress"]["step"] < STEPS
    finished(launch(tmp_path, "cut", store, resume=True, steps=STEPS)[0])
    whole, whole_path = launch(tmp_path, "whole", store, steps=STEPS)
    finished(whole)
    a, b = (torch.load(path, weights_only=True) for path in (cut, whole_path))
    assert a["progress"]["step"] == b["progress"]["step"] == STEPS and a["progress"]["last_eval"] == b["progress"]["last_eval"]
    assert all(torch.equal(a["model"][name], tensor) for name, tensor in b["model"].items())


@pytest.mark.slow
def test_two_gloo_ranks_reading_their_own_rows_match_one_process(tmp_path, store):
    from trainkit import offline_run

    one, two = (launch(tmp_path, name, store, processes=n, steps=20, log_every=5, documents="joined")  # rows read apart
                for name, n in (("one", 1), ("two", 2)))
    finished(one[0])
    finished(two[0])
    losses = [[r["history"]["item"]["train/loss"] for r in records if r["type"] == "history"
               and "train/loss" in r["history"]["item"]] for _, records in (offline_run(tmp_path / n) for n in ("one", "two"))]
    assert len(losses[0]) == 4 and losses[0] == pytest.approx(losses[1], abs=1e-5)


RECIPES = {"gpt2_small": "gpt2_small_tiny", "wmt_transformer": "wmt_transformer_tiny"}
"""Each recipe from shards and its tiny version, which CI trains."""


def prepare_as_the_recipe_says(folder, recipe: str) -> None:
    """Run the `zoo data prepare` command the tiny recipe's header gives, in `folder` (which holds
    data/multi30k, as a checkout's reader would make it)."""
    import shlex
    import subprocess
    import sys

    header = (ROOT / "experiments" / f"{recipe}.yaml").read_text().split("\n")
    (command,) = [line.removeprefix("#").strip() for line in header if line.startswith("#   zoo data prepare")]
    done = subprocess.run([sys.executable, "-m", "zoo.cli", *shlex.split(command)[1:]], cwd=folder, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("recipe", list(RECIPES))
def test_a_recipe_from_shards_loads_and_its_tiny_version_trains_stops_and_resumes(tmp_path, recipe):
    import signal
    import subprocess
    import sys
    import time

    from zoo.specs.experiment import load_experiment

    tiny = RECIPES[recipe]
    full = load_experiment(ROOT / "experiments" / f"{recipe}.yaml")
    assert full.train.steps > 10_000 and full.task["name"] == load_experiment(ROOT / "experiments" / f"{tiny}.yaml").task["name"]
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "multi30k").symlink_to(MULTI30K)
    (tmp_path / "experiments").symlink_to(ROOT / "experiments")
    prepare_as_the_recipe_says(tmp_path, tiny)
    command = [sys.executable, "-m", "zoo.cli", "train", f"experiments/{tiny}.yaml"]
    env = {**__import__("os").environ, "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled"}
    stopped = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob("runs/*/checkpoint.pt")) and stopped.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    stopped.send_signal(signal.SIGINT)
    _, err = stopped.communicate(timeout=120)
    assert stopped.returncode != 0 and "continue with --resume" in err, err[-2000:]
    (checkpoint,) = tmp_path.glob("runs/*/checkpoint.pt")
    assert 0 < torch.load(checkpoint, weights_only=True)["progress"]["step"] < 40
    resumed = subprocess.run([*command, "--resume"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    result = json.loads((checkpoint.parent / "result.json").read_text())
    assert result["status"] == "finished" and result["steps"] == 40 and result["metrics"]["test/bits_per_byte"] > 0
