"""The plain-text tasks: `lm` for decoder-only models, `mlm` (BERT's masking) for encoders."""

import math

import pytest
import torch

import zoo
from trainkit import MULTI30K, text_task, tiny_experiment, write_corpus
from zoo.tasks import build_task
from zoo.tasks.base import Vocabulary


def test_mlm_chooses_15_percent_of_ordinary_tokens_and_masks_80_10_10(tmp_path):
    task = build_task(text_task("mlm", write_corpus(tmp_path / "c", lines=2000)), seed=0)
    src, tgt = task.train_batch(0, 2000)
    _, again = task.train_batch(0, 2000)
    assert torch.equal(tgt, again), "a pure function of (seed, step)"
    ordinary = (tgt != 0) | ((src > Vocabulary.eos_id) & (src != task.src_vocab.mask_id))
    chosen = tgt != 0
    assert not (chosen & (src <= Vocabulary.eos_id) & (tgt <= Vocabulary.eos_id)).any(), "specials are never chosen"
    share = chosen.sum() / ordinary.sum()
    assert 0.14 < share < 0.16
    masked = (src == task.src_vocab.mask_id) & chosen
    kept = (src == tgt) & chosen
    assert 0.78 < masked.sum() / chosen.sum() < 0.82
    assert 0.08 < kept.sum() / chosen.sum() < 0.12  # a random token equal to the original counts here too
    assert len(task.src_vocab) == task.src_vocab.mask_id + 1 and task.src_vocab is task.tgt_vocab
    other_seed = build_task(text_task("mlm", str(tmp_path / "c")), seed=1)
    assert all(torch.equal(a[1], b[1]) for a, b in zip(task.eval_batches(40, 16), other_seed.eval_batches(40, 16)))
    assert not torch.equal(other_seed.train_batch(0, 2000)[1], tgt)


def test_lm_reads_one_side_of_a_parallel_corpus_and_scores_every_token_after_the_start():
    task = build_task({"name": "lm", "data_dir": str(MULTI30K), "lang": "en", "valid_split": "val",
                       "test_split": None, "train_sentences": 500, "vocab_size": 500}, seed=0)
    src, tgt = task.train_batch(0, 4)
    assert src.tolist() == [[1]] * 4 and (tgt[:, 0] == 1).all()
    spec = zoo.spec("decoder.pre.sinusoidal.fused.relu", vocab_size=len(task.src_vocab))
    from zoo.model.kinds import model_class

    (inputs,), labels = model_class(spec).frame(spec, src, tgt)
    assert torch.equal(inputs, tgt[:, :-1][:, : inputs.size(1)]) and torch.equal(labels, tgt[:, 1:][:, : labels.size(1)])


@pytest.mark.parametrize("gz", [False, True])
def test_an_lm_run_learns_reports_perplexity_and_resumes_its_vocabulary(tmp_path, gz):
    data = write_corpus(tmp_path / "c", gz=gz)
    experiment = tiny_experiment(tmp_path, model={"kind": "decoder", "n_decoder_layers": 2},
                                 task=text_task("lm", data), train={"steps": 60, "eval_every": 30})
    result = zoo.train(experiment)
    assert result.metrics["eval/perplexity"] == pytest.approx(math.exp(result.metrics["eval/loss"]))
    assert result.metrics["eval/perplexity"] < 8 and "eval/exact_match" not in result.metrics
    assert result.metrics["test/perplexity"] < 8
    saved = torch.load(result.checkpoint, weights_only=False)["task"]
    restored = build_task(experiment["task"], 0, saved)
    assert restored.src_vocab is restored.tgt_vocab and restored.train_lines == build_task(experiment["task"], 0).train_lines


def test_an_mlm_run_trains_an_encoder(tmp_path):
    experiment = tiny_experiment(tmp_path, model={"kind": "encoder", "n_encoder_layers": 2},
                                 task=text_task("mlm", write_corpus(tmp_path / "c")), train={"steps": 60})
    result = zoo.train(experiment)
    first = result.history[0]["train/loss"]
    assert result.metrics["eval/loss"] < 0.7 * first and result.metrics["eval/token_acc"] > 0.2
    assert type(zoo.load(result.checkpoint)[0]) is zoo.EncoderOnly


@pytest.mark.parametrize("task, kind, message", [
    ("lm", "encoder_decoder", "model.kind encoder_decoder: task lm trains model.kind decoder"),
    ("mlm", "decoder", "model.kind decoder: task mlm trains model.kind encoder"),
])
def test_a_text_task_refuses_a_kind_it_does_not_train(tmp_path, task, kind, message):
    with pytest.raises(zoo.ConfigError, match=message):
        zoo.train(tiny_experiment(tmp_path, model={"kind": kind}, task=text_task(task, write_corpus(tmp_path / "c"))))


def test_a_missing_text_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"c': no train\.de\[\.gz\] for split 'train'"):
        build_task(text_task("lm", write_corpus(tmp_path / "c", name="en"), lang="de"), seed=0)
