"""Documents packed in one row (model.documents separate or masked): attention never crosses a
document's start, for every attention layout, in the forward pass, in evaluation and in decoding,
and under `separate` positions restart, so a packed row computes what each document computes
alone. The lm task reads documents from a folder of files or a file with a separator line."""

import pytest
import torch
from conftest import TINY

import zoo
from zoo.kernels import flex
from zoo.kernels.masks import document_positions
from zoo.specs.catalog import validated
from zoo.specs.experiment import ExperimentSpec
from zoo.tasks import build_task
from zoo.trainer.evaluate import evaluate_split

ATTENTION = zoo.registry("attention").names()
POSITIONS = zoo.registry("position").names()
DOCUMENTS = [[1, 5, 6, 7, 2], [1, 8, 9, 2], [1, 10, 11, 12, 13, 14, 2]]
"""Three documents, each bos ... eos, of 5, 4 and 7 tokens."""
PACKED = [token for document in DOCUMENTS for token in document]


def decoder(attention: str, position: str, documents: str, **extra) -> zoo.ZooModel:
    return zoo.build(f"decoder.pre.{position}.{attention}.gelu", seed=0, documents=documents, **{**TINY, **extra}).eval()


def alone(model: zoo.ZooModel, documents=DOCUMENTS) -> torch.Tensor:
    """Each document's logits run alone, one after another along the row."""
    return torch.cat([model(torch.tensor([document])) for document in documents], dim=1)


@pytest.fixture(params=["reference", "flex kernel"])
def flex_path(request, monkeypatch):
    """`flex` computed by the reference, or by FlexAttention's own (unfused) path on the CPU."""
    monkeypatch.setattr(flex, "FLEX_ON_CPU", request.param == "flex kernel")
    return request.param


@pytest.mark.parametrize("attention", ATTENTION)
@pytest.mark.parametrize("position", POSITIONS)
@pytest.mark.parametrize("extra", [{}, {"window": 3}, {"ffn": "moe"}], ids=["plain", "window", "moe"])
def test_a_packed_row_computes_each_document_as_if_alone(flex_path, attention, position, extra):
    model = decoder(attention, position, "separate", **extra)
    row = torch.tensor([PACKED])
    with torch.no_grad():
        torch.testing.assert_close(model(row), alone(model), atol=2e-5, rtol=1e-5)
    joined = zoo.convert(model, documents="joined").eval()
    with torch.no_grad():
        assert (joined(row) - alone(joined)).abs().max() > 1e-3, "without the mask the documents see each other"


@pytest.mark.parametrize("attention", ATTENTION)
@pytest.mark.parametrize("position", POSITIONS)
def test_masked_documents_keep_their_positions_running_along_the_row(attention, position):
    """`masked` hides other documents but lets positions run on (Llama 3): a scheme acting inside
    attention sees only distances and gives each document alone; one that adds absolute positions
    to the embeddings does not."""
    model = decoder(attention, position, "masked")
    row = torch.tensor([PACKED])
    with torch.no_grad():
        packed, expected = model(row), alone(model)
    first = len(DOCUMENTS[0])
    torch.testing.assert_close(packed[:, :first], expected[:, :first], atol=2e-5, rtol=1e-5)
    if zoo.registry("position").get(position).absolute():
        assert (packed[:, first:] - expected[:, first:]).abs().max() > 1e-3
    else:
        torch.testing.assert_close(packed, expected, atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize("attention", ATTENTION)
def test_padded_rows_of_packed_documents_equal_each_document_alone(attention):
    model = decoder(attention, "rope", "separate")
    rows = torch.tensor([[*DOCUMENTS[0], *DOCUMENTS[1], 0, 0, 0], [*DOCUMENTS[2], *DOCUMENTS[1][:3], 0, 0]])
    with torch.no_grad():
        logits = model(rows)
        first = alone(model, DOCUMENTS[:2])
        second = alone(model, [DOCUMENTS[2], DOCUMENTS[1][:3]])
    torch.testing.assert_close(logits[0, :9], first[0], atol=2e-5, rtol=1e-5)
    torch.testing.assert_close(logits[1, :10], second[0], atol=2e-5, rtol=1e-5)


def test_the_gradient_of_a_packed_row_is_the_sum_of_each_documents():
    model = decoder("sdpa", "learned", "separate").train()
    kind = type(model)

    def loss_of(rows: list[list[int]]) -> torch.Tensor:
        ids = torch.tensor(rows)
        (inputs,), labels = kind.frame(model.spec, ids[:, :1], ids)
        return torch.nn.functional.cross_entropy(model(inputs).flatten(0, 1), labels.flatten(), ignore_index=0,
                                                 reduction="sum")

    packed = torch.autograd.grad(loss_of([PACKED]), list(model.parameters()))
    each = [torch.autograd.grad(loss_of([document]), list(model.parameters())) for document in DOCUMENTS]
    for got, *parts in zip(packed, *each, strict=True):
        torch.testing.assert_close(got, sum(parts), atol=1e-5, rtol=1e-4)


def test_a_documents_last_token_is_not_scored_on_the_next_documents_start():
    spec = zoo.spec("decoder.pre.rope.fused.gelu", documents="separate", **TINY)
    ids = torch.tensor([PACKED])
    labels = type(zoo.build(spec, seed=0)).frame(spec, ids[:, :1], ids)[1]
    assert labels.tolist() == [[5, 6, 7, 2, 0, 8, 9, 2, 0, 10, 11, 12, 13, 14, 2]]
    joined = spec.replace(documents="joined")
    assert type(zoo.build(joined, seed=0)).frame(joined, ids[:, :1], ids)[1].tolist() == [ids[0, 1:].tolist()]


def test_positions_restart_at_each_start_and_count_real_tokens():
    spec = zoo.spec("decoder.pre.learned.fused.gelu", documents="separate", **TINY)
    ids = torch.tensor([[7, 8, 2, 1, 5, 6, 2, 1, 9], [1, 5, 0, 0, 0, 0, 0, 0, 0]])
    assert document_positions(ids, spec).tolist() == [[0, 1, 2, 0, 1, 2, 3, 0, 1], [0, 1, 1, 1, 1, 1, 1, 1, 1]]
    assert document_positions(ids, spec.replace(documents="masked")) is None


@pytest.mark.parametrize("attention", ["fused", "sdpa", "flex"])
@pytest.mark.parametrize("extra", [{}, {"window": 3}], ids=["plain", "window"])
@pytest.mark.parametrize("use_cache", [True, False])
@pytest.mark.parametrize("beams", [1, 3])
def test_decoding_after_earlier_documents_equals_decoding_the_last_alone(flex_path, attention, extra, use_cache, beams):
    model = decoder(attention, "learned", "separate", **extra)
    earlier, last = DOCUMENTS[0] + DOCUMENTS[1], DOCUMENTS[2][:3]
    after = model.generate(torch.tensor([earlier + last]), max_new_tokens=8, use_cache=use_cache, num_beams=beams)
    by_itself = model.generate(torch.tensor([last]), max_new_tokens=8, use_cache=use_cache, num_beams=beams)
    assert after[0, len(earlier):].tolist() == by_itself[0].tolist()
    tokens, state = model.start_decoding(torch.tensor([earlier + last]), use_cache=use_cache)
    alone_tokens, alone_state = model.start_decoding(torch.tensor([last]), use_cache=use_cache)
    for _ in range(4):  # every step's logits, not just the argmax
        logits, expected = model.decode_step(tokens, state), model.decode_step(alone_tokens, alone_state)
        torch.testing.assert_close(logits, expected, atol=2e-5, rtol=1e-5)
        chosen = expected.argmax(-1, keepdim=True)
        tokens, alone_tokens = torch.cat([tokens, chosen], 1), torch.cat([alone_tokens, chosen], 1)


def test_a_batch_of_prompts_with_and_without_earlier_documents_decodes_each_as_alone():
    model = decoder("sdpa", "rope", "separate", window=3)
    earlier, last = DOCUMENTS[0], DOCUMENTS[2][:4]
    batch = torch.tensor([earlier + last, last + [0] * len(earlier)])
    out = model.generate(batch, max_new_tokens=6)
    by_itself = model.generate(torch.tensor([last]), max_new_tokens=6)[0].tolist()
    assert out[0, len(earlier):].tolist()[: len(by_itself)] == by_itself
    assert out[1].tolist()[: len(by_itself)] == by_itself


def write_documents(folder, split: str, texts: list[str], suffix: str = ".txt") -> None:
    (folder / split).mkdir(parents=True)
    for i, text in enumerate(texts):
        (folder / split / f"{i:03d}{suffix}").write_text(text, encoding="utf-8")


def folder_task(folder, **settings) -> dict:
    return {"name": "lm", "data_dir": str(folder), "folders": True, "tokenizer": "char", "vocab_size": 60,
            "min_frequency": 1, "max_tokens": 10_000, **settings}


def test_evaluating_packed_documents_scores_what_each_document_scores_alone(tmp_path):
    texts = ["def f(x):\n    return x\n", "class A:\n    pass\n", "import os\nprint(os.sep)\n"]
    for split in ("train", "valid", "test"):
        write_documents(tmp_path, split, texts * (10 if split == "train" else 1))
    spec_fields = {"kind": "decoder", "norm": "pre", "position": "learned", "attention": "sdpa", "ffn": "gelu",
                   **{key: value for key, value in TINY.items() if key != "vocab_size"}, "max_len": 128,
                   "documents": "separate"}
    one_row = build_task(folder_task(tmp_path, pack=128), seed=0)  # every held-out document in one row
    a_row_each = build_task(folder_task(tmp_path), seed=0)
    assert len(one_row.held_out(None, "valid")) == 1 and len(a_row_each.held_out(None, "valid")) == 3
    model = zoo.build(zoo.resolve({**spec_fields, "vocab_size": len(one_row.src_vocab)}), seed=0)
    packed = evaluate_split(model, one_row, "valid", 3, 8, "cpu")
    separate = evaluate_split(model, a_row_each, "valid", 3, 8, "cpu")
    assert packed["eval/loss"] == pytest.approx(separate["eval/loss"], rel=1e-5)
    assert packed["eval/token_acc"] == pytest.approx(separate["eval/token_acc"])


def test_an_lm_run_trains_on_a_folder_of_documents_with_their_masks(tmp_path):
    from trainkit import tiny_experiment

    texts = [f"def f{i}(x):\n    return x * {i}\n" for i in range(30)]
    for split in ("train", "valid", "test"):
        write_documents(tmp_path / "corpus", split, texts)
    experiment = tiny_experiment(tmp_path, model={"kind": "decoder", "n_decoder_layers": 2, "documents": "separate",
                                                  "max_len": 64},
                                 task=folder_task(tmp_path / "corpus", pack=64), train={"steps": 30, "eval_every": 30})
    result = zoo.train(experiment)
    assert result.metrics["eval/perplexity"] < 12, "a run learns the documents' characters"


def test_a_folder_corpus_reads_its_files_in_path_order_with_their_line_breaks(tmp_path):
    (tmp_path / "train" / "sub").mkdir(parents=True)
    (tmp_path / "train" / "b.py").write_bytes(b"\xef\xbb\xbfx = 1\r\ny = 2\r\n")  # a byte-order mark, CRLF
    (tmp_path / "train" / "a.py").write_text("\n\nimport os\n\n", encoding="utf-8")
    (tmp_path / "train" / "sub" / "c.py").write_text("pass", encoding="utf-8")
    (tmp_path / "train" / "notes.txt").write_text("not python", encoding="utf-8")
    (tmp_path / "train" / "empty.py").write_text("  \n", encoding="utf-8")
    (tmp_path / "train" / ".hidden").mkdir()
    (tmp_path / "train" / ".hidden" / "d.py").write_text("secret", encoding="utf-8")
    task = build_task({**folder_task(tmp_path, suffix=".py"), "test_split": None, "valid_split": "train"}, seed=0)
    assert task._split("train") == ("import os", "x = 1\ny = 2", "pass")


def test_a_separator_line_ends_each_document(tmp_path):
    (tmp_path / "train.txt").write_text("a b\nc\n<|endoftext|>\n\n<|endoftext|>\nd\n <|endoftext|>\ne", encoding="utf-8")
    task = build_task({"name": "lm", "data_dir": str(tmp_path), "separator": "<|endoftext|>", "valid_split": "train",
                       "test_split": None, "tokenizer": "char", "min_frequency": 1}, seed=0)
    assert task._split("train") == ("a b\nc", "d\n <|endoftext|>\ne"), "only a whole line separates"


@pytest.mark.parametrize("settings, message", [
    ({"separator": "<sep>"}, "folders reads a folder of files a split, so separator has nothing to read"),
    ({"lang": "en"}, "folders reads a folder of files a split, so lang has nothing to read"),
    ({"folders": False, "suffix": ".py"}, "suffix picks the files of a folder of documents; it needs folders: true"),
    ({"folders": False, "separator": "a\nb"}, "separator 'a\\\\nb': a whole line of text"),
])
def test_document_settings_that_cannot_hold_together_are_refused(tmp_path, settings, message):
    with pytest.raises(zoo.ConfigError, match=f"task.*{message}"):
        validated({"model": {"kind": "decoder"}, "task": folder_task(tmp_path, **settings)}, ExperimentSpec)


def test_a_missing_folder_and_a_file_that_is_not_utf8_are_named(tmp_path):
    with pytest.raises(zoo.MissingData, match="no folder train/ for split 'train'"):
        build_task(folder_task(tmp_path), seed=0)
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    with pytest.raises(zoo.DataError, match=r"latin1.txt:1: not UTF-8 text \(byte 0xe9 at column 4\)"):
        build_task(folder_task(tmp_path), seed=0)


@pytest.mark.parametrize("fields", [{"kind": "encoder_decoder"}, {"kind": "encoder"},
                                    {"kind": "decoder", "bos_id": 0}])
def test_documents_apart_need_a_decoder_only_model_with_its_own_start_token(fields):
    with pytest.raises(zoo.ConfigError, match=r"documents separate: documents are told apart by their start token.*"
                                              r"choices for this model: joined"):
        zoo.resolve({**fields, "vocab_size": 20, "documents": "separate"})


def test_packing_cuts_a_document_longer_than_a_row_across_rows_and_leaves_none_out(tmp_path):
    """nanoGPT's and litgpt's packing: max_tokens drops documents taken whole, never packed ones."""
    for split in ("train", "valid", "test"):
        write_documents(tmp_path, split, ["x = 1\n"] * 20 + ["y = 2\n" * 10])
    task = build_task(folder_task(tmp_path, pack=16, max_tokens=20), seed=0)
    documents = [task.codec.encode(text) for text in ["x = 1\n"] * 20 + ["y = 2\n" * 10]]
    stream = [token for ids in documents for token in ids]
    assert len(documents[-1]) == 61 > 20, "the long document is longer than max_tokens and than a row"
    assert [token for row in task.train_lines for token in row] == stream[: len(stream) // 16 * 16]
    assert all(len(row) == 16 for row in task.train_lines)
    summary = task.summary(2)
    assert summary["train_too_long"] == 0 and summary["train_examples"] == (20 * 7 + 61) // 16
    unpacked = build_task(folder_task(tmp_path, max_tokens=20), seed=0)
    assert unpacked.summary(2)["train_too_long"] == 1 and len(unpacked.train_lines) == 20


def test_a_max_tokens_below_every_document_offers_packing_where_the_task_packs(tmp_path):
    for split in ("train", "valid", "test"):
        write_documents(tmp_path, split, ["x = 1\n" * 3] * 4)
    with pytest.raises(zoo.ConfigError, match=r"task.max_tokens 5: no training document is that short \(the "
                                              r"shortest holds 19 tokens, bos and eos counted\); raise it, or pack "
                                              r"the documents into rows \(task.pack\), which keeps them all"):
        build_task(folder_task(tmp_path, max_tokens=5), seed=0)
    assert len(build_task(folder_task(tmp_path, max_tokens=5, pack=8), seed=0).train_lines) == 4 * 19 // 8
    with pytest.raises(zoo.ConfigError, match=r"no training document is that short .*; raise it$"):
        build_task({**folder_task(tmp_path, max_tokens=5), "name": "mlm"}, seed=0)
    with pytest.raises(zoo.ConfigError, match=r"task.pack 100: the training documents hold 76 tokens, fewer than "
                                              r"one row"):
        build_task(folder_task(tmp_path, pack=100), seed=0)


@pytest.mark.parametrize("special", ["<pad>", "<bos>", "<eos>", "<unk>"])
def test_a_special_token_written_in_a_document_stays_text_under_bpe(tmp_path, special):
    """Matched as its id, `<eos>` in a sentence would end the row's labels, and `<bos>` would split
    a document mid-sentence under documents: separate."""
    texts = [f"the cat {special} sat on the mat number {i}\nand more" for i in range(20)]
    for split in ("train", "valid", "test"):
        write_documents(tmp_path, split, texts)
    task = build_task(folder_task(tmp_path, tokenizer="bpe", vocab_size=120), seed=0)
    codec = task.src_vocab
    ids = codec.encode(texts[0])
    assert ids[0] == 1 and ids[-1] == 2 and not {0, 1, 2} & set(ids[1:-1]), ids
    assert codec.decode(ids[1:]).replace(" ", "") == texts[0].replace(" ", ""), \
        "the special token's characters come back"
    restored = type(codec)(__import__("tokenizers").Tokenizer.from_str(codec.state()["tokenizer"]))
    assert restored.encode(texts[0]) == ids, "a codec read back from a checkpoint encodes as the trained one"


def test_a_documents_folder_names_what_it_leaves_out(tmp_path):
    import os
    write_documents(tmp_path, "train", ["x = 1\n", "y = 2\n"])
    train = tmp_path / "train"
    (train / "broken.txt").symlink_to(tmp_path / "nowhere.txt")
    (train / "zero.txt").symlink_to("/dev/null")
    os.mkfifo(train / "pipe.txt")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "z.txt").write_text("z = 3\n")
    (train / "linked").symlink_to(tmp_path / "elsewhere")
    with pytest.warns(UserWarning, match=r"4 entries left out of split 'train': broken.txt \(a broken link\), "
                                         r"linked \(a link to a folder.*\), pipe.txt \(a FIFO\), zero.txt \(a device\)"):
        task = build_task({**folder_task(tmp_path), "valid_split": "train", "test_split": None}, seed=0)
    assert task._split("train") == ("x = 1", "y = 2")


def test_a_separator_file_with_carriage_return_line_ends_is_refused_by_name(tmp_path):
    (tmp_path / "train.txt").write_text("a b\r<|endoftext|>\rc d\r", encoding="utf-8", newline="")
    with pytest.raises(zoo.DataError, match=r"train.txt: its lines end in a carriage return alone"):
        build_task({"name": "lm", "data_dir": str(tmp_path), "separator": "<|endoftext|>", "valid_split": "train",
                    "test_split": None, "tokenizer": "char", "min_frequency": 1}, seed=0)


def test_a_row_of_one_token_is_refused_before_training(tmp_path):
    """pack 1 trained on nothing (no token after a row's first is scored: loss 0), then failed at
    evaluation with a shape error."""
    with pytest.raises(zoo.ConfigError, match=r"task: lm: pack: Input should be greater than or equal to 2"):
        validated({"model": {"kind": "decoder"}, "task": folder_task(tmp_path, pack=1)}, ExperimentSpec)
    validated({"model": {"kind": "decoder"}, "task": folder_task(tmp_path, pack=2)}, ExperimentSpec)
