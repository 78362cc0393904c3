"""A pretrained model's own tokenizer for the text tasks lm and mlm (`task.tokenizer_dir`, set by
`train.init_from` a folder that holds one): each document is the tokenizer's bos, ids and eos, so
the trainer's loss on a batch is transformers' own; a vocabulary the task learned that is not the
model's size is refused with both sizes, where before its ids fit the larger model silently."""

import pytest
import torch
import torch.nn.functional as F
from pretrainedkit import language_model_folder

import zoo
from trainkit import task_fields, tiny_experiment
from zoo.model.kinds import model_class
from zoo.tasks import build_task, data_digests

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return language_model_folder(tmp_path_factory.mktemp("llama"))


def lm_task(folder, **fields):
    return task_fields("lm", tokenizer_dir=str(folder), test_size=16, **fields)


def test_a_document_is_the_tokenizers_bos_ids_and_eos(llama):
    folder, _, tokenizer = llama
    task = build_task(lm_task(folder), seed=0)
    text = task._split("train")[0]
    assert task.codec.encode(text) == [tokenizer.bos_token_id, *tokenizer(text, add_special_tokens=False).input_ids,
                                       tokenizer.eos_token_id]
    assert task.special_ids_for(task.params) == {"pad_id": 1, "bos_id": 0, "eos_id": 2}
    _, tgt = task.train_batch(0, 8)
    rows = [task.train_lines[i] for i in task.order.rows(0, 8)]
    assert len({len(row) for row in rows}) > 1, "rows of several lengths: some are padded"
    for row, batch_row in zip(rows, tgt.tolist(), strict=True):
        assert batch_row == row + [tokenizer.pad_token_id] * (tgt.size(1) - len(row)), "padded with the tokenizer's pad"
    assert len(task.src_vocab) == len(tokenizer)
    assert {str(folder / "tokenizer.json"), str(folder / "tokenizer_config.json")} <= set(data_digests(lm_task(folder)))


def test_the_trainers_loss_on_a_packed_batch_is_transformers_own(llama):
    folder, model, tokenizer = llama
    task = build_task(lm_task(folder, pack=24), seed=0)
    src, tgt = task.train_batch(2, 6)
    ours = zoo.from_pretrained(folder).eval()
    inputs, labels = model_class(ours.spec).frame(ours.spec, src, tgt)
    with torch.no_grad():
        loss = F.cross_entropy(ours(*inputs).flatten(0, 1), labels.flatten(), ignore_index=ours.spec.pad_id)
        theirs = model(input_ids=tgt, labels=tgt.masked_fill(tgt == tokenizer.pad_token_id, -100)).loss
    assert loss.item() == pytest.approx(theirs.item(), rel=1e-5)


def experiment_of(folder, out_dir, task):
    return tiny_experiment(out_dir, model=zoo.from_pretrained(folder).spec.model_dump(mode="json"), task=task,
                           train={"init_from": str(folder), "steps": 2, "eval_every": 2, "checkpoint_every": 2,
                                  "batch_size": 4, "eval_size": 8, "warmup_steps": 0})


def test_init_from_a_folder_with_a_tokenizer_reads_the_text_with_it(llama, tmp_path):
    folder = llama[0]
    experiment = experiment_of(folder, tmp_path, task_fields("lm", test_size=16))
    experiment["task"].pop("vocab_size")
    assert zoo.ExperimentSpec.model_validate(experiment).task["tokenizer_dir"] == str(folder)
    chosen = experiment_of(folder, tmp_path, task_fields("lm", tokenizer="char"))
    with pytest.raises(zoo.ConfigError, match=r"model\.pad_id 1 \(the task's is 0\).*the model of train\.init_from "
                                              r"keeps its own: read the text with its tokenizer \(task\.tokenizer_dir\)"):
        zoo.train(chosen)
    for key in ("pad_id", "bos_id", "eos_id"):  # a model that takes the task's ids: the tokenizer is still refused
        chosen["model"].pop(key)
    chosen["model"].update(pad_id=0, bos_id=1, eos_id=2)
    with pytest.raises(zoo.ConfigError, match=r"the folder's model reads ids of its own tokenizer.*set "
                                              r"task\.tokenizer_dir.*or leave the task's tokenizer settings out"):
        zoo.train(chosen)


@pytest.mark.slow
def test_a_run_fine_tunes_a_language_model_with_its_tokenizer(llama, tmp_path):
    folder = llama[0]
    experiment = experiment_of(folder, tmp_path, {k: v for k, v in task_fields("lm", test_size=16).items()
                                                  if k != "vocab_size"})
    result = zoo.train(experiment)
    assert result.metrics["eval/loss"] < 10 and zoo.load(result.checkpoint)[0].spec == zoo.from_pretrained(folder).spec


def test_a_learned_vocabulary_of_another_size_than_the_models_is_refused_with_both(tmp_path):
    """The new user's run: a 300-id model (the zoo's special ids) from a folder without a tokenizer,
    a character vocabulary learned by the task: its ids fit the model, and meant other tokens."""
    folder = tmp_path / "weights"
    zoo.build(zoo.resolve({"kind": "decoder", "d_model": 16, "n_heads": 2, "d_ff": 32, "n_decoder_layers": 1,
                           "vocab_size": 300}), seed=0).save_pretrained(folder)
    assert not (folder / "tokenizer.json").exists()
    experiment = experiment_of(folder, tmp_path, task_fields("lm", tokenizer="char"))
    size = zoo.from_pretrained(folder).spec.tgt_vocab_size
    chars = len(build_task(experiment["task"], seed=0).src_vocab)
    assert chars < size
    with pytest.raises(zoo.ConfigError, match=rf"its model reads a vocabulary of {size} ids, and the task's "
                                              rf"holds {chars} \(task\.tokenizer char\), so the same ids would mean "
                                              r"other tokens; give the task the tokenizer the model was trained with"):
        zoo.train(experiment)


def test_mlm_masks_with_the_tokenizers_mask_token_and_draws_only_ordinary_ids(tmp_path):
    folder, _, tokenizer = language_model_folder(tmp_path / "roberta", mask=True)
    task = build_task(task_fields("mlm", tokenizer_dir=str(folder), test_size=16), seed=0)
    assert task.src_vocab.mask_id == tokenizer.mask_token_id and len(task.src_vocab) == len(tokenizer)
    special = set(tokenizer.all_special_ids)
    for step in range(3):
        src, labels = task.train_batch(step, 64)  # labels: the chosen tokens, the tokenizer's pad elsewhere
        chosen = labels != tokenizer.pad_token_id
        assert chosen.any() and not set(labels[chosen].tolist()) & special, "only ordinary tokens are chosen"
        replaced = chosen & (src != labels) & (src != tokenizer.mask_token_id)
        assert replaced.any() and not set(src[replaced].tolist()) & special, "random tokens are ordinary text"
        assert (chosen & (src == tokenizer.mask_token_id)).any() and not (~chosen & (src == tokenizer.mask_token_id)).any()
        assert src[:, 0].eq(tokenizer.bos_token_id).all(), "the tokenizer's bos opens each document"


def test_mlm_with_a_tokenizer_that_names_no_mask_token_is_refused_by_name(llama):
    with pytest.raises(zoo.ConfigError, match=r"tokenizer_config\.json names no mask_token, which mlm writes"):
        build_task(task_fields("mlm", tokenizer_dir=str(llama[0])), seed=0)


def test_init_from_a_folder_reads_mlm_through_its_tokenizer_and_the_mask_is_its_own(tmp_path):
    """mlm's vocabulary wraps the tokenizer's codec (its mask): the check that a folder's model reads
    the task's ids sees through it, as the size check does."""
    from zoo.trainer.init_from import check_same_tokens, check_vocabulary_sizes

    folder = language_model_folder(tmp_path / "roberta", mask=True)[0]
    task = build_task(task_fields("mlm", tokenizer_dir=str(folder), test_size=16), seed=0)
    check_same_tokens(folder, task)
    check_vocabulary_sizes(str(folder), zoo.from_pretrained(folder).spec, task)
    other = build_task(task_fields("mlm", tokenizer="char"), seed=0)
    with pytest.raises(zoo.ConfigError, match=r"the folder's model reads ids of its own tokenizer"):
        check_same_tokens(folder, other)
