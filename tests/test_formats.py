"""Corpus formats are registered as parts are: every format reads the same pairs from its own
files (plain or gzipped), `auto` finds it, and a run trains on it; a bad line names its file and
line."""

import pytest
from corpuskit import WRITERS, opener

import zoo
from trainkit import tiny_experiment
from zoo.tasks.corpus import read_split

PAIRS = {"train": [(f"ein satz {i} hier", f"a sentence {i} here") for i in range(40)],
         "valid": [("ein satz 7 dort", "a sentence 7 there"), ("kein satz", "no sentence")]}


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("name", zoo.registry("format").names())
def test_every_format_reads_the_same_pairs_and_trains(tmp_path, name, gz):
    for split, pairs in PAIRS.items():
        WRITERS[name](tmp_path, split, pairs, opener(gz))
    for fmt in (name, "auto"):
        assert read_split(tmp_path, "train", "de", "en", fmt) == PAIRS["train"]
    others = [other for other in zoo.registry("format").names() if other != name]
    with pytest.raises(zoo.MissingData, match=r"no .* for split 'valid'") as missing:
        read_split(tmp_path, "valid", "de", "en", others[0])
    assert isinstance(missing.value, zoo.ZooError) and isinstance(missing.value, FileNotFoundError)
    task = {"name": "parallel", "data_dir": str(tmp_path), "test_split": None, "format": name, "tokenizer": "word",
            "min_frequency": 1}
    run = zoo.train(tiny_experiment(tmp_path / "runs", task=task, train={"steps": 4, "eval_every": 4}))
    assert run.metrics["eval/loss"] < 10 and "eval/chrf" in run.metrics


def test_a_bad_jsonl_line_names_its_file_and_line(tmp_path):
    (tmp_path / "train.jsonl").write_text('{"translation": {"de": "a", "en": "b"}}\n{"de": "c", "fr": "d"}\n')
    with pytest.raises(zoo.DataError, match=r"train.jsonl:2: expected text under 'de' and 'en' .* found \['de', 'fr'\]"):
        read_split(tmp_path, "train", "de", "en", "jsonl")
    (tmp_path / "train.jsonl").write_text('{"de": "a", "en": "b"}\nnot json\n')
    with pytest.raises(zoo.DataError, match=r"train.jsonl:2: not a JSON object"):
        read_split(tmp_path, "train", "de", "en")


def test_an_unknown_format_names_the_choices():
    with pytest.raises(zoo.ConfigError, match=r"unknown format 'jsnl'; did you mean 'jsonl'\? choices: auto, jsonl, pair, "
                                              r"tsv"):
        zoo.specs.experiment.validate_experiment({"task": {"name": "parallel", "data_dir": ".", "format": "jsnl"}})
