"""`zoo data prepare` and `zoo data verify`: every source a researcher holds becomes the same
kind of token store; run twice, or interrupted and run again, it writes the same bytes; a store
whose files do not match its index is named before anything reads it."""

import dataclasses
import gzip
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from shardkit import SETTINGS, corpus_folder, document, folder_bytes, prepare

from trainkit import MULTI30K
from zoo.errors import DataError
from zoo.tasks.shard_prepare import Preparation, split_of
from zoo.tasks.shard_sources import Reading
from zoo.tasks.shard_store import ShardStore, dtype_for
from zoo.tasks.shard_writer import ShardWriter
from zoo.tasks.text import codec_from_state

TEXTS = [document(n) for n in range(120)]


def stored_texts(store: ShardStore, split: str, stream: str = "text") -> list[str]:
    codec = codec_from_state(json.loads(store.tokenizer_text()))
    part = store.stream(split, stream)
    return [codec.decode(part.document(n)[1:].tolist()) for n in range(part.documents)]


@pytest.fixture(scope="module")
def folder_store(tmp_path_factory):
    root = tmp_path_factory.mktemp("store")
    prepare([corpus_folder(root / "corpus")], root / "store")
    return root


def test_a_folder_of_documents_becomes_shards_that_decode_back_to_its_text(folder_store):
    store = ShardStore.open(folder_store / "store")
    assert store.dtype == np.dtype("<u2") and store.vocab_size == 120
    seen = []
    for split in ("train", "valid", "test"):
        texts = stored_texts(store, split)
        assert texts and all(split_of(text, SETTINGS) == split for text in texts), "the split is the text's hash"
        seen += texts
        stream = store.stream(split)
        assert len(stream.shards) > 1 or split != "train", "tiny shards: the training split spans several"
        assert stream.first_documents(None) == (len(texts), stream.tokens, sum(len(t.encode()) for t in texts))
        ids = stream.read(0, stream.tokens)
        assert ids[0] == 1 and (ids == 1).sum() == (ids == 2).sum() == len(texts), "each document is bos ... eos"
    assert sorted(seen) == sorted(TEXTS), "every document once, in one split"


def test_every_source_format_gives_the_same_documents(tmp_path):
    import datasets

    separated = tmp_path / "corpus.txt"
    separated.write_text("\n<|endoftext|>\n".join(TEXTS), encoding="utf-8")
    lines = tmp_path / "lines.txt.gz"
    with gzip.open(lines, "wt", encoding="utf-8") as handle:
        handle.write("\n".join(text.replace("\n", " ") for text in TEXTS) + "\n")
    jsonl = tmp_path / "rows.jsonl"
    jsonl.write_text("".join(json.dumps({"id": n, "body": text}) + "\n" for n, text in enumerate(TEXTS)), encoding="utf-8")
    table = datasets.Dataset.from_dict({"body": TEXTS})
    table.to_parquet(str(tmp_path / "rows.parquet"))
    table.save_to_disk(str(tmp_path / "arrow"))
    arrow = next((tmp_path / "arrow").glob("*.arrow"))

    def texts(sources, **reading):
        settings = dataclasses.replace(SETTINGS, reading=Reading(**reading))
        out = tmp_path / f"store{len(list(tmp_path.glob('store*')))}"
        prepare(sources, out, settings)
        store = ShardStore.open(out)
        return sorted(t for split in store.splits for t in stored_texts(store, split))

    assert texts([corpus_folder(tmp_path / "folder")]) == sorted(TEXTS)
    assert texts([separated], separator="<|endoftext|>") == sorted(TEXTS)
    assert texts([lines]) == sorted(text.replace("\n", " ") for text in TEXTS), "a document a line"
    assert texts([jsonl], field="body") == texts([tmp_path / "rows.parquet"], field="body") == texts([arrow], field="body") \
        == sorted(TEXTS)


def test_a_parallel_corpus_keeps_its_splits_and_leaves_out_training_pairs_held_out(tmp_path):
    from zoo.tasks.corpus import read_split

    pairs = read_split(MULTI30K, "train", "de", "en")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for stem, part in (("train", pairs[:300] + pairs[300:310]), ("valid", pairs[300:340]), ("test", pairs[340:380])):
        for side, lang in ((0, "de"), (1, "en")):
            (corpus / f"{stem}.{lang}").write_text("".join(pair[side] + "\n" for pair in part), encoding="utf-8")
    settings = dataclasses.replace(SETTINGS, pair=("de", "en"), vocab_size=400, shard_tokens=2000,
                                   max_unknown=0.01)
    index = prepare([corpus], tmp_path / "store", settings)
    store = ShardStore.open(tmp_path / "store")
    assert index["left_out"]["held_out_sources"] == 10, "the training copies of 10 validation pairs"
    assert store.summary()["train"]["src"]["documents"] == store.summary()["train"]["tgt"]["documents"] == 300
    assert stored_texts(store, "valid", "tgt")[:3] == [t.strip() for _, t in pairs[300:303]]
    assert store.stream("test", "tgt").first_documents(None)[2] == sum(len(t.encode()) for _, t in pairs[340:380])


def test_the_same_input_writes_the_same_bytes_in_one_process_or_in_workers(folder_store, tmp_path):
    prepare([folder_store / "corpus"], tmp_path / "again", batch_documents=7)
    prepare([folder_store / "corpus"], tmp_path / "workers", workers=2, batch_documents=7)
    first = folder_bytes(folder_store / "store")
    assert folder_bytes(tmp_path / "again") == first == folder_bytes(tmp_path / "workers")
    assert prepare([folder_store / "corpus"], folder_store / "store")["job"] == json.loads(first["index.json"])["job"], \
        "prepared already: left as it is"


def test_an_interrupted_preparation_goes_on_where_it_stopped_and_writes_the_same_bytes(folder_store, tmp_path,
                                                                                      monkeypatch):
    add, calls = ShardWriter.add, []

    def dies_midway(self, *args):
        calls.append(1)
        if len(calls) == 70:  # after commits, in the middle of a batch: bytes written that no commit counted
            raise KeyboardInterrupt
        return add(self, *args)

    monkeypatch.setattr(ShardWriter, "add", dies_midway)
    with pytest.raises(KeyboardInterrupt):
        prepare([folder_store / "corpus"], tmp_path / "cut", batch_documents=16)
    progress = json.loads((tmp_path / "cut" / "progress.json").read_text())
    assert 0 < progress["counts"]["consumed"] < 120 and not (tmp_path / "cut" / "index.json").exists()
    with pytest.raises(DataError, match="did not finish: run zoo data prepare again"):
        ShardStore.open(tmp_path / "cut")
    monkeypatch.setattr(ShardWriter, "add", add)
    prepare([folder_store / "corpus"], tmp_path / "cut", batch_documents=16)
    assert folder_bytes(tmp_path / "cut") == folder_bytes(folder_store / "store")


def test_byte_level_bpe_covers_any_text_and_a_word_bpe_that_does_not_is_refused_naming_the_file(tmp_path):
    corpus = corpus_folder(tmp_path / "corpus", documents=60)
    (corpus / "part0" / "odd.txt").write_text("ℵℶℷ ☃☃ " * 40, encoding="utf-8")
    with pytest.raises(DataError, match=r"odd.txt: the tokenizer does not cover the text: \d+ of \d+ ids of split"):
        prepare([corpus], tmp_path / "bpe", dataclasses.replace(SETTINGS, valid_share=0.3, test_share=0.3))
    bytes_settings = dataclasses.replace(SETTINGS, tokenizer="bytes", vocab_size=300, valid_share=0.3, test_share=0.3)
    prepare([corpus], tmp_path / "bytes", bytes_settings)
    store = ShardStore.open(tmp_path / "bytes")
    texts = [t for split in store.splits for t in stored_texts(store, split)]
    assert "ℵℶℷ ☃☃ " * 39 + "ℵℶℷ ☃☃" in texts, "byte-level BPE keeps the text exactly"


def test_a_transformers_tokenizer_folder_makes_the_ids_with_its_own_specials(tmp_path):
    from pretrainedkit import family_tokenizer

    folder = tmp_path / "tokenizer"
    family_tokenizer("bart").save_pretrained(folder)
    settings = dataclasses.replace(SETTINGS, tokenizer_dir=str(folder), max_unknown=0.05)
    index = prepare([corpus_folder(tmp_path / "corpus", documents=40)], tmp_path / "store", settings)
    assert index["special_ids"] == {"pad_id": 1, "bos_id": 0, "eos_id": 2} and index["vocab_size"] == 300
    ids = ShardStore.open(tmp_path / "store").stream("train").document(0)
    assert ids[0] == 0 and ids[-1] == 2 and 1 not in ids.tolist()


@pytest.mark.parametrize("damage, said", [
    (lambda path: path.write_bytes(path.read_bytes()[:-2]), "holds 0 bytes|holds \\d+ bytes, the index says"),
    (lambda path: path.write_bytes(bytes([path.read_bytes()[0] ^ 1]) + path.read_bytes()[1:]), "its SHA-256 is not"),
    (lambda path: path.unlink(), "is missing"),
], ids=["cut", "flipped byte", "missing"])
def test_a_shard_that_does_not_match_its_index_is_named_by_verify_and_before_training(folder_store, tmp_path, damage,
                                                                                        said):
    import shutil

    from zoo.tasks import build_task

    shutil.copytree(folder_store / "store", tmp_path / "store")
    damage(tmp_path / "store" / "train.text.00001.bin")
    with pytest.raises(DataError, match=f"train.text.00001.bin.*({said})"):
        ShardStore.open(tmp_path / "store")  # what zoo data verify says
    with pytest.raises(DataError, match=f"train.text.00001.bin.*({said})"):
        build_task({"name": "lm_shards", "path": str(tmp_path / "store"), "pack": 16}, seed=0)


def test_ids_past_the_vocabulary_and_a_vocabulary_past_the_shard_type_are_refused(folder_store, tmp_path):
    import shutil

    shutil.copytree(folder_store / "store", tmp_path / "store")
    index = json.loads((tmp_path / "store" / "index.json").read_text())
    index["vocab_size"] = 100  # the shards hold ids up to 119
    (tmp_path / "store" / "index.json").write_text(json.dumps(index))
    with pytest.raises(DataError, match=r"train.text.00000.bin holds id 1\d\d, past the vocabulary of 100"):
        ShardStore.open(tmp_path / "store")
    index["vocab_size"] = 70_000
    (tmp_path / "store" / "index.json").write_text(json.dumps(index))
    with pytest.raises(DataError, match="a vocabulary of 70000 tokens does not fit its shards' uint16"):
        ShardStore.open(tmp_path / "store")
    assert dtype_for(65_536) == np.dtype("<u2") and dtype_for(65_537) == np.dtype("<u4")
    with pytest.raises(DataError, match="fit no shard type"):
        dtype_for(2**32 + 1)


def test_an_empty_corpus_and_an_empty_split_are_refused_by_name(tmp_path):
    (tmp_path / "empty.txt").write_text("\n  \n\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"empty\.txt: no training document with text"):
        prepare([tmp_path / "empty.txt"], tmp_path / "a")
    (tmp_path / "two.txt").write_text("one document\nanother one\n", encoding="utf-8")
    with pytest.raises(DataError, match="split 'valid' holds no document; raise --valid-share"):
        prepare([tmp_path / "two.txt"], tmp_path / "b", dataclasses.replace(SETTINGS, vocab_size=40))
    with pytest.raises(DataError, match="holds a token store of other input"):
        corpus_folder(tmp_path / "c", 40)
        prepare([tmp_path / "c"], tmp_path / "d")
        prepare([tmp_path / "c"], tmp_path / "d", dataclasses.replace(SETTINGS, vocab_size=121))


def test_the_index_says_what_the_store_was_made_from(folder_store):
    index = json.loads((folder_store / "store" / "index.json").read_text())
    sources = index["provenance"]["sources"]
    assert len(sources) == 120 and all(s["sha256"] == hashlib.sha256(Path(s["path"]).read_bytes()).hexdigest()
                                       for s in sources)
    assert index["provenance"]["command"] == "zoo data prepare (test)" and "zoo_commit" in index["provenance"]
    assert index["provenance"]["settings"]["vocab_size"] == 120 and index["pad_in_documents"] == 0


def test_the_cli_prepares_and_verifies(tmp_path):
    corpus = corpus_folder(tmp_path / "corpus", documents=40)
    done = subprocess.run([sys.executable, "-m", "zoo.cli", "data", "prepare", str(corpus), "--out", str(tmp_path / "s"),
                           "--vocab-size", "100", "--valid-share", "0.2", "--test-share", "0.2"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["splits"]["train"]["text"]["documents"] == ShardStore.open(tmp_path / "s").stream(
        "train").documents
    verified = subprocess.run([sys.executable, "-m", "zoo.cli", "data", "verify", str(tmp_path / "s")],
                              capture_output=True, text=True, timeout=120)
    assert verified.returncode == 0 and "files match the index" in verified.stdout
    shard = tmp_path / "s" / "train.text.00000.bin"
    shard.write_bytes(bytes([shard.read_bytes()[0] ^ 1]) + shard.read_bytes()[1:])
    damaged = subprocess.run([sys.executable, "-m", "zoo.cli", "data", "verify", str(tmp_path / "s")],
                             capture_output=True, text=True, timeout=120)
    assert damaged.returncode == 2 and damaged.stderr.count("\n") == 1, damaged.stderr
    assert damaged.stderr.startswith("zoo: ") and "train.text.00000.bin: its SHA-256 is not the index's" in damaged.stderr


def test_a_runs_data_identity_is_the_stores_content_not_how_it_was_prepared(folder_store, tmp_path):
    from zoo.tasks import data_digests

    settings = dataclasses.replace(SETTINGS)
    Preparation([str(folder_store / "corpus")], tmp_path / "again", settings, command="another command",
                progress=False).run()
    first, again = (data_digests({"name": "lm_shards", "path": str(path), "pack": 16})
                    for path in (folder_store / "store", tmp_path / "again"))
    assert list(first.values()) == list(again.values()), "the same shards and tokenizer: the same data"
    other = tmp_path / "other"
    prepare([folder_store / "corpus"], other, dataclasses.replace(SETTINGS, vocab_size=121))
    assert list(data_digests({"name": "lm_shards", "path": str(other), "pack": 16}).values()) != list(first.values())
