"""The `zoo` command line."""

import re
import shutil
import subprocess
import sys

import pytest
import yaml
from conftest import combos
from test_bad_input import cli_error

import zoo
from trainkit import tiny_experiment
from zoo.cli import main
from zoo.commands.catalog import SHOWN_KINDS
from zoo.trainer.run_folder import RunFolder


def test_list_shows_presets_and_axes(capsys):
    main(["list"])
    out = capsys.readouterr().out
    for name in zoo.list_variants():
        assert name in out
    for axis in zoo.AXES:
        (line,) = [line for line in out.splitlines() if line.startswith(f"  {axis} ")]
        assert all(f" {name}" in line for name in zoo.registry(axis).names())
    assert "sinusoidal(base=10000.0, layout=interleaved, spacing=vaswani, offset=0)" in out, "parts show their settings"
    assert "rmsnorm(eps=1e-06, unit_offset=false)" in out
    main(["list", "*post*"])
    assert capsys.readouterr().out.splitlines()[0].startswith("res-post")


def test_show_prints_a_spec_that_round_trips(capsys):
    main(["show", "pre-ln", "--set", "vocab_size=100", "--set", "position=learned"])
    out = capsys.readouterr().out
    assert "# preset vaswani2017 -> pre-ln" in out
    assert zoo.ModelSpec.model_validate(yaml.safe_load(out)) == zoo.spec("pre-ln", vocab_size=100, position="learned")


def test_build_all_takes_sizes_and_a_glob_of_combinations(capsys):
    """(test_first_hour.py builds every combination at the default size.)"""
    sizes = ["d_model=16", "n_heads=2", "d_ff=32", "n_encoder_layers=1", "n_decoder_layers=1", "vocab_size=20"]
    main(["build-all", "--only", "post.sinusoidal.*", *[arg for pair in sizes for arg in ("--set", pair)]])
    lines = capsys.readouterr().out.splitlines()
    chosen = [name for name in combos() if name.startswith("post.sinusoidal.")]
    assert lines[0].startswith(f"{len(chosen)} combinations") and 0 < len(chosen) < len(combos())
    built = {line.split()[0]: int(line.split()[1].replace(",", "")) for line in lines[1:-1]}
    assert set(built) == set(chosen)
    expected = zoo.build("post.sinusoidal.fused.relu", d_model=16, n_heads=2, d_ff=32,
                         n_encoder_layers=1, n_decoder_layers=1, vocab_size=20).num_parameters()
    assert built["post.sinusoidal.fused.relu"] == expected
    assert lines[-1].startswith(f"built and ran {len(chosen)} models")
    assert "--only 'nothing.*' matches no combination of norm.position" in cli_error(["build-all", "--only", "nothing.*"],
                                                                                    capsys)
    main(["build-all", "--only", "pre.rope.fused.relu"])  # a canonical name, as the README writes them
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("1 combinations") and lines[1].split()[0] == "pre.rope.fused.relu"


@pytest.mark.parametrize(
    "argv, text",
    [
        (["show", "pre-ln", "--set", "d_modle=3", "--set", "vocab_size=5"], "d_modle"),
        (["show", "pre-ln", "--set", "vocab_size"], "--set expects dotted.key=value"),
        (["show", "pre.learned.fused.gleu", "--set", "vocab_size=5"], "did you mean 'gelu'"),
    ],
)
def test_bad_arguments_exit_with_a_message(argv, text, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    captured = capsys.readouterr()
    assert text in captured.err + str(exit_info.value.code)


@pytest.mark.slow
def test_console_script_is_installed():
    script = shutil.which("zoo")
    assert script is not None
    done = subprocess.run([script, "list"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "vaswani2017" in done.stdout


def test_list_names_every_task_with_the_metrics_a_run_reports(capsys):
    main(["list"])
    out = capsys.readouterr().out
    assert "tasks (task.name) and the final metrics a run reports" in out
    for name in zoo.registry("task").names():
        task = zoo.registry("task").get(name)
        (line,) = [line for line in out.splitlines() if line.startswith(f"  {name} ")]
        assert line.split(None, 1)[1] == ", ".join(task.final_metrics(task.Params.model_construct()))


def test_help_names_every_command_with_an_example_and_loads_no_torch():
    done = subprocess.run([sys.executable, "-c", "import sys\nfrom zoo.cli import main\ntry:\n    main(['--help'])\n"
                           "except SystemExit:\n    pass\nprint('torch loaded' if 'torch' in sys.modules else 'no torch')"],
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.strip().endswith("no torch"), "help waits for nothing heavy"
    examples = done.stdout.split("examples:")[1]
    for command in ("list", "show", "train", "eval", "sweep", "compare", "reproduce", "build-all"):
        assert f"  zoo {command} " in examples, command


def test_version_names_the_zoo_its_commit_and_torch(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert re.fullmatch(r"zoo \S+ \(commit \S+; torch \S+\)\n", capsys.readouterr().out), "on stdout, as --version is"


def test_print_config_shows_the_resolved_experiment_and_its_folder_and_trains_nothing(tmp_path, capsys):
    experiment = tiny_experiment(tmp_path)
    (tmp_path / "e.yaml").write_text(yaml.safe_dump(experiment))
    main(["train", str(tmp_path / "e.yaml"), "--set", "model.norm=pre", "--print-config"])
    out = capsys.readouterr().out
    resolved = zoo.load_experiment(tmp_path / "e.yaml", ["model.norm=pre"])
    assert out.splitlines()[0] == f"# run folder: {RunFolder(resolved).path}  (the model: {resolved.variant})"
    assert zoo.ExperimentSpec.model_validate(yaml.safe_load(out)) == resolved, "every default is there, and round-trips"
    assert yaml.safe_load(out)["train"]["warmup_steps"] == 5 and "explosion" in yaml.safe_load(out)["train"]
    assert not RunFolder(resolved).path.exists(), "nothing ran"


@pytest.mark.parametrize("kind", [kind for kind in SHOWN_KINDS if kind != "format"])  # a format has files, no settings
def test_show_lists_the_choices_of_every_literal_setting(kind):
    """`zoo show task lm` printed `tokenizer: 'bpe'` with no word of 'char' or 'word': every setting
    that takes one of a few values, of every registered choice of every kind, lists them."""
    from zoo.commands.catalog import choice_text, literal_choices
    from zoo.specs.choices import settings_model
    from zoo.specs.registries import TASKS, registry

    listed = 0
    for name in registry(kind).names():
        found = registry(kind).get(name)
        model = found.Params if kind == TASKS else settings_model(found)
        lines = choice_text(kind, name).splitlines()
        for key, field in model.model_fields.items():
            choices = literal_choices(field.annotation)
            if choices:
                (line,) = [line for line in lines if line.startswith(f"{key}: ")]
                assert line.endswith(f"choices: {', '.join(map(repr, choices))}"), line
                listed += 1
    assert kind != TASKS or listed, "the tasks have Literal settings (lm's tokenizer among them)"


@pytest.mark.parametrize("name", zoo.registry("optimizer").names())
def test_the_training_page_gives_every_optimizers_defaults(name):
    """A new user met adamw's weight decay of 0.0 where torch's is 0.01: docs/training.md gives the
    shared defaults and each optimizer's own, as `zoo list` prints them."""
    from pathlib import Path

    from zoo.specs.choices import part_text
    from zoo.specs.optimizer_spec import OptimizerSpec

    page = " ".join((Path(__file__).resolve().parents[1] / "docs" / "training.md").read_text().split())
    assert f"`{part_text('optimizer', name)}`" in page
    spec = OptimizerSpec(name=name)
    assert f"`lr` (default {spec.lr:g})" in page and f"`weight_decay` (default {spec.weight_decay:g} for every one" in page


def test_a_dry_run_prints_each_cell_with_the_run_folder_it_would_train_in(capsys, tmp_path):
    """The docs promised the run folders; the dry run printed cell keys alone."""
    main(["sweep", "experiments/seed_axes.yaml", "--dry-run", "--set", f"out_dir={tmp_path}"])
    lines = capsys.readouterr().out.splitlines()
    first = "norm=post,position=sinusoidal,attention=per_head,ffn=relu,seed=0"
    assert lines[0] == f"{first}  ->  {tmp_path / 'seed-axes' / 'runs' / first}"
    assert lines[-1] == f"32 cells of 32 in shard 0/1; folder {tmp_path / 'seed-axes'}"
    assert not (tmp_path / "seed-axes").exists(), "a dry run writes nothing"
