"""Fine-tuning an imported model with the zoo's trainer: `task.tokenizer_dir` feeds the model the
ids its own tokenizer makes, framed as its family trains (T5 starts the decoder from pad, BART from
eos), so the trainer's loss on a batch is transformers' own loss on it; a source whose ids would
mean other tokens is refused."""

import json

import pytest
import torch
import torch.nn.functional as F
from pretrainedkit import FAMILIES, save_pretrained_folder

import zoo
from trainkit import task_fields, tiny_experiment
from zoo.model.kinds import model_class
from zoo.specs.experiment import validate_experiment
from zoo.tasks import build_task, data_digests

pytest.importorskip("transformers")
PREFIX = "translate German to English: "


@pytest.fixture(scope="module", params=FAMILIES)
def pretrained(request, tmp_path_factory):
    return save_pretrained_folder(tmp_path_factory.mktemp(request.param), request.param)


def task_of(folder, **fields):
    return task_fields("parallel", tokenizer_dir=str(folder), source_prefix=PREFIX, test_size=16, **fields)


@pytest.mark.slow
def test_the_task_encodes_as_the_models_tokenizer_does(pretrained):
    folder, model, tokenizer = pretrained
    task = build_task(task_of(folder), seed=0)
    src, tgt = task.train_batch(0, 4)
    pairs = [task.train_pairs[i] for i in task.order.rows(0, 4)]
    german = [line for line, _ in task._split("train")]
    start = model.config.decoder_start_token_id
    for (s, t), row_src, row_tgt in zip(pairs, src.tolist(), tgt.tolist(), strict=True):
        assert row_src[: len(s)] == s and set(row_src[len(s):]) <= {tokenizer.pad_token_id}
        assert row_tgt[0] == start and row_tgt[1: len(t)] == t[1:] and t[-1] == tokenizer.eos_token_id
    assert task.encode_source(german[0]) == tokenizer(PREFIX + german[0]).input_ids
    english = task._split("train")[0][1]
    assert task.tgt_vocab.encode(english) == [start, *tokenizer(english).input_ids]
    assert task.tgt_vocab.decode(tokenizer(english).input_ids) == tokenizer.decode(tokenizer(english).input_ids,
                                                                                   skip_special_tokens=True)
    assert zoo.ExperimentSpec.model_validate(experiment_of(folder, folder.parent)).task["tokenizer_dir"] == str(folder)


def test_the_trainers_loss_on_a_batch_is_transformers_own(pretrained):
    """The zoo's framing (decoder input and labels from one target row) is the family's: T5's and
    BART's shift_right from their start tokens, padding ignored."""
    folder, model, tokenizer = pretrained
    task = build_task(task_of(folder), seed=0)
    src, tgt = task.train_batch(3, 8)
    ours = zoo.from_pretrained(folder).eval()
    inputs, labels = model_class(ours.spec).frame(ours.spec, src, tgt)
    with torch.no_grad():
        logits = ours(*inputs)
        loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=ours.spec.pad_id)
        theirs = model(input_ids=src, attention_mask=src != tokenizer.pad_token_id,
                       labels=labels.masked_fill(labels == tokenizer.pad_token_id, -100)).loss
    assert loss.item() == pytest.approx(theirs.item(), rel=1e-5)


def experiment_of(folder, out_dir, **train):
    spec = zoo.from_pretrained(folder).spec
    return tiny_experiment(out_dir, model=spec.model_dump(mode="json"), task=task_of(folder),
                           train={"init_from": str(folder), "steps": 4, "eval_every": 2, "checkpoint_every": 2,
                                  "batch_size": 8, "eval_size": 16, **train})


@pytest.mark.slow
def test_a_run_fine_tunes_the_folders_model_and_resumes_from_its_own_checkpoint(pretrained, tmp_path):
    folder = pretrained[0]
    first = zoo.train(experiment_of(folder, tmp_path, steps=2))
    trained, start = zoo.load(first.checkpoint)[0].state_dict(), zoo.from_pretrained(folder).state_dict()
    assert trained.keys() == start.keys()
    moved = [key for key in start if not torch.equal(trained[key], start[key])]
    assert moved and max((trained[k] - start[k]).abs().max().item() for k in moved) < 0.05, "started there, then trained"
    resumed = zoo.train(experiment_of(folder, tmp_path, steps=4), resume=True)
    straight = zoo.train(experiment_of(folder, tmp_path / "straight", steps=4))
    assert resumed.metrics == pytest.approx(straight.metrics, rel=1e-6)
    state = torch.load(first.checkpoint, weights_only=False)["task"]
    assert build_task(task_of(folder), 0, state).tgt_vocab.ids == build_task(task_of(folder), 0).tgt_vocab.ids


def test_the_tokenizer_files_are_data_of_the_run(pretrained):
    folder = pretrained[0]
    files = data_digests(task_of(folder))
    assert {str(folder / "tokenizer.json"), str(folder / "tokenizer_config.json"), str(folder / "config.json")} <= set(files)


def test_model_ids_that_are_not_the_tokenizers_are_refused_naming_what_to_write(pretrained, tmp_path):
    folder, model, tokenizer = pretrained
    experiment = experiment_of(folder, tmp_path)
    experiment["model"]["eos_id"] = 7
    wanted = (f"model.pad_id={tokenizer.pad_token_id}, model.bos_id={model.config.decoder_start_token_id}, "
              f"model.eos_id={tokenizer.eos_token_id}")
    with pytest.raises(zoo.ConfigError, match=rf"model\.eos_id 7 \(the task's is {tokenizer.eos_token_id}\).*\({wanted}\)"):
        zoo.train(experiment)


def test_a_folders_model_read_with_another_tokenizer_is_refused(pretrained, tmp_path):
    folder = pretrained[0]
    experiment = experiment_of(folder, tmp_path)
    experiment["task"] = task_fields("parallel", vocab_size=zoo.from_pretrained(folder).spec.tgt_vocab_size)
    for key in ("pad_id", "bos_id", "eos_id"):
        experiment["model"].pop(key)
    with pytest.raises(zoo.ConfigError, match=r"the folder's model reads ids of its own tokenizer.*set task\.tokenizer_dir"):
        zoo.train(experiment)


def test_a_decoder_only_model_with_a_pretrained_tokenizer_is_refused_with_what_to_do(pretrained, tmp_path):
    folder = pretrained[0]
    experiment = tiny_experiment(tmp_path, model={"kind": "decoder", **{k: v for k, v in zoo.from_pretrained(
        folder).spec.model_dump().items() if k in ("pad_id", "bos_id", "eos_id")}}, task=task_of(folder))
    with pytest.raises(zoo.ConfigError, match=r"a pretrained tokenizer \(task\.tokenizer_dir\) frames encoder-decoder"):
        zoo.train(experiment)


@pytest.mark.slow
def test_a_checkpoint_of_a_run_with_other_vocabularies_is_refused(tmp_path):
    source = zoo.train(tiny_experiment(tmp_path / "a", task=task_fields("parallel", vocab_size=300), train={"steps": 2}))
    other = tiny_experiment(tmp_path / "b", task=task_fields("parallel", vocab_size=300, lowercase=True),
                            train={"steps": 2, "init_from": str(source.checkpoint)})
    with pytest.raises(zoo.ConfigError, match=r"its run learned other vocabularies than this task's"):
        zoo.train(other)


@pytest.mark.parametrize("damage, message", [
    ("no tokenizer.json", r"no tokenizer\.json there"),
    ("no pad token", r"tokenizer_config\.json names no pad_token"),
    ("unknown eos token", r"its eos_token '<end>' is not in tokenizer\.json"),
])
@pytest.mark.slow
def test_a_tokenizer_folder_that_cannot_serve_is_one_clear_error(tmp_path, damage, message):
    folder, _, _ = save_pretrained_folder(tmp_path / "t5", "t5")
    settings = json.loads((folder / "tokenizer_config.json").read_text())
    if damage == "no tokenizer.json":
        (folder / "tokenizer.json").unlink()
    elif damage == "no pad token":
        settings.pop("pad_token")
    else:
        settings["eos_token"] = "<end>"
    (folder / "tokenizer_config.json").write_text(json.dumps(settings))
    with pytest.raises(zoo.ConfigError, match=message):
        validate_experiment({"task": task_of(folder)})
