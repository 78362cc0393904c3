"""The `parallel` task on the real Multi30k files: formats, tokenizers, epochs, vocabulary in the
checkpoint, and a short CPU run that lowers the loss and reports BLEU."""

import gzip
import json

import pytest
import sacrebleu
import torch

import zoo
from trainkit import MULTI30K, task_fields, tiny_experiment
from zoo.tasks import build_task
from zoo.tasks.corpus import read_lines
from zoo.tasks.text import WORD, codec_from_state, normalize

TOKENIZERS = ["char", "word", "bpe"]
GERMAN = read_lines(MULTI30K / "val.de.gz")[:40]
ENGLISH = read_lines(MULTI30K / "val.en.gz")[:40]


def small(tokenizer="bpe", **overrides):
    return task_fields("parallel", tokenizer=tokenizer, **overrides)


@pytest.mark.parametrize("tokenizer", TOKENIZERS)
def test_codecs_round_trip_text_and_state(tokenizer):
    task = build_task(small(tokenizer), seed=0)
    for codec, lines in ((task.src_vocab, GERMAN), (task.tgt_vocab, ENGLISH)):
        restored = codec_from_state(codec.state())
        for line in lines:
            ids = codec.encode(line)
            assert ids[0] == 1 and ids[-1] == 2 and all(i > 2 for i in ids[1:-1])
            assert restored.encode(line) == ids and restored.decode(ids[1:]) == codec.decode(ids[1:])
            if 3 not in ids:  # no <unk>: decoding gives the text back
                expected = " ".join(WORD.findall(normalize(line, False))) if tokenizer == "word" else normalize(line, False)
                assert codec.decode(ids[1:]) == expected
    assert len(task.src_vocab) <= 1000 and len(task.tgt_vocab) <= 1000


def test_unknown_pieces_become_unk():
    task = build_task(small("word"), seed=0)
    assert task.tgt_vocab.encode("a man zzyzxqq") == [1, task.tgt_vocab.vocab.index["a"], task.tgt_vocab.vocab.index["man"], 3, 2]


def test_pair_gzip_and_tsv_files_give_the_same_batches(tmp_path):
    pairs = list(zip(read_lines(MULTI30K / "train.de.gz")[:300], read_lines(MULTI30K / "train.en.gz")[:300]))
    held = list(zip(GERMAN, ENGLISH))
    plain, zipped, tsv = (tmp_path / name for name in ("plain", "zipped", "tsv"))
    for folder in (plain, zipped, tsv):
        folder.mkdir()
    for split, rows in (("train", pairs), ("valid", held)):
        for side, lang in ((0, "de"), (1, "en")):
            text = "\n".join(row[side] for row in rows) + "\n"
            (plain / f"{split}.{lang}").write_text(text, encoding="utf-8")
            with gzip.open(zipped / f"{split}.{lang}.gz", "wt", encoding="utf-8") as handle:
                handle.write(text)
        (tsv / f"{split}.tsv").write_text("".join(f"{s}\t{t}\n" for s, t in rows), encoding="utf-8")
    tasks = [build_task({"name": "parallel", "data_dir": str(folder), "test_split": None, "vocab_size": 300}, seed=1)
             for folder in (plain, zipped, tsv)]
    first = tasks[0]
    assert first.eval_splits == ("valid",) and len(first.train_pairs) == 300
    for other in tasks[1:]:
        assert torch.equal(first.train_batch(3, 16)[0], other.train_batch(3, 16)[0])
        assert torch.equal(first.eval_batches(40, 16)[-1][1], other.eval_batches(40, 16)[-1][1])
        assert other.references(40) == first.references(40)


def test_each_epoch_visits_every_training_pair_once():
    task = build_task(small(train_sentences=64), seed=2)
    assert len(task.train_pairs) == 64
    seen = []
    for step in range(4):  # positions 0..63 of epoch 0, 16 a batch
        src, _ = task.train_batch(step, 16)
        seen += [tuple(t for t in row if t != 0) for row in src.tolist()]
    assert sorted(seen) == sorted(tuple(s) for s, _ in task.train_pairs)
    assert not torch.equal(task.train_batch(0, 16)[0], task.train_batch(4, 16)[0]), "epoch 1 has its own order"


def test_references_follow_the_eval_batches():
    task = build_task(small(), seed=0)
    batches, references = task.eval_batches(40, 16), task.references(40)
    decoded = [task.tgt_vocab.decode(row[1:]) for _, tgt in batches for row in tgt.tolist()]
    assert len(decoded) == len(references) == 40
    assert sorted(references) == sorted(ENGLISH)
    assert sum(d == r for d, r in zip(decoded, references)) >= 35  # all but lines with an <unk>
    lengths = [int((src[i] != 0).sum()) for src, _ in batches for i in range(src.size(0))]
    assert lengths == sorted(lengths), "shortest sources first"


def test_a_saved_vocabulary_wins_over_retraining():
    wide = build_task(small(), seed=0)
    narrow = build_task(small(train_sentences=200), seed=0, state=wide.state())
    assert narrow.tgt_vocab.state() == wide.tgt_vocab.state()
    assert narrow.tgt_vocab.encode(ENGLISH[0]) == wide.tgt_vocab.encode(ENGLISH[0])


def test_bad_corpus_input_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"task.data_dir .*no train.de\[.gz\] and train.en\[.gz\] or train.tsv"):
        build_task({"name": "parallel", "data_dir": str(tmp_path)}, seed=0)
    (tmp_path / "train.de").write_text("a\nb\n")
    (tmp_path / "train.en").write_text("a\n")
    with pytest.raises(ValueError, match=r"train\.de has 2 lines but .*train\.en has 1"):
        build_task({"name": "parallel", "data_dir": str(tmp_path)}, seed=0)
    (tmp_path / "bad.tsv").write_text("eins\tone\nzwei two\n")
    with pytest.raises(ValueError, match=r"bad.tsv:2: expected 'source<TAB>target', found 1 column"):
        build_task({"name": "parallel", "data_dir": str(tmp_path), "train_split": "bad", "format": "tsv"}, seed=0)
    with pytest.raises(ValueError, match=r"tokenizer.*'char', 'word' or 'bpe'"):
        zoo.ExperimentSpec(task={"name": "parallel", "data_dir": ".", "tokenizer": "sentencepiece"})
    with pytest.raises(ValueError, match="parallel: data_dir: Field required"):
        zoo.ExperimentSpec(task={"name": "parallel"})


@pytest.mark.slow
def test_short_cpu_run_on_multi30k_lowers_the_loss_and_reports_bleu(tmp_path):
    experiment = tiny_experiment(tmp_path, model={"d_model": 64, "n_heads": 4, "d_ff": 128},
                                 task=small(test_size=64), train={"steps": 100, "batch_size": 64, "eval_every": 100,
                                                                  "eval_size": 64, "checkpoint_every": 100,
                                                                  "device": "cpu"})  # rescored on the CPU below
    result = zoo.train(experiment)
    losses = [row["train/loss"] for row in result.history if "train/loss" in row]
    assert losses[-1] < 0.75 * losses[0]
    assert 0.0 < result.metrics["eval/bleu"] <= 100.0 and 0.0 <= result.metrics["test/bleu"] <= 100.0
    # The checkpoint alone (weights + saved vocabulary) reproduces the reported BLEU.
    model, _ = zoo.load(result.checkpoint)
    state = torch.load(result.checkpoint, weights_only=True)
    task = build_task(state["experiment"]["task"], seed=0, state=state["task"])
    hypotheses = [task.tgt_vocab.decode(row[1:]) for src, _ in task.eval_batches(64, 64)
                  for row in model.generate(src, max_new_tokens=2 * src.size(1) + 10).tolist()]
    bleu = sacrebleu.corpus_bleu(hypotheses, [task.references(64)]).score
    assert bleu == pytest.approx(result.metrics["eval/bleu"], abs=1e-9)


@pytest.mark.slow
def test_training_scores_with_beams_and_zoo_eval_rescores_the_checkpoint(tmp_path, capsys):
    """train.eval_beams decodes the held-out sets by beam search; `zoo eval` gives the same figures
    from the checkpoint alone, and greedy on the same weights (the teacher-forced loss is the same).
    Trained on the CPU, where `zoo eval` scores: the figures agree to the last bit only on one device."""
    from zoo.cli import main

    experiment = tiny_experiment(tmp_path, model={"d_model": 64, "n_heads": 4, "d_ff": 128},
                                 task=small(test_size=48), train={"steps": 60, "batch_size": 64, "eval_every": 60,
                                                                  "eval_size": 48, "eval_beams": 3, "length_penalty": 0.6,
                                                                  "device": "cpu"})
    result = zoo.train(experiment)
    capsys.readouterr()

    def zoo_eval(*args: str) -> dict:
        main(["eval", str(result.checkpoint), *args])
        return json.loads(capsys.readouterr().out)

    beam = zoo_eval("--split", "test", "--beams", "3", "--length-penalty", "0.6")
    assert beam["decoding"] == "beam 3, length_penalty 0.6"
    for name in ("test/bleu", "test/exact_match", "test/loss"):
        assert beam[name] == pytest.approx(result.metrics[name], abs=1e-9)
    greedy = zoo_eval("--split", "test")
    assert greedy["decoding"] == "greedy" and greedy["test/loss"] == pytest.approx(beam["test/loss"], abs=1e-9)
    with pytest.raises(SystemExit) as stopped:
        zoo_eval("--split", "train")
    assert stopped.value.code == 2
    assert "split 'train' is not held out by this task; choices: valid, test" in capsys.readouterr().err


def test_shipped_multi30k_experiment_trains_de_to_en_from_a_data_dir_parameter():
    from zoo.specs.experiment import load_experiment
    from zoo.tasks.parallel import Parallel

    experiment = load_experiment("experiments/multi30k.yaml", [f"task.data_dir={MULTI30K}"])
    task = build_task(experiment.task, seed=0)
    assert isinstance(task, Parallel) and task.eval_splits == ("valid", "test")
    assert len(task.train_pairs) == 2000 and len(task.references(10_000)) == 200  # the sample's sizes
    assert len(task.references(10_000, "test")) == 200
    spec = experiment.model_spec(len(task.src_vocab), len(task.tgt_vocab))
    assert (spec.norm, spec.position, spec.d_model, spec.n_encoder_layers) == ("post", "learned", 256, 3)
