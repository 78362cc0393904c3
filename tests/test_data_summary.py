"""A run says what its data is at its start: examples per split, vocabulary sizes, the share of
<unk>, the lines it left out, mean lengths; in the log, result.json and the W&B config."""

import json

import pytest

import zoo
from trainkit import offline_run, run_dir_of, task_fields, text_task, tiny_experiment, write_corpus
from zoo.tasks import build_task
from zoo.tasks.summary import summary_line


@pytest.mark.parametrize("name", zoo.registry("task").names())
def test_every_task_summarizes_its_vocabularies_and_held_out_splits(name):
    task = build_task(task_fields(name), seed=0)
    summary = task.summary(100)
    assert summary["source_vocabulary"] == len(task.src_vocab)
    assert summary.get("target_vocabulary", len(task.tgt_vocab)) == len(task.tgt_vocab)
    for split in task.eval_splits:
        assert summary[f"{split}_examples"] == task.held_out_rows(100, split) == len(task.references(100, split) or
                                                                                     task.eval_batches(100, 1000, split)[0][0])
    assert summary_line(summary).startswith("data: ")


def write_pairs(folder, train: list[tuple[str, str]], valid: list[tuple[str, str]]) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    for split, pairs in (("train", train), ("valid", valid)):
        for side, lang in ((0, "de"), (1, "en")):
            (folder / f"{split}.{lang}").write_text("".join(pair[side] + "\n" for pair in pairs), encoding="utf-8")
    return str(folder)


def test_unknown_tokens_long_lines_and_empty_pairs_are_counted_and_warned_about(tmp_path):
    train = [("a b c", "x y z")] * 30 + [("a " * 20, "x")] * 2 + [("", "x")] * 3
    valid = [("a b q", "x y w"), ("q q q", "x x x")]  # q: 4 of 6 source words unknown, w: 1 of 6 target words
    task = build_task({"name": "parallel", "data_dir": write_pairs(tmp_path, train, valid), "test_split": None,
                       "tokenizer": "word", "min_frequency": 1, "max_tokens": 10}, seed=0)
    summary = task.summary(100)
    assert (summary["train_examples"], summary["train_too_long"], summary["train_empty"]) == (30, 2, 3)
    assert summary["valid_source_unknown_share"] == pytest.approx(4 / 6)
    assert summary["valid_target_unknown_share"] == pytest.approx(1 / 6)
    assert summary["train_source_unknown_share"] == summary["train_target_unknown_share"] == 0
    assert summary["mean_source_tokens"] == summary["mean_target_tokens"] == 5
    line = summary_line(summary)
    assert line.startswith("data: 30 training examples (2 longer than max_tokens 10 left out; 3 with an empty side "
                           "dropped); valid 2; vocabulary ") and "<unk> 0.0% of train source" in line
    assert "66.7% of valid source" in line

    experiment = tiny_experiment(tmp_path / "run", task=task.params.model_dump() | {"name": "parallel"},
                                 train={"steps": 2, "eval_every": 2})
    with pytest.warns(RuntimeWarning, match=r"<unk> makes up 67% of valid source, 17% of valid target tokens"):
        zoo.train(experiment)


def test_a_run_says_its_data_in_the_log_result_and_wandb_config(tmp_path, capsys):
    experiment = tiny_experiment(tmp_path, model={"kind": "decoder"}, task=text_task("lm", write_corpus(tmp_path / "c")),
                                 train={"steps": 2, "eval_every": 2}, wandb={"mode": "offline"})
    zoo.train(experiment)
    result = json.loads((run_dir_of(experiment) / "result.json").read_text())
    summary = result["data_summary"]
    assert summary["train_examples"] == 200 and summary["valid_examples"] == 32 and summary["test_examples"] == 40
    assert summary_line(summary) in capsys.readouterr().out
    info, _ = offline_run(tmp_path)
    assert info["config"]["data"] == summary
