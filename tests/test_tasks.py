"""Every registered task gives well-formed, reproducible batches and a fixed held-out set."""

import pytest
import torch

import zoo
from trainkit import task_fields, tiny_experiment
from zoo.tasks import build_task
from zoo.tasks.lines import LanguageModeling, MaskedLanguageModeling
from zoo.tasks.shards import ShardLanguageModeling

TASKS = zoo.registry("task").names()


def well_formed(ids: torch.Tensor, vocab_size: int) -> None:
    assert ids.dtype == torch.long and ids.dim() == 2
    assert (ids[:, 0] == 1).all(), "every row starts with bos"
    assert ((ids >= 0) & (ids < vocab_size)).all()
    for row in ids.tolist():
        end = row.index(2)  # every row has an eos ...
        assert all(t == 0 for t in row[end + 1 :]), "... and only padding after it"
        assert all(t > 2 for t in row[1:end]), "no special token inside a sentence"
    assert (ids != 0).all(dim=0).any(), "no column is padding in every row"


def sentences(task, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    """The sides of a batch that hold whole sentences, checked: a pair's both; `lm`'s target (its
    source is the start token alone); `mlm`'s source (its target holds the chosen tokens only);
    none of `lm_shards`'s rows, windows of documents joined end to end (checked here: each a window
    of the store's ids, its source its first id, padding only at the end of the last held-out row)."""
    if isinstance(task, ShardLanguageModeling):
        assert torch.equal(src, tgt[:, :1]) and ((tgt >= 0) & (tgt < len(task.tgt_vocab))).all()
        assert (tgt[:-1] != task.pad_id).all() and (tgt[:, 0] != task.pad_id).all()
        return []
    if isinstance(task, LanguageModeling):
        assert src.tolist() == [[1]] * src.size(0)
        return [tgt]
    if isinstance(task, MaskedLanguageModeling):
        assert src.shape == tgt.shape and ((tgt == 0) | (tgt > 2)).all() and (tgt != 0).any()
        assert ((tgt == 0) | (src == tgt) | (src > 2)).all(), "a chosen token becomes an ordinary one or <mask>"
        return [src]
    return [src, tgt]


@pytest.mark.parametrize("name", TASKS)
def test_batches_are_well_formed_and_reproducible(name):
    task = build_task(task_fields(name), seed=3)
    src, tgt = task.train_batch(5, 8)
    assert src.size(0) == tgt.size(0) == 8
    for side, vocab in zip(sentences(task, src, tgt), (task.src_vocab, task.tgt_vocab)):
        well_formed(side, len(vocab))
    again = build_task(task_fields(name), seed=3).train_batch(5, 8)
    assert torch.equal(src, again[0]) and torch.equal(tgt, again[1])
    first = (sentences(task, src, tgt) or [tgt])[0]
    assert not torch.equal(first, (sentences(task, *task.train_batch(6, 8)) or [task.train_batch(6, 8)[1]])[0])
    other = build_task(task_fields(name), seed=4).train_batch(5, 8)
    assert not torch.equal(first, (sentences(task, *other) or [other[1]])[0])


@pytest.mark.parametrize("name", TASKS)
def test_eval_set_is_fixed_across_seeds(name):
    one = build_task(task_fields(name), seed=0).eval_batches(20, 8)
    two = build_task(task_fields(name), seed=9).eval_batches(20, 8)
    task = build_task(task_fields(name), seed=0)
    rows = task.held_out_rows(20)  # 20 examples, or the rows a packed task cuts from 20 documents
    assert rows == 20 or isinstance(task, ShardLanguageModeling)
    assert [b[0].size(0) for b in one] == [min(8, rows - start) for start in range(0, rows, 8)]
    for (s1, t1), (s2, t2) in zip(one, two):
        assert torch.equal(s1, s2) and torch.equal(t1, t2)
        for side in sentences(task, s1, t1):
            well_formed(side, 10**6)


@pytest.mark.parametrize("name, check", [
    ("reverse", lambda s, t: t == s[::-1]),
    ("copy", lambda s, t: t == s),
    ("sort", lambda s, t: t == "".join(sorted(s))),
])
def test_string_tasks_compute_their_target(name, check):
    task = build_task({"name": name, "min_len": 3, "max_len": 6}, seed=0)
    src, tgt = task.train_batch(0, 16)
    for s_row, t_row in zip(src.tolist(), tgt.tolist()):
        s, t = task.src_vocab.decode(s_row[1:]), task.tgt_vocab.decode(t_row[1:])
        assert 3 <= len(s) <= 6 and check(s, t)


def test_eval_lengths_can_differ_from_training():
    task = build_task({"name": "reverse", "min_len": 3, "max_len": 5, "eval_min_len": 20, "eval_max_len": 22}, seed=0)
    (src, _), = task.eval_batches(4, 4)
    lengths = (src > 2).sum(1)
    assert ((lengths >= 20) & (lengths <= 22)).all()
    assert ((task.train_batch(0, 32)[0] > 2).sum(1) <= 5).all()


def test_toy_translation_is_a_word_level_grammar():
    task = build_task({"name": "toy_translation"}, seed=0)
    pairs = {(task.src_vocab.decode(s[1:]), task.tgt_vocab.decode(t[1:]))
             for batch in task.eval_batches(1000, 64) for s, t in zip(batch[0].tolist(), batch[1].tolist())}
    train_pairs = {(" ".join(zh), " ".join(en)) for zh, en in task.train_pairs}
    assert pairs and not pairs & train_pairs, "the held-out sentences are never trained on"
    assert ("我 吃 肉", "I eat meat") in pairs | train_pairs
    assert ("他 不 喝 茶", "he does not drink tea") in pairs | train_pairs
    assert task.text_metric


def test_vocabulary_round_trip_and_errors():
    vocab = zoo.tasks.Vocabulary(list("abc"))
    assert vocab.encode("cab") == [1, 5, 3, 4, 2] and vocab.decode([5, 3, 4, 2, 3]) == "cab"
    assert zoo.tasks.Vocabulary.from_state(vocab.state()).tokens == vocab.tokens
    with pytest.raises(ValueError, match="'z' is not in the vocabulary"):
        vocab.encode("z")
    open_vocab = zoo.tasks.Vocabulary(list("abc"), unk=True)
    assert open_vocab.encode("cz") == [1, 6, 3, 2] and open_vocab.decode([6, 3]) == "c<unk>"


def test_bad_task_params_name_the_field():
    with pytest.raises(ValueError, match="min_len 9 is larger than max_len 3"):
        build_task({"name": "reverse", "min_len": 9, "max_len": 3}, seed=0)
    with pytest.raises(ValueError, match="unknown task 'revers'; did you mean 'reverse'"):
        build_task({"name": "revers"}, seed=0)


def test_a_long_split_is_held_out_beside_the_usual_one(tmp_path):
    task = build_task({"name": "reverse", "min_len": 3, "max_len": 5, "long_eval_min_len": 8, "long_eval_max_len": 9}, 0)
    assert task.eval_splits == ("valid", "long")
    (src, _), = task.eval_batches(6, 6, "long")
    assert (((src > 2).sum(1) >= 8) & ((src > 2).sum(1) <= 9)).all()
    with pytest.raises(ValueError, match="long_eval_min_len and long_eval_max_len go together"):
        build_task({"name": "reverse", "long_eval_min_len": 8}, 0)
    result = zoo.train(tiny_experiment(tmp_path, task={"name": "reverse", "min_len": 3, "max_len": 6,
                                                       "long_eval_min_len": 8, "long_eval_max_len": 9},
                                       train={"steps": 10}))
    assert {"long/loss", "long/exact_match", "eval/exact_match"} <= set(result.metrics)


def test_padded_rows_hold_each_row_then_padding():
    from zoo.tasks.base import pad_rows

    gen = torch.Generator().manual_seed(0)
    for _ in range(50):
        lengths = torch.randint(0, 12, (int(torch.randint(1, 9, (), generator=gen)),), generator=gen).tolist()
        lengths[0] = max(lengths[0], 1)
        rows = [torch.randint(1, 50, (n,), generator=gen).tolist() for n in lengths]
        out = pad_rows(rows, pad_id=0)
        assert out.dtype == torch.long and out.shape == (len(rows), max(lengths))
        for row, ids in zip(out.tolist(), rows):
            assert row == ids + [0] * (out.size(1) - len(ids))
