"""One size estimate counts everything a spec implies (experts, head width, factorized
embeddings, evaluation batches, held-out sets, long lines) and refuses, before anything is built
or trained, with the size: the probe's cases took minutes and all memory, or failed at the first
evaluation after training."""

import pytest
import torch
import yaml
from conftest import PARTS, tiny
from test_bad_input import cli_error

import zoo
from trainkit import tiny_experiment
from zoo.model.size_checks import exact_parameters, rough_parameters

SHAPES = {"plain": {}, "head_width": {"head_width": 48}, "embedding_dim": {"embedding_dim": 8},
          "kv_heads": {"n_kv_heads": 1}}


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("axis, name", PARTS)
def test_the_quick_estimate_is_within_a_factor_two_of_the_count(axis, name, shape):
    """The quick count decides whether a spec is refused without building it: it must see head
    width, factorized tables, key/value heads and every part's copies."""
    spec = tiny("post.sinusoidal.fused.relu", **{axis: name}, **SHAPES[shape])
    ratio = rough_parameters(spec) / exact_parameters(spec, buffers=False)
    assert 0.5 <= ratio <= 2.0, ratio


def test_experts_are_counted_from_two_and_three_and_match_the_built_model():
    def moe(experts: int, expert: str = "swiglu"):
        return tiny("pre.sinusoidal.fused.relu", ffn={"name": "moe", "experts": experts, "expert": expert})

    built = zoo.build(moe(5))
    assert exact_parameters(moe(5)) == sum(t.numel() for t in (*built.parameters(), *built.buffers()))
    two, three = exact_parameters(moe(2)), exact_parameters(moe(3))
    assert exact_parameters(moe(10**7)) == two + (10**7 - 2) * (three - two)


HUGE = {"experts": {"ffn": {"name": "moe", "experts": 10**7}}, "head_width": {"head_width": 10**9},
        "embedding_dim": {"embedding_dim": 10**9}}


@pytest.mark.parametrize("field", HUGE)
def test_the_probes_sizes_are_refused_before_anything_is_built(tmp_path, capsys, field):
    with pytest.raises(zoo.ConfigError, match=r"too large (to build anywhere|for cpu memory)"):
        zoo.build("vaswani2017", vocab_size=100, **HUGE[field])
    experiment = tiny_experiment(tmp_path)
    experiment["model"].update(HUGE[field])
    (tmp_path / "e.yaml").write_text(yaml.safe_dump(experiment))
    err = cli_error(["train", str(tmp_path / "e.yaml")], capsys)
    where = "cuda" if torch.cuda.is_available() else "cpu"  # train.device auto: the memory of the device it picks
    assert f"too large for {where} memory" in err and ("experts 10000000" in err or "1000000000" in err), err
    assert not list(tmp_path.glob("*/checkpoint.pt"))


def test_a_huge_eval_size_is_refused_by_train_and_eval_before_making_the_examples(tmp_path, capsys, trained_run):
    experiment = tiny_experiment(tmp_path, train={"eval_size": 10**12})
    (tmp_path / "e.yaml").write_text(yaml.safe_dump(experiment))
    said = "train.eval_size 1000000000000: the valid split's 1,000,000,000,000 held-out examples"
    assert said in cli_error(["train", str(tmp_path / "e.yaml")], capsys)
    assert said in cli_error(["eval", str(trained_run.checkpoint), "--set", "train.eval_size=1000000000000"], capsys)


def test_a_megabyte_validation_line_is_found_before_the_first_training_step(tmp_path, capsys):
    """Positions without a table (rope) place any length, so only the memory estimate stops it."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.txt").write_text("a b c\nd e f g\n" * 20)
    (data / "valid.txt").write_text("a b\n" + "a " * 500_000 + "\n")
    experiment = tiny_experiment(tmp_path, task={"name": "lm", "data_dir": str(data), "test_split": None,
                                                 "tokenizer": "word", "min_frequency": 1})
    experiment["model"].update(kind="decoder", position="rope", max_len=10**6)
    (tmp_path / "e.yaml").write_text(yaml.safe_dump(experiment))
    err = cli_error(["train", str(tmp_path / "e.yaml")], capsys)
    assert "evaluating the valid split: a batch of 2 rows of up to 500,00" in err and "(found before any training" in err
    assert not list(tmp_path.glob("*/checkpoint.pt")), "no step trained"


def test_a_gzip_file_that_inflates_past_the_bound_is_refused_while_it_is_read(tmp_path, capsys, monkeypatch):
    """The bound is an eighth of available memory; here it is lowered to 1 MiB so that a 4 MiB line
    file (a few KB compressed) stands for the probe's gigabyte bomb."""
    import gzip

    from zoo.tasks import corpus

    data = tmp_path / "data"
    data.mkdir()
    with gzip.open(data / "train.txt.gz", "wb") as handle:
        handle.write(b"a b c d e f g\n" * ((4 << 20) // 14))
    (data / "valid.txt").write_text("a b\n")
    monkeypatch.setattr(corpus, "readable_bytes", lambda: 1 << 20)
    assert (data / "train.txt.gz").stat().st_size < 100_000
    with pytest.raises(zoo.DataError, match=r"train\.txt\.gz: inflates to more than 1\.0 MiB, more text than this "
                                            r"machine's memory can hold"):
        corpus.read_lines(data / "train.txt.gz")
    (data / "plain.txt").write_bytes(b"a b\n" * (1 << 19))
    with pytest.raises(zoo.DataError, match=r"plain\.txt: 2\.0 MiB, more than the 1\.0 MiB of text"):
        corpus.read_lines(data / "plain.txt")
    experiment = tiny_experiment(tmp_path, task={"name": "lm", "data_dir": str(data), "test_split": None})
    experiment["model"]["kind"] = "decoder"
    (tmp_path / "e.yaml").write_text(yaml.safe_dump(experiment))
    assert "train.txt.gz: inflates to more than" in cli_error(["train", str(tmp_path / "e.yaml")], capsys)


@pytest.mark.parametrize("rule", [{"only": [1], "set": {"d_ff": 2**40}},
                                  {"only": [0], "set": {"ffn": {"name": "moe", "experts": 10**9}}}],
                         ids=["d_ff", "experts"])
def test_a_layer_a_rule_makes_huge_is_refused_by_its_size_before_anything_is_built(rule):
    """A per-layer d_ff of 2^40 or a billion experts in one layer met the allocator (or an hours-long
    count); the global equivalents were refused."""
    spec = tiny("decoder.pre.rope.fused.gelu", layers={"big": rule})
    assert rough_parameters(spec) > 10**12, "the quick count reads each layer as its rule makes it"
    with pytest.raises(zoo.ConfigError, match=r"too large for cpu memory: at least [\d,]+ parameters"):
        zoo.build(spec)


def test_a_step_of_more_rows_than_the_host_holds_is_refused_before_the_first_step(tmp_path):
    experiment = tiny_experiment(tmp_path, train={"accumulate": 10**12, "steps": 1})
    with pytest.raises(zoo.ConfigError, match=r"train.accumulate 1000000000000 x batch_size \d+: a step's [\d,]+ rows"):
        zoo.train(experiment)
