"""Corpus formats are registered as parts are: every format writes the files its documentation
describes and reads the same pairs from them (plain or gzipped), `auto` finds it, and a run trains
on it; a bad line names its file and line, and a pair a format cannot store is refused."""

import gzip
import re

import pytest

import zoo
from trainkit import tiny_experiment
from zoo.tasks.corpus import read_split

PAIRS = {"train": [(f"ein satz {i} hier", f"a sentence {i} here") for i in range(40)],
         "valid": [("ein satz 7 dort", "a sentence 7 there"), ("kein satz", "no sentence")]}


FORMATS = zoo.registry("format").names()
DOCUMENTED = {
    "pair": {"train.de": "ein \"satz\" \u00fcber\n", "train.en": "a \"sentence\" on\n"},
    "tsv": {"train.tsv": "ein \"satz\" \u00fcber\ta \"sentence\" on\n"},
    "jsonl": {"train.jsonl": '{"translation": {"de": "ein \\"satz\\" \u00fcber", "en": "a \\"sentence\\" on"}}\n'},
}
"""The files each format stores one pair in, as its docstring says (a new format needs its own here)."""


@pytest.mark.parametrize("name", FORMATS)
def test_each_format_writes_the_files_its_documentation_describes(tmp_path, name):
    pair, fmt = ('ein "satz" \u00fcber', 'a "sentence" on'), zoo.registry("format").get(name)
    written = fmt.write(tmp_path, "train", [pair])
    assert {path.name: path.read_text(encoding="utf-8") for path in written} == DOCUMENTED[name]
    (tmp_path / "gz").mkdir()
    zipped = fmt.write(tmp_path / "gz", "train", [pair], compress=True)
    assert {path.name: gzip.decompress(path.read_bytes()).decode("utf-8") for path in zipped} == {
        f"{file}.gz": text for file, text in DOCUMENTED[name].items()}


REFUSED = {"pair": {"\n", "\r"}, "tsv": {"\t", "\n", "\r"}, "jsonl": set()}
"""What a sentence of each format cannot hold (a new format needs its own here)."""


@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("char", ["\t", "\n", "\r"], ids=["tab", "line break", "carriage return"])
def test_a_pair_a_format_cannot_store_is_refused_and_nothing_is_written_else_it_reads_back(tmp_path, name, char):
    fmt, pair = zoo.registry("format").get(name), (f"in{char}side", "ok")
    assert set(fmt.cannot_store) == REFUSED[name]
    if char in REFUSED[name]:
        files = " and ".join(fmt.names("train", "de", "en"))
        with pytest.raises(zoo.DataError, match=rf"a {fmt.cannot_store[char]} inside the pair .*: {files} cannot store "
                                                r"it; write it as jsonl"):
            fmt.write(tmp_path, "train", [("fine", "fine"), pair])
        assert not any(tmp_path.iterdir())
    else:  # JSON escapes them all; aligned files hold tabs
        fmt.write(tmp_path, "train", [("fine", "fine"), pair])
        assert fmt.pairs(fmt.files(tmp_path, "train", "de", "en"), "de", "en") == [("fine", "fine"), pair]


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("name", FORMATS)
def test_every_format_reads_the_same_pairs_and_trains(tmp_path, name, gz):
    for split, pairs in PAIRS.items():
        zoo.registry("format").get(name).write(tmp_path, split, pairs, compress=gz)
    for fmt in (name, "auto"):
        assert read_split(tmp_path, "train", "de", "en", fmt) == PAIRS["train"]
    others = [other for other in FORMATS if other != name]
    with pytest.raises(zoo.MissingData, match=r"no .* for split 'valid'") as missing:
        read_split(tmp_path, "valid", "de", "en", others[0])
    assert isinstance(missing.value, zoo.ZooError) and isinstance(missing.value, FileNotFoundError)
    task = {"name": "parallel", "data_dir": str(tmp_path), "test_split": None, "format": name, "tokenizer": "word",
            "min_frequency": 1}
    run = zoo.train(tiny_experiment(tmp_path / "runs", task=task, train={"steps": 4, "eval_every": 4}))
    assert run.metrics["eval/loss"] < 10 and "eval/chrf" in run.metrics


@pytest.mark.parametrize("name", FORMATS)
def test_a_byte_order_mark_at_a_files_start_is_no_part_of_its_first_sentence(tmp_path, name):
    """Some editors begin UTF-8 files with U+FEFF: kept, it made a perfect translation score BLEU 99.56."""
    for path in zoo.registry("format").get(name).write(tmp_path, "train", PAIRS["train"]):
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert read_split(tmp_path, "train", "de", "en", name) == PAIRS["train"]


@pytest.mark.parametrize("name", FORMATS)
def test_a_write_that_cannot_finish_is_refused_before_any_file_changes(tmp_path, name):
    fmt = zoo.registry("format").get(name)
    before = {path: path.read_bytes() for path in fmt.write(tmp_path, "train", PAIRS["train"])}
    for pairs, said in [([("fine", "fine"), ("lone \udc80 surrogate", "x")], "is not storable as UTF-8 text"),
                        ([("fine", "fine"), ("one side",)], "a pair is (source, target), two strings")]:
        with pytest.raises(zoo.DataError, match=re.escape(said)):
            fmt.write(tmp_path, "train", pairs)
        assert {path: path.read_bytes() for path in before} == before, "the files written before are whole"
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(path.name for path in before)
    with pytest.raises(zoo.DataError, match="no such folder to write split 'train' into"):
        fmt.write(tmp_path / "missing", "train", PAIRS["train"])


def test_a_bad_jsonl_line_names_its_file_and_line(tmp_path):
    (tmp_path / "train.jsonl").write_text('{"translation": {"de": "a", "en": "b"}}\n{"de": "c", "fr": "d"}\n')
    with pytest.raises(zoo.DataError, match=r"train.jsonl:2: expected text under 'de' and 'en' .* found \['de', 'fr'\]"):
        read_split(tmp_path, "train", "de", "en", "jsonl")
    (tmp_path / "train.jsonl").write_text('{"de": "a", "en": "b"}\nnot json\n')
    with pytest.raises(zoo.DataError, match=r"train.jsonl:2: not a JSON object"):
        read_split(tmp_path, "train", "de", "en")
    (tmp_path / "train.jsonl").write_text('{"de": "a", "en": "b"}\n' + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(zoo.DataError, match=r"train.jsonl:2: JSON nested too deeply to read"):
        read_split(tmp_path, "train", "de", "en")
    (tmp_path / "train.jsonl").write_text('{"de": "a", "en": "b"}\n{"de": "lone \\udc80", "en": "b"}\n')
    with pytest.raises(zoo.DataError, match=r"train.jsonl:2: the 'de' text holds '\\udc80' \(a lone surrogate"):
        read_split(tmp_path, "train", "de", "en")


def test_an_unknown_format_names_the_choices():
    with pytest.raises(zoo.ConfigError, match=r"unknown format 'jsnl'; did you mean 'jsonl'\? choices: auto, jsonl, pair, "
                                              r"tsv"):
        zoo.specs.experiment.validate_experiment({"task": {"name": "parallel", "data_dir": ".", "format": "jsnl"}})
