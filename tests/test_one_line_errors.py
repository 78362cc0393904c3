"""The probe's tracebacks, each now one `zoo: ...` line with exit 2 that names the file or the
field: empty text splits, a max_tokens below every line, a grid key `row` without rows, a saved
sweep whose base is a file name, and a checkpoint whose experiment is not a mapping."""

import pytest
import torch
import yaml
from test_bad_input import cli_error
from test_sweep import tiny_sweep

from trainkit import tiny_experiment
from zoo.sweep import run_sweep


def text_experiment(tmp_path, task: str, files: dict[str, str], **fields) -> str:
    folder = tmp_path / "data"
    folder.mkdir(exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    kind = {"lm": "decoder", "mlm": "encoder"}.get(task, "encoder_decoder")
    experiment = tiny_experiment(tmp_path, task={"name": task, "data_dir": str(folder), "test_split": None,
                                                 "tokenizer": "word", **fields})
    experiment["model"]["kind"] = kind
    (tmp_path / "e.yaml").write_text(yaml.safe_dump(experiment))
    return str(tmp_path / "e.yaml")


@pytest.mark.parametrize("task", ["lm", "mlm"])
@pytest.mark.parametrize("text", ["", "  \n\t\n\n"])
@pytest.mark.parametrize("empty", ["train", "valid"])
def test_a_split_without_text_is_named(tmp_path, capsys, task, text, empty):
    files = {f"{split}.txt": text if split == empty else "a b c\nd e\n" for split in ("train", "valid")}
    err = cli_error(["train", text_experiment(tmp_path, task, files)], capsys)
    assert f"{tmp_path / 'data' / f'{empty}.txt'}: split '{empty}' holds no line with text" in err


@pytest.mark.parametrize("task, files, shortest", [
    ("lm", {"train.txt": "a b c\nd e\n", "valid.txt": "a\n"}, "the shortest holds 4 tokens"),
    ("parallel", {"train.de": "a b c\nd\n", "train.en": "x\ny z\n", "valid.de": "a\n", "valid.en": "x\n"},
     "the shortest pair's longer side holds 4 tokens"),
])
@pytest.mark.parametrize("max_tokens", [1, 3])
def test_a_max_tokens_below_every_training_line_says_how_short_the_shortest_is(tmp_path, capsys, task, files,
                                                                               shortest, max_tokens):
    err = cli_error(["train", text_experiment(tmp_path, task, files, max_tokens=max_tokens)], capsys)
    assert f"task.max_tokens {max_tokens}: no training " in err and f"({shortest}, bos and eos counted)" in err


def test_a_grid_key_row_without_rows_is_named(tmp_path, capsys):
    file = tmp_path / "s.yaml"
    file.write_text(yaml.safe_dump({"name": "r", "base": tiny_experiment(tmp_path), "grid": {"row": ["a", "b"]}}))
    err = cli_error(["sweep", str(file), "--dry-run"], capsys)
    assert f"{file}:" in err and "grid key 'row' ['a', 'b'] names rows, but the sweep has no `rows:`" in err


@pytest.mark.slow
def test_a_saved_sweep_whose_base_is_a_file_name_is_refused_by_every_command(tmp_path, capsys):
    sweep, base = tiny_sweep(tmp_path, {"model.norm": ["post"]})
    base["wandb"]["mode"] = "disabled"
    run_sweep(sweep, base, echo=lambda _: None)
    folder = tmp_path / "tiny"
    saved = yaml.safe_load((folder / "sweep.yaml").read_text())
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(saved["base"]))
    (folder / "sweep.yaml").write_text(yaml.safe_dump({**saved, "base": "base.yaml"}))
    said = f"{folder / 'sweep.yaml'}: base 'base.yaml' is not the base experiment itself"
    assert said in cli_error(["reproduce", str(folder / "ledger.jsonl")], capsys)
    assert said in cli_error(["compare", str(folder), "--wandb-mode", "disabled"], capsys)
    (tmp_path / "s.yaml").write_text(yaml.safe_dump({**saved, "base": "base.yaml"}))
    assert said in cli_error(["sweep", str(tmp_path / "s.yaml")], capsys)


@pytest.mark.parametrize("experiment", [[1, 2], "abc", 3])
def test_a_checkpoint_whose_experiment_is_not_a_mapping_is_named(tmp_path, capsys, experiment):
    import zoo

    state = torch.load(zoo.train(tiny_experiment(tmp_path, train={"steps": 2})).checkpoint, weights_only=True)
    torch.save({**state, "experiment": experiment}, tmp_path / "bad.pt")
    err = cli_error(["eval", str(tmp_path / "bad.pt")], capsys)
    assert f"bad.pt: not a zoo checkpoint: its 'experiment' is a {type(experiment).__name__}, not a mapping" in err
