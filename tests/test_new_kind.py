"""A new kind of model is one new class: a language model of the target alone (the baseline that
shows what reading the source adds), registered here and nowhere else, is named, built, trained,
evaluated and decoded by the zoo's own spec, trainer and decoding, which never ask which kind
they hold."""

from typing import ClassVar

import pytest
import torch

import zoo
from trainkit import task_fields, tiny_experiment
from zoo.model.decoder_only import DecoderOnly
from zoo.model.kinds import model_class, register_kind
from zoo.specs.registries import kinds
from zoo.tasks import build_task
from zoo.trainer.framing import check_kind_fits_task


class TargetLM(DecoderOnly):
    """The decoder reads only the target; decoding starts from the start token alone."""

    kind = "target_lm"
    reads: ClassVar[dict[str, str]] = {"decoder": "target"}

    @classmethod
    def frame(cls, spec, src, tgt):
        return (tgt[:, :-1],), tgt[:, 1:]

    @classmethod
    def sequence_lengths(cls, spec, src_len, tgt_len):
        return 0, tgt_len - 1

    @classmethod
    def prompts(cls, spec, src):
        return torch.full((src.size(0), 1), spec.bos_id, dtype=torch.long, device=src.device)

    @classmethod
    def start_columns(cls, spec, input_len):
        return 1

    @classmethod
    def continuations(cls, spec, src, decoded):
        return [row[1:] for row in decoded.tolist()]


@pytest.fixture
def target_lm():
    register_kind(TargetLM)
    yield TargetLM
    del kinds()[TargetLM.kind]


SMALL = {"d_model": 32, "n_heads": 2, "d_ff": 64, "n_encoder_layers": 3, "n_decoder_layers": 1, "dropout": 0.0}


def test_a_spec_of_the_new_kind_is_named_and_builds_only_its_stack(target_lm):
    spec = zoo.spec("post.sinusoidal.fused.relu", vocab_size=20, kind="target_lm", **SMALL)
    assert spec.name == "target_lm.post.sinusoidal.fused.relu" and spec.depths == (0, 1)
    assert zoo.resolve(spec.name, vocab_size=20, **SMALL) == spec, "the canonical name parses back"
    model = zoo.build(spec, seed=0)
    assert type(model) is TargetLM and model_class(spec) is TargetLM
    assert not any(name.startswith("encoder.") for name, _ in model.named_parameters())
    with pytest.raises(zoo.ConfigError, match=r"one vocabulary: src_vocab_size 20 and tgt_vocab_size 21"):
        zoo.spec("pre-ln", src_vocab_size=20, tgt_vocab_size=21, kind="target_lm")


def test_the_trainer_trains_evaluates_and_decodes_it_without_knowing_it(target_lm, tmp_path):
    experiment = tiny_experiment(tmp_path, model={"kind": "target_lm"}, train={"steps": 30, "eval_every": 30})
    result = zoo.train(experiment)
    assert result.checkpoint.is_file() and result.run_dir.name.startswith("target_lm.post.sinusoidal.fused.relu")
    assert {"eval/loss", "eval/token_acc", "eval/exact_match"} <= set(result.metrics)
    model, spec = zoo.load(result.checkpoint)
    task = build_task(experiment["task"], seed=0)
    src, tgt = task.eval_batches(8, 8)[0]
    inputs, labels = TargetLM.frame(spec, src, tgt)
    shuffled = TargetLM.frame(spec, src.flip(0), tgt)
    assert torch.equal(inputs[0], shuffled[0][0]) and torch.equal(labels, shuffled[1]), "the source is never read"
    decoded = model.generate(TargetLM.prompts(spec, src), max_new_tokens=5)
    assert decoded.shape[0] == 8 and torch.equal(decoded[:, 0], torch.full((8,), spec.bos_id))


def test_tasks_take_it_by_the_examples_it_learns_from(target_lm):
    sequences = build_task({"name": "reverse", "min_len": 3, "max_len": 6}, seed=0)
    check_kind_fits_task("target_lm", sequences)
    positions = build_task(task_fields("mlm"), seed=0)
    with pytest.raises(zoo.ConfigError, match=r"model\.kind target_lm: task mlm trains model\.kind encoder$"):
        check_kind_fits_task("target_lm", positions)
    with pytest.raises(zoo.ConfigError, match=r"model\.kind encoder: task reverse trains model\.kind "
                                              r"decoder or encoder_decoder or target_lm$"):  # in the order they registered
        check_kind_fits_task("encoder", sequences)


def test_a_kind_cannot_take_a_kinds_or_a_parts_name(target_lm):
    for taken in ("decoder", "relu", "target_lm"):
        clash = type("Clash", (TargetLM,), {"kind": taken})
        with pytest.raises(ValueError, match=rf"kind '{taken}' is taken"):
            register_kind(clash)
