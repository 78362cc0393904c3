"""Every mistake of the user's own is one line that names the file (and line) or the field, and a
refused or failed run leaves nothing behind but what it should: no lone lock, no stale temporary
file, files as readable as the umask says."""

import gzip
import os
import re

import pytest
import yaml
from pydantic import ValidationError
from test_bad_input import cli_error

import zoo
from trainkit import run_dir_of, tiny_experiment
from zoo.sweep import SweepSpec


def corpus(folder, files: dict[str, bytes]) -> dict:
    """A parallel-corpus experiment over `files` (name -> bytes) beside a good training split."""
    folder.mkdir(parents=True, exist_ok=True)
    good = {"train.de": b"eins zwei\ndrei vier\n", "train.en": b"one two\nthree four\n",
            "valid.de": b"eins\n", "valid.en": b"one\n"}
    for name, data in {**good, **files}.items():
        (folder / name).write_bytes(data)
    return tiny_experiment(folder.parent / "runs", task={"name": "parallel", "data_dir": str(folder), "test_split": None,
                                                          "tokenizer": "char", "min_frequency": 1})


BAD_CORPORA = {
    "empty validation split": ({"valid.de": b"", "valid.en": b""}, r"valid\.de and .*valid\.en: split 'valid' holds no "
                                                                    "sentence pair"),
    "unequal lengths": ({"valid.en": b"one\ntwo\n"}, r"valid\.de has 1 lines but .*valid\.en has 2"),
    "not UTF-8": ({"train.en": b"one two\nthr\xe9e four\n"}, r"train\.en:2: not UTF-8 text \(byte 0xe9 at column 4\)"),
    "truncated gzip": ({"train.en.gz": gzip.compress(b"one two\nthree four\n")[:-12]},
                       r"train\.en\.gz: not a readable gzip file \(truncated"),
    "fake gzip": ({"train.en.gz": b"one two\nthree four\n"}, r"train\.en\.gz: not a readable gzip file"),
}


@pytest.mark.parametrize("case", list(BAD_CORPORA))
def test_a_bad_corpus_is_one_line_naming_the_file(tmp_path, capsys, case):
    files, text = BAD_CORPORA[case]
    experiment = corpus(tmp_path / "data", files)
    if case.endswith("gzip"):
        (tmp_path / "data" / "train.en").unlink()  # so the .gz is the file the task reads
    file = tmp_path / "e.yaml"
    file.write_text(yaml.safe_dump(experiment))
    err = cli_error(["train", str(file)], capsys)
    assert re.search(text, err), err
    assert not any((tmp_path / "runs").glob("*/")), "nothing was left behind"


def test_a_tsv_line_with_extra_columns_names_its_line(tmp_path, capsys):
    experiment = corpus(tmp_path / "data", {"valid.tsv": b"eins\tone\nzwei\ttwo\textra\n"})
    experiment["task"]["format"] = "tsv"
    for name in ("train.de", "train.en", "valid.de", "valid.en"):
        (tmp_path / "data" / name).unlink()
    (tmp_path / "data" / "train.tsv").write_bytes(b"eins zwei\tone two\n")
    file = tmp_path / "e.yaml"
    file.write_text(yaml.safe_dump(experiment))
    assert "valid.tsv:2: expected 'source<TAB>target', found 3 column(s)" in cli_error(["train", str(file)], capsys)


@pytest.mark.parametrize("task, split", [
    ({"name": "reverse", "min_len": 3, "max_len": 12}, "training"),
    ({"name": "reverse", "min_len": 3, "max_len": 6, "eval_max_len": 12}, "valid"),
    ({"name": "reverse", "min_len": 3, "max_len": 6, "long_eval_min_len": 10, "long_eval_max_len": 12}, "long"),
])
def test_a_sequence_longer_than_learned_positions_is_found_before_any_step(tmp_path, capsys, task, split):
    experiment = tiny_experiment(tmp_path, task=task, model={"position": "learned", "max_len": 10})
    file = tmp_path / "e.yaml"
    file.write_text(yaml.safe_dump(experiment))
    err = cli_error(["train", str(file)], capsys)
    assert f"the task's {split} data holds a source of 14 positions, more than the model.max_len 10" in err
    assert "found before any training step" in err
    assert not run_dir_of(experiment).exists(), "the refused run leaves no folder holding only a lock"


@pytest.mark.parametrize("name", ["a\0b", "a/b", "a\\b"])
def test_a_run_name_that_cannot_be_a_folder_is_refused(name):
    with pytest.raises(zoo.ConfigError, match=r"names the run's folder: non-empty, without '/', '\\' or a NUL byte"):
        zoo.ExperimentSpec(wandb={"name": name})


@pytest.mark.parametrize("key", ["model.", "model..d_model", ".model", "train.optimizer."])
def test_a_dotted_key_with_an_empty_part_says_so(capsys, key):
    err = cli_error(["train", "--set", f"{key}=5"], capsys)
    assert f"--set {key}: a dotted key with an empty part" in err


def test_a_key_written_twice_in_a_mapping_is_refused_with_both_lines(tmp_path, capsys):
    (tmp_path / "e.yaml").write_text("task: {name: reverse}\ntrain:\n  steps: 5\n  log_every: 5\n  steps: 10\n")
    assert "e.yaml:5:3: invalid YAML: the key 'steps' appears twice (first on line 3)" in \
        cli_error(["train", str(tmp_path / "e.yaml")], capsys)
    (tmp_path / "s.yaml").write_text("name: s\ngrid: {model.norm: [post], model.norm: [pre]}\n")
    assert "the key 'model.norm' appears twice" in cli_error(["sweep", str(tmp_path / "s.yaml"), "--dry-run"], capsys)


def test_zoo_show_takes_one_variant(capsys):
    err = cli_error(["show", "pre-ln", "--set", "vocab_size=10", "preset=t5"], capsys)
    assert "the variant is the name already; show the other one as zoo show t5" in err


def test_zoo_eval_refuses_a_set_it_would_ignore(capsys, trained_run):
    err = cli_error(["eval", str(trained_run.checkpoint), "--set", "model.d_model=64", "train.steps=9"], capsys)
    assert "zoo eval --set model.d_model, train.steps: an evaluation takes the checkpoint's model" in err
    assert "only task.* and train.eval_size and train.batch_size may change" in err


@pytest.mark.parametrize("key", ["train.out_dir", "wandb.dir", "wandb.group", "wandb.name", "wandb.job_type",
                                 "wandb.config.x"])
def test_a_grid_over_what_the_sweep_sets_itself_is_refused(key):
    with pytest.raises(zoo.ConfigError, match=rf"grid key '{key}': the sweep sets {key.rsplit('.x')[0]} of every cell"):
        SweepSpec(name="s", grid={key: ["a", "b"]})


@pytest.mark.parametrize("call", [
    lambda: zoo.spec("pre-ln", vocab_size=10, d_model=-1),
    lambda: zoo.build("pre-ln", vocab_size=10, dropout=2),
    lambda: zoo.build({"preset": "pre-ln", "vocab_size": 10, "n_heads": 0}),
])
def test_the_python_api_raises_the_zoos_errors_with_pydantics_as_the_cause(call):
    with pytest.raises(zoo.ConfigError) as err:
        call()
    assert isinstance(err.value.__cause__, ValidationError)
    assert str(err.value).split(":")[0] in ("d_model", "dropout", "n_heads")


def test_a_spec_file_with_a_bad_field_names_the_file(tmp_path):
    (tmp_path / "spec.yaml").write_text("preset: pre-ln\nvocab_size: 10\nd_model: -4\n")
    with pytest.raises(zoo.ConfigError, match=r"spec\.yaml: d_model: Input should be greater than 0"):
        zoo.load_spec(tmp_path / "spec.yaml")


def test_a_temporary_file_of_a_killed_write_is_removed_when_the_run_starts_again(tmp_path):
    experiment = tiny_experiment(tmp_path, train={"steps": 4})
    result = zoo.train(experiment)
    partial = result.run_dir / ".checkpoint.pt.k1ll3d.tmp"
    partial.write_bytes(b"half a checkpoint")
    zoo.train(tiny_experiment(tmp_path, train={"steps": 8}), resume=True)
    assert not partial.exists()


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_files_a_run_writes_are_as_readable_as_the_umask_says(tmp_path, umask, mode):
    before = os.umask(umask)
    try:
        result = zoo.train(tiny_experiment(tmp_path, train={"steps": 2}))
    finally:
        os.umask(before)
    for name in ("checkpoint.pt", "result.json"):
        assert (result.run_dir / name).stat().st_mode & 0o777 == mode, name


def test_a_run_that_fails_before_writing_anything_leaves_no_folder(tmp_path, monkeypatch):
    from zoo.trainer.loop import Trainer

    def broken_step(self, step):
        raise RuntimeError("a bug in the first step")

    monkeypatch.setattr(Trainer, "_train_step", broken_step)
    experiment = tiny_experiment(tmp_path)
    with pytest.raises(RuntimeError, match="a bug in the first step"):
        zoo.train(experiment)
    assert not run_dir_of(experiment).exists()


def test_a_refused_run_leaves_no_folder_it_made_and_a_finished_one_no_lock_file(tmp_path):
    """A refused start removed its run folder but left the train.out_dir it had made (an empty
    runs/); a finished run kept its .lock file. Neither stays now; a folder that was there stays."""
    experiment = tiny_experiment(tmp_path / "fresh" / "runs", train={"steps": 2})
    missing = {**experiment, "task": {"name": "parallel", "data_dir": str(tmp_path / "nowhere")}}
    with pytest.raises(zoo.DataError, match="no such folder"):
        zoo.train(missing)
    assert not (tmp_path / "fresh").exists(), "the folders this run made are gone"
    result = zoo.train(experiment)
    assert [p.name for p in result.run_dir.iterdir() if p.name.startswith(".")] == [], "no lock file left"
    with pytest.raises(zoo.DataError, match="no such folder"):
        zoo.train(missing)
    assert (tmp_path / "fresh" / "runs").is_dir(), "a folder that held another run before stays"
