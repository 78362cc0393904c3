"""Inputs that would hang or take the machine's memory fail at once with their estimated size,
before anything is allocated: nested YAML aliases and nesting, depths of a million layers, widths
whose storage size overflows, and more beams than memory holds."""

import numpy as np
import pytest
import torch
import yaml
from conftest import PART_IDS, PARTS, padded_batch, tiny
from test_bad_input import cli_error

import zoo
from trainkit import tiny_experiment
from zoo.cli import main
from zoo.model.size_checks import exact_parameters
from zoo.specs.yamlio import load_yaml
from zoo.sweep import load_sweep


def laughs(levels: int = 9) -> str:
    """The "billion laughs": each alias list holds ten of the one before (10^levels values)."""
    lines = ["l0: &l0 [ha, ha, ha, ha, ha, ha, ha, ha, ha, ha]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def test_nested_aliases_in_a_sweep_grid_are_refused_before_they_expand(tmp_path, capsys):
    file = tmp_path / "sweep.yaml"
    file.write_text(laughs() + "name: s\nbase: {task: {name: reverse}}\ngrid: {task.alphabet: *l8}\n")
    with pytest.raises(zoo.ConfigError, match=r"sweep\.yaml: its aliases \(\*name\) expand to \d[\d,]{12} values, "
                                              r"more than the 1,000,000"):
        load_sweep(file)
    assert "expand to" in cli_error(["sweep", str(file), "--dry-run"], capsys)


def test_a_few_shared_aliases_are_fine():
    data = load_yaml("base: &b {lr: 0.001}\na: *b\nb: *b\n", "x")
    assert data == {"base": {"lr": 0.001}, "a": {"lr": 0.001}, "b": {"lr": 0.001}}


@pytest.mark.parametrize("text, problem", [
    ("[" * 5000 + "]" * 5000, "nested too deeply to read"),
    ("a: " + "[" * 150 + "]" * 150, "nested more than 100 levels deep"),
    ("a: &x [*x]", "an alias that holds itself"),
])
def test_deep_nesting_is_one_line_not_a_recursion_error(tmp_path, capsys, text, problem):
    (tmp_path / "deep.yaml").write_text(text + "\n")
    assert problem in cli_error(["train", str(tmp_path / "deep.yaml")], capsys)




@pytest.mark.parametrize("axis, name", PARTS, ids=PART_IDS)
def test_the_parameter_count_of_any_depth_is_the_built_models(axis, name):
    """Counted from stacks of one and two layers, for every part of every axis."""
    spec = tiny("post.sinusoidal.fused.relu", n_encoder_layers=3, n_decoder_layers=4, **{axis: name})
    model = zoo.build(spec)
    built = sum(t.numel() for t in (*model.parameters(), *model.buffers()))
    assert exact_parameters(spec) == built
    assert exact_parameters(spec, buffers=False) == model.num_parameters()


def test_a_million_layers_are_counted_and_refused_with_their_size(capsys):
    spec = zoo.spec("vaswani2017", vocab_size=100, n_encoder_layers=10**6, n_decoder_layers=10**6)
    one = zoo.spec("vaswani2017", vocab_size=100, n_encoder_layers=1, n_decoder_layers=1)
    two = zoo.spec("vaswani2017", vocab_size=100, n_encoder_layers=2, n_decoder_layers=2)
    per_pair = exact_parameters(two) - exact_parameters(one)
    assert exact_parameters(spec) == exact_parameters(one) + (10**6 - 1) * per_pair
    with pytest.raises(zoo.ConfigError, match=r"too large for cpu memory: [\d,]+ parameters \(d_model 512, d_ff 2048, "
                                              r"1000000\+1000000 layers"):
        zoo.build(spec)
    capsys.readouterr()
    main(["show", "vaswani2017", "--set", "vocab_size=100", "n_encoder_layers=1000000"])
    assert f"# parameters: {exact_parameters(spec.model_copy(update={'n_decoder_layers': 6}), buffers=False):,d}" \
        in capsys.readouterr().out


@pytest.mark.parametrize("field", ["d_model", "d_ff", "vocab_size"])
def test_a_width_whose_storage_overflows_is_refused_with_its_size(capsys, field):
    huge = {field: 2**62} if field != "d_model" else {"d_model": 2**40, "n_heads": 1}
    with pytest.raises(zoo.ConfigError, match=r"too large to build anywhere: about [\d.e+]+ parameters"):
        zoo.build("vaswani2017", **{"vocab_size": 100, **huge})
    sets = [f"{k}={v}" for k, v in {"vocab_size": 100, **huge}.items()]
    assert "too large to build anywhere" in cli_error(["show", "vaswani2017", "--set", *sets], capsys)


@pytest.fixture
def model():
    return zoo.build(tiny("pre.sinusoidal.fused.relu"), seed=0).eval()


def test_more_beams_than_memory_holds_are_refused_before_decoding(model):
    src = padded_batch([5, 4], 19)
    with pytest.raises(zoo.ConfigError, match=r"decoding 2 source\(s\) with 1000000000 beam\(s\) of up to 8 tokens needs "
                                              r"about [\d.]+ TiB for its cache and scores, but only"):
        model.generate(src, max_new_tokens=7, num_beams=10**9)


def test_zoo_eval_with_a_huge_beam_is_one_line(capsys, trained_run):
    err = cli_error(["eval", str(trained_run.checkpoint), "--beams", "100000000"], capsys)
    assert "beam(s)" in err and "needs about" in err


@pytest.mark.parametrize("beams", [1, 3])
def test_decoding_an_empty_batch_gives_an_empty_result(model, beams):
    out = model.generate(torch.zeros((0, 5), dtype=torch.long), max_new_tokens=4, num_beams=beams)
    assert out.shape == (0, 1) and out.dtype == torch.long


@pytest.mark.parametrize("value", [2.5, 3.0, True, "3"])
def test_max_new_tokens_must_be_a_whole_number(model, value):
    with pytest.raises(zoo.ConfigError, match="max_new_tokens must be a whole number"):
        model.generate(padded_batch([5], 19), max_new_tokens=value)


def test_whole_numbers_of_other_types_are_taken(model):
    src = padded_batch([5], 19)
    assert torch.equal(model.generate(src, max_new_tokens=np.int64(3)), model.generate(src, max_new_tokens=3))


@pytest.mark.parametrize("penalty", [float("nan"), float("inf"), -float("inf")])
def test_a_length_penalty_must_be_finite(model, penalty, capsys, tmp_path):
    with pytest.raises(zoo.ConfigError, match="length_penalty must be a finite number"):
        model.generate(padded_batch([5], 19), max_new_tokens=3, num_beams=2, length_penalty=penalty)
    with pytest.raises(SystemExit) as exit_info:
        main(["eval", str(tmp_path / "any.pt"), "--beams", "2", f"--length-penalty={penalty}"])
    assert exit_info.value.code == 2 and "--length-penalty: expected a finite number" in capsys.readouterr().err
    assert not (tmp_path / "any.pt").exists()


def test_an_experiment_file_of_aliases_is_refused_too(tmp_path, capsys):
    (tmp_path / "e.yaml").write_text(laughs() + "task: {name: reverse}\n")
    assert "expand to" in cli_error(["train", str(tmp_path / "e.yaml")], capsys)


def test_a_grid_is_counted_before_it_expands_and_max_cells_raises_the_limit(tmp_path, capsys):
    """The probe's 12-key grid of millions ran --dry-run for minutes; it is refused with its count."""
    grid = {f"model.{key}": values for key, values in {
        "norm": ["post", "pre"], "position": ["sinusoidal", "learned"], "ffn": ["relu", "gelu", "swiglu"],
        "attention": ["fused", "per_head", "sdpa"], "dropout": [0.0, 0.1, 0.2], "d_model": [16, 32, 64],
        "n_heads": [1, 2], "d_ff": [32, 64, 128], "bias": [True, False], "max_len": [64, 128, 256]}.items()}
    grid |= {"train.warmup_steps": list(range(10)), "train.optimizer.lr": [1e-3 * i for i in range(1, 11)]}
    file = tmp_path / "big.yaml"
    file.write_text(yaml.safe_dump({"name": "big", "base": tiny_experiment(tmp_path), "grid": grid, "seeds": [0, 1]},
                                   sort_keys=False))
    err = cli_error(["sweep", str(file), "--dry-run"], capsys)
    assert ("the grid has 2,332,800 cells (2 x 2 x 3 x 3 x 3 x 3 x 2 x 3 x 2 x 3 x 10 x 10 values x 2 seed(s)), "
            "more than max_cells 10,000; raise the limit knowingly with --max-cells 2332800") in err
    small = tmp_path / "small.yaml"
    small.write_text(yaml.safe_dump({"name": "small", "base": tiny_experiment(tmp_path),
                                     "grid": {"model.norm": ["post", "pre"]}, "seeds": [0, 1], "out_dir": str(tmp_path)}))
    assert "the grid has 4 cells" in cli_error(["sweep", str(small), "--dry-run", "--set", "max_cells=3"], capsys)
    main(["sweep", str(small), "--dry-run", "--max-cells", "4"])
    assert "4 cells of 4 in shard 0/1" in capsys.readouterr().out
