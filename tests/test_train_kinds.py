"""Training each kind with the one trainer: how pairs are framed, what is refused, and that a
decoder-only run learns, evaluates, logs to W&B and resumes like an encoder-decoder run."""

import pytest
import torch

import zoo
from trainkit import offline_run, task_fields, tiny_experiment
from zoo.model.kinds import model_class

DECODER = {"kind": "decoder", "n_decoder_layers": 2}


def test_a_pair_becomes_prompt_then_continuation_and_only_the_continuation_is_scored():
    spec = zoo.spec("decoder.pre.sinusoidal.fused.relu", vocab_size=9)
    src = torch.tensor([[1, 5, 6, 2], [1, 7, 2, 0]])
    tgt = torch.tensor([[1, 6, 5, 2], [1, 7, 2, 0]])
    (inputs,), labels = model_class(spec).frame(spec, src, tgt)
    assert inputs.tolist() == [[1, 5, 6, 2, 6, 5], [1, 7, 2, 7, 2, 0]]
    assert labels.tolist() == [[0, 0, 0, 6, 5, 2], [0, 0, 7, 2, 0, 0]]
    generated = torch.tensor([[1, 5, 6, 2, 6, 5, 2], [1, 7, 2, 7, 2, 0, 0]])
    assert model_class(spec).continuations(spec, src, generated) == [[6, 5, 2], [7, 2, 0, 0]]
    pair = zoo.spec("pre.sinusoidal.fused.relu", vocab_size=9)
    (s, t), labels = model_class(pair).frame(pair, src, tgt)
    assert torch.equal(s, src) and torch.equal(t, tgt[:, :-1]) and torch.equal(labels, tgt[:, 1:])


@pytest.mark.parametrize("kind, task, message", [
    ("encoder", {"name": "reverse", "min_len": 3, "max_len": 6}, "model.kind encoder: task reverse trains model.kind "
                                                                 "decoder or encoder_decoder"),
    ("decoder", {"name": "toy_translation"}, "task toy_translation has a vocabulary per side; set "
                                             "task.shared_vocab: true, or use kind encoder_decoder"),
])
def test_a_kind_that_cannot_serve_the_task_is_refused_before_training(tmp_path, kind, task, message):
    with pytest.raises(zoo.ConfigError, match=message):
        zoo.train(tiny_experiment(tmp_path, model={"kind": kind}, task=task))
    assert not list(tmp_path.glob("*seed0*")), "a refused run leaves no folder"


@pytest.mark.slow
def test_a_decoder_only_run_learns_reports_true_metrics_and_logs_its_kind(tmp_path):
    experiment = tiny_experiment(tmp_path, model=DECODER, task={"name": "copy", "min_len": 3, "max_len": 6},
                                 train={"steps": 160, "eval_every": 80}, wandb={"mode": "offline"})
    result = zoo.train(experiment)
    assert result.run_dir.name.startswith("decoder.post.sinusoidal.fused.relu-seed0-")
    assert result.history[0]["train/loss"] > 1.5 * result.metrics["eval/loss"], "it learned"
    model, spec = zoo.load(result.checkpoint)
    assert type(model) is zoo.DecoderOnly
    task = zoo.tasks.build_task(experiment["task"], 0)
    exact = rows = 0
    for src, tgt in task.eval_batches(32, 32):
        for out, ref in zip(model_class(spec).continuations(spec, src, model.generate(src, max_new_tokens=2 * src.size(1) + 10)),
                            tgt.tolist(), strict=True):
            ended = out[: out.index(spec.eos_id) + 1] if spec.eos_id in out else out
            exact += ended == ref[1 : ref.index(spec.eos_id) + 1]
            rows += 1
    assert result.metrics["eval/exact_match"] == exact / rows
    info, _ = offline_run(tmp_path)
    assert info["config"]["model"]["kind"] == "decoder" and info["config"]["kind"] == "decoder"
    assert "kind=decoder" in info["tags"]
    assert info["summary"]["eval/exact_match"] == result.metrics["eval/exact_match"]


def test_a_decoder_only_run_resumed_ends_where_an_uninterrupted_one_ends(tmp_path):
    train = {"steps": 80, "eval_every": 40, "checkpoint_every": 40}
    whole = zoo.train(tiny_experiment(tmp_path / "whole", model={**DECODER, "dropout": 0.1}, train=train))
    cut = tiny_experiment(tmp_path / "cut", model={**DECODER, "dropout": 0.1}, train={**train, "steps": 40})
    zoo.train(cut)
    cut["train"]["steps"] = 80
    resumed = zoo.train(cut, resume=True)
    a, b = torch.load(whole.checkpoint, weights_only=True), torch.load(resumed.checkpoint, weights_only=True)
    assert a["progress"]["step"] == b["progress"]["step"] == 80
    for name, tensor in a["model"].items():
        assert torch.equal(b["model"][name], tensor), name
    assert resumed.metrics == whole.metrics


@pytest.mark.slow
@pytest.mark.parametrize("task", ["toy_translation", "parallel"])
def test_a_translation_task_with_one_vocabulary_trains_a_decoder_only_model(tmp_path, task):
    fields = task_fields(task, shared_vocab=True)
    result = zoo.train(tiny_experiment(tmp_path, model=DECODER, task=fields, train={"steps": 20, "eval_every": 20,
                                                                                   "eval_size": 16}))
    assert result.history[-1]["train/step"] == 20 and "eval/bleu" in result.metrics
    saved = torch.load(result.checkpoint, weights_only=False)["task"]
    restored = zoo.tasks.build_task(fields, 0, saved)
    assert restored.src_vocab is restored.tgt_vocab
