"""Bits per byte: the loss summed over the held-out text, in bits, divided by the text's UTF-8
bytes, so that models with different tokenizers compare on one scale."""

import math

import pytest
import torch
import torch.nn.functional as F

import zoo
from trainkit import MULTI30K, text_task
from zoo.metrics import Resolved
from zoo.tasks import build_task
from zoo.trainer.evaluate import evaluate_split

DOCUMENTS = ["the café sat on a mat", "a dog ran", "über the park the birds sang", "the cat and the dog", "naïve"]


def corpus(folder):
    folder.mkdir()
    for split in ("train", "valid", "test"):
        (folder / f"{split}.txt").write_text("\n".join(DOCUMENTS * (4 if split == "train" else 1)) + "\n", encoding="utf-8")
    return str(folder)


def by_hand(model, task, documents):
    """Summed negative log-likelihood (nats) of each document alone, every token after its first."""
    total = 0.0
    for text in documents:
        ids = torch.tensor([task.codec.encode(text)])
        logits = model(ids[:, :-1]).float()
        total += F.cross_entropy(logits[0], ids[0, 1:], reduction="sum").item()
    return total


@pytest.mark.parametrize("tokenizer", ["char", "word"])
def test_an_lm_scores_its_held_out_documents_bits_per_utf8_byte_as_a_hand_computation(tmp_path, tokenizer):
    task = build_task(text_task("lm", corpus(tmp_path / "c"), tokenizer=tokenizer), seed=0)
    torch.manual_seed(0)
    model = zoo.build(zoo.spec("decoder.pre.sinusoidal.fused.relu", vocab_size=len(task.src_vocab), d_model=16,
                               n_heads=2, d_ff=32, n_decoder_layers=1)).eval()
    metrics = evaluate_split(model, task, "valid", size=4, rows=3, device="cpu")
    utf8 = sum(len(text.encode("utf-8")) for text in DOCUMENTS[:4])
    assert utf8 > sum(map(len, DOCUMENTS[:4])), "the accents take two bytes each: bytes, not characters"
    assert metrics["eval/bits_per_byte"] == pytest.approx(by_hand(model, task, DOCUMENTS[:4]) / (math.log(2) * utf8),
                                                          rel=1e-5)
    assert task.held_out_bytes(4) == utf8 and task.held_out_bytes(None, "test") == sum(len(d.encode()) for d in DOCUMENTS)


def test_a_translation_scores_bits_per_byte_of_its_targets():
    task = build_task({"name": "parallel", "data_dir": str(MULTI30K), "valid_split": "val", "test_split": None,
                       "train_sentences": 300, "tokenizer": "word", "vocab_size": 300}, seed=0)
    torch.manual_seed(0)
    model = zoo.build(zoo.spec("pre.sinusoidal.fused.relu", src_vocab_size=len(task.src_vocab),
                               tgt_vocab_size=len(task.tgt_vocab), d_model=16, n_heads=2, d_ff=32,
                               n_encoder_layers=1, n_decoder_layers=1)).eval()
    metrics = evaluate_split(model, task, "valid", size=12, rows=5, device="cpu", metrics={"bleu": False, "chrf": False,
                                                                                         "ter": False, "exact_match": False})
    labels = sum(int((tgt[:, 1:] != 0).sum()) for _, tgt in task.eval_batches(12, 5))
    targets = [target for _, target in task._split("val")[:12]]
    expected = metrics["eval/loss"] * labels / (math.log(2) * sum(len(t.encode()) for t in targets))
    assert metrics["eval/bits_per_byte"] == pytest.approx(expected, rel=1e-6)


def test_bits_per_byte_is_a_metric_a_sweep_ranks_by_lower_first():
    resolved = Resolved.of("test/bits_per_byte")
    assert resolved.goal == "min" and resolved.bounds == (0.0, math.inf)
    text_tasks = [name for name in zoo.registry("task").names() if zoo.registry("task").get(name).scores_text]
    assert {"lm", "parallel"} <= set(text_tasks) and "mlm" not in text_tasks, "a masked loss scores 15% of the text"
