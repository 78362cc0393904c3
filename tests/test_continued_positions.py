"""A document longer than a packed row goes on in the next rows (nanoGPT, litgpt), and under
`documents: separate` with positions added to the embeddings (learned, sinusoidal) its tokens in a
later row continue the positions it had reached: each row carries its offset in the document it
begins inside, from the task (text or token store) through the feed's shards and micro-batches to
the model, in training, evaluation and replays. Relative schemes compute the same function from
any offset and take none, so their runs keep their rounding."""

import pytest
import torch
from conftest import TINY
from test_documents import folder_task, write_documents

import zoo
from zoo.kernels.masks import document_positions
from zoo.model.kinds import model_class
from zoo.sweep.record_replay import Recording
from zoo.sweep.replay import Replayed
from zoo.tasks import build_task, task_params
from zoo.tasks.packing import offsets_of, packed
from zoo.trainer.feed import BatchFeed
from zoo.trainer.lengths import check_lengths
from zoo.trainer.parallelism import Parallelism

POSITIONS = zoo.registry("position").names()
TEXTS = ["x = 1\n"] * 6 + ["y = 2\n" * 9, "z = 3\n"]
"""Short documents and one longer than a row of 16 (char tokens: 56 with bos and eos)."""


def stream_offsets(documents: list[list[int]], length: int, rows: int) -> list[int]:
    """Each row's offset found by walking the documents token by token (packing's own
    arithmetic left aside)."""
    where = [position for document in documents for position in range(len(document))]
    return [where[row * length] for row in range(rows)]


def test_positions_continue_from_the_offset_until_the_rows_first_start():
    spec = zoo.spec("decoder.pre.learned.fused.gelu", documents="separate", **TINY)
    ids = torch.tensor([[9, 9, 2, 1, 5, 6], [1, 5, 2, 1, 7, 0], [4, 4, 4, 4, 4, 4]])
    offsets = torch.tensor([4, 0, 30])
    assert document_positions(ids, spec, offsets).tolist() == [[4, 5, 6, 0, 1, 2], [0, 1, 2, 0, 1, 1],
                                                               [30, 31, 32, 33, 34, 35]]
    assert document_positions(ids, spec, torch.zeros(3, dtype=torch.long)).tolist() == \
        document_positions(ids, spec).tolist()


@pytest.mark.parametrize("position", POSITIONS)
@pytest.mark.parametrize("documents", ["joined", "separate", "masked"])
def test_only_separate_documents_with_absolute_positions_take_offsets(position, documents):
    """Shifting every position of a row by one constant moves an absolute scheme's logits and
    leaves a relative scheme's as they were (to rounding): only the first need the offset."""
    spec = zoo.spec(f"decoder.pre.{position}.fused.gelu", documents=documents, **TINY)
    kind = model_class(spec)
    absolute = zoo.registry("position").get(position).absolute()
    assert kind.continues_positions(spec) == (documents == "separate" and absolute)
    if documents != "separate":
        return
    model = zoo.build(spec, seed=0).eval()
    row = torch.tensor([[9, 9, 2, 1, 5, 6, 7]])
    with torch.no_grad():
        moved = (model(row, offsets=torch.tensor([5])) - model(row)).abs().max()
    assert (moved > 1e-3) == absolute, float(moved)


@pytest.mark.parametrize("position", ["learned", "sinusoidal"])
def test_a_continued_row_computes_its_tokens_at_the_documents_positions(position):
    """The model's logits of a row with offset k are those of its stack run at positions k, k + 1,
    ... up to the row's first start, and from 0 after it; a sinusoidal table grows past max_len."""
    spec = zoo.spec(f"decoder.pre.{position}.fused.gelu", documents="separate", **TINY)
    model = zoo.build(spec, seed=0).eval()
    row, offset = torch.tensor([[9, 9, 4, 2, 1, 5, 6]]), 30 if position == "learned" else 60
    positions = torch.tensor([[offset + i for i in range(4)] + [0, 1, 2]])
    with torch.no_grad():
        continued = model(row, offsets=torch.tensor([offset]))  # first: a sinusoidal table grows here
        expected = model.generator(model.decoder(row, model.input_masks(spec, (row,))[0], positions=positions)[0])
    torch.testing.assert_close(continued, expected, rtol=0, atol=0)
    assert offset + row.size(1) > spec.max_len or position == "learned"


def test_packing_gives_each_row_its_offset_in_its_document(tmp_path):
    for split in ("train", "valid", "test"):
        write_documents(tmp_path, split, TEXTS)
    task = build_task(folder_task(tmp_path, pack=16), seed=0)
    documents = [task.codec.encode(text) for text in TEXTS]
    assert task.train_offsets == stream_offsets(documents, 16, len(task.train_lines))
    assert max(task.train_offsets) > 16, "the long document reaches past one row"
    assert task.longest_document() == max(map(len, documents))
    batch = task.train_batch(3, 5)
    numbers = task.order.rows(3, 5)
    assert offsets_of(batch).tolist() == [task.train_offsets[i] for i in numbers]
    rows, offsets = packed(documents, 16, keep_rest=True)
    held_out = task.eval_batches(None, 3)
    assert [o for batch in held_out for o in offsets_of(batch).tolist()] == offsets == \
        stream_offsets(documents, 16, len(rows))
    assert build_task(folder_task(tmp_path), seed=0).longest_document() is None, "a row a document: no offsets"


def long_document_task(tmp_path):
    for split in ("train", "valid", "test"):
        write_documents(tmp_path, split, TEXTS)
    return build_task(folder_task(tmp_path, pack=16), seed=0)


def decoder_spec(task, position: str, max_len: int = 64):
    return zoo.spec(f"decoder.pre.{position}.fused.gelu", documents="separate",
                    **{**TINY, "max_len": max_len, "vocab_size": len(task.src_vocab)})


@pytest.mark.parametrize("position, continues", [("learned", True), ("sinusoidal", True), ("rope", False)])
@pytest.mark.parametrize("accumulate", [1, 2])
def test_the_feed_hands_each_micro_batch_its_rows_offsets(tmp_path, position, continues, accumulate):
    task = long_document_task(tmp_path)
    feed = BatchFeed(task, 3, decoder_spec(task, position), Parallelism(), torch.device("cpu"), accumulate=accumulate)
    expected = offsets_of(task.train_batch(4, 3 * accumulate))
    micro = feed.take(4)
    assert len(micro) == accumulate
    if not continues:
        assert all(batch.offsets is None and batch.model_inputs() == {} for batch in micro)
        return
    assert [batch.offsets.tolist() for batch in micro] == [expected[m::accumulate].tolist() for m in range(accumulate)]
    assert any(batch.offsets.any() for batch in micro) or not expected.any()


def test_a_rank_takes_the_offsets_of_its_rows(tmp_path):
    task = long_document_task(tmp_path)
    spec = decoder_spec(task, "learned")
    expected = offsets_of(task.train_batch(2, 8))
    for rank in (0, 1):
        (batch,) = BatchFeed(task, 8, spec, Parallelism(rank=rank, world=2), torch.device("cpu")).take(2)
        assert batch.offsets.tolist() == expected[rank::2].tolist()


def test_a_document_longer_than_a_learned_table_is_refused_before_training(tmp_path):
    task = long_document_task(tmp_path)
    model = zoo.build(decoder_spec(task, "learned", max_len=32), seed=0)
    with pytest.raises(zoo.ConfigError, match=r"the task's training data holds a document of 55 positions, more "
                                              r"than the model.max_len 32 of its 'learned' positions: under "
                                              r"model.documents separate a document cut across packed rows "
                                              r"continues its positions; raise model.max_len to 55 or more, or use "
                                              r"model.documents masked"):
        check_lengths(model, task, 8, 4)
    check_lengths(zoo.convert(model, documents="masked"), task, 8, 4)  # positions run along the row: 16 fit
    check_lengths(zoo.build(decoder_spec(task, "sinusoidal", max_len=32), seed=0), task, 8, 4)  # its table grows


def test_a_replay_gives_back_the_offsets_it_recorded(tmp_path):
    for split in ("train", "valid", "test"):
        write_documents(tmp_path, split, TEXTS)
    params = folder_task(tmp_path, pack=16)
    task = build_task(params, seed=0)
    recording = Recording(task)
    asked = task.train_batch(2, 4)
    replay = recording.replay(params, 0)
    replayed = Replayed(task_params(params)[1], 0, replay)
    again = replayed.train_batch(2, 4)
    assert torch.equal(again[1], asked[1]) and torch.equal(offsets_of(again), offsets_of(asked))
    assert replayed.longest_document() == task.longest_document()


def test_evaluation_scores_each_held_out_row_at_its_documents_positions(tmp_path):
    import torch.nn.functional as F

    from zoo.trainer.evaluate import evaluate_split

    task = long_document_task(tmp_path)
    spec = decoder_spec(task, "learned")
    model = zoo.build(spec, seed=0).eval()
    batches = task.eval_batches(len(TEXTS), 4)
    assert any(offsets_of(batch).any() for batch in batches), "a held-out row continues the long document"

    def loss(offsets_given: bool) -> float:
        total, count = 0.0, 0
        with torch.no_grad():
            for batch in batches:
                inputs, labels = model_class(spec).frame(spec, *batch)
                logits = model(*inputs, offsets=offsets_of(batch)) if offsets_given else model(*inputs)
                total += float(F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=spec.pad_id,
                                               reduction="sum"))
                count += int((labels != spec.pad_id).sum())
        return total / count

    scored = evaluate_split(model, task, "valid", len(TEXTS), 4, "cpu")["eval/loss"]
    assert scored == pytest.approx(loss(True), rel=1e-6) and abs(scored - loss(False)) > 1e-4
