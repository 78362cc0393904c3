"""Every bad input is one clear error that names the field or the file, before anything trains,
and loses nothing; a real bug keeps its traceback."""

import os
import pickle
import resource
import signal
import subprocess
import sys

import pytest
import torch
import yaml

import zoo
from trainkit import run_dir_of, tiny_experiment
from zoo.cli import main
from zoo.commands import COMMANDS
from zoo.files import check_writable_folder
from zoo.specs import catalog
from zoo.specs.experiment import load_experiment
from zoo.specs.yamlio import dump_yaml, load_yaml


def cli_error(argv, capsys) -> str:
    """The one line `zoo` prints for a user's mistake (exit 2)."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.startswith("zoo: ") and err.count("\n") == 1, err
    return err


@pytest.mark.parametrize("fields, text", [
    ({"vocab_size": 10, "d_model": 100}, "d_model 100 is not divisible by n_heads 8"),
    ({"vocab_size": 2}, "eos_id 2 is outside src_vocab_size 2"),
])
def test_rules_between_fields_hold_for_defaults_too(fields, text):
    with pytest.raises(zoo.ConfigError, match=text):
        zoo.ModelSpec(**fields)


def test_special_ids_come_from_the_task(tmp_path):
    same = tiny_experiment(tmp_path, model={"eos_id": 2, "pad_id": 0}, train={"steps": 2})
    assert zoo.ExperimentSpec.model_validate(same).variant == "post.sinusoidal.fused.relu"
    assert zoo.train(same).metrics, "the task's own ids, written out, train as before"
    with pytest.raises(zoo.ConfigError, match=r"model\.eos_id 5 \(the task's is 2\).*task reverse fixes pad, bos"):
        zoo.train(tiny_experiment(tmp_path, model={"eos_id": 5}))


@pytest.mark.parametrize("line, text", [
    ("model: {d_model: true}", "d_model: Input should be a valid integer"),
    ("train: {steps: true}", "train.steps: Input should be a valid integer"),
    ("model: {bias: no}", "bias: Input should be a valid boolean"),
    ("train: {optimizer: {lr: '0.1'}}", "train.optimizer.lr: Input should be a valid number"),
])
def test_a_typo_is_never_coerced(tmp_path, line, text):
    path = tmp_path / "e.yaml"
    path.write_text(line + "\n")
    with pytest.raises(zoo.ConfigError, match=text):
        load_experiment(path)


def test_yaml_numbers_and_booleans_read_as_yaml_1_2(tmp_path):
    path = tmp_path / "e.yaml"
    path.write_text("train: {optimizer: {lr: 1e-3}}\nmodel: {bias: false, d_model: 064, n_heads: 4, d_ff: 0x80}\n")
    experiment = load_experiment(path)
    assert experiment.train.optimizer.lr == 0.001 and experiment.model.d_model == 64
    assert experiment.model.d_ff == 128 and experiment.model.bias is False


@pytest.mark.parametrize("train, text", [
    ({"batch_size": 10_000_000}, "activations of a batch of 10000000 rows"),
    ({}, "d_model 65536"),
])
def test_sizes_that_cannot_fit_fail_at_once_with_their_estimate(tmp_path, train, text):
    model = {"d_model": 65536, "n_heads": 8, "d_ff": 64} if not train else {}
    device = "cuda" if torch.cuda.is_available() else "cpu"  # train.device auto: the memory of the device it picks
    with pytest.raises(zoo.ConfigError, match=rf"too large for {device} memory: .*{text}.* need about [\d.]+ [KMGT]iB, "
                                              r"but only [\d.]+ [KMGT]iB is available"):
        zoo.train(tiny_experiment(tmp_path, model=model, train=train))
    assert not any(tmp_path.glob("*/checkpoint.pt"))


def test_a_model_too_large_to_build_names_its_size():
    with pytest.raises(zoo.ConfigError, match=r"max_len 10000000000\); its weights need about [\d.]+ TiB"):
        zoo.build("vaswani2017", vocab_size=100, max_len=10**10)


def test_workers_must_be_at_least_one(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["sweep", "experiments/seed_axes.yaml", "--workers", "0"])
    assert exit_info.value.code == 2
    assert "--workers: expected a whole number of at least 1, got '0'" in capsys.readouterr().err


def test_an_empty_experiment_file_is_an_error(tmp_path, capsys):
    (tmp_path / "empty.yaml").write_text("# nothing yet\n")
    err = cli_error(["train", str(tmp_path / "empty.yaml")], capsys)
    assert "empty.yaml: the experiment file is empty; write its fields (or give no file to run the defaults)" in err


@pytest.fixture
def presets_restored():
    before = dict(catalog._presets())
    yield
    catalog._PRESETS.clear()
    catalog._PRESETS.update(before)


def test_a_cyclic_preset_is_refused_at_registration_and_zoo_list_still_lists(presets_restored, capsys):
    zoo.register_preset("loop-a", {"d_model": 64}, base="loop-b")
    with pytest.raises(zoo.ConfigError, match="preset 'loop-b' would extend itself: loop-b -> loop-a -> loop-b"):
        zoo.register_preset("loop-b", {}, base="loop-a")
    with pytest.raises(zoo.ConfigError, match="preset 'self' would extend itself: self -> self"):
        zoo.register_preset("self", {}, base="self")
    main(["list"])
    out = capsys.readouterr().out
    assert "loop-a" in out and "(unusable: unknown preset 'loop-b'" in out and "vaswani2017" in out


@pytest.mark.parametrize("text, where", [
    ("model: {d_model: [1,\n", "e.yaml:2:1: invalid YAML"),
    ("model: !!python/object/apply:os.system [echo hi]\n", "e.yaml:1:8: invalid YAML: could not determine a constructor"),
    ("model:\n\t- x\n", "e.yaml:2:1: invalid YAML"),
])
def test_bad_yaml_in_a_file_is_one_line_naming_file_line_and_column(tmp_path, capsys, text, where):
    (tmp_path / "e.yaml").write_text(text)
    assert where in cli_error(["train", str(tmp_path / "e.yaml")], capsys)


@pytest.mark.parametrize("argv", [["train"], ["show", "pre-ln"], ["build-all"], ["sweep", "experiments/ffn.yaml", "--dry-run"]])
def test_every_command_reads_set_the_same_way(capsys, argv):
    err = cli_error([*argv, "--set", "model.d_model=[1,"], capsys)
    assert "--set model.d_model=[1,:1:4: invalid YAML" in err
    assert "--set expects dotted.key=value, got 'd_model'" in cli_error([*argv, "--set", "d_model"], capsys)
    assert ("--set model.position={name:rope}: YAML reads {name:rope} as one key 'name:rope' without a value; put a "
            "space after the colon: {name: rope}") in cli_error([*argv, "--set", "model.position={name:rope}"], capsys)


def test_show_and_build_all_take_several_assignments_after_one_set(capsys):
    main(["show", "pre-ln", "--set", "vocab_size=100", "model.d_model=64", "n_heads=4"])
    spec = zoo.ModelSpec.model_validate(yaml.safe_load(capsys.readouterr().out))
    assert (spec.src_vocab_size, spec.d_model, spec.n_heads) == (100, 64, 4)


def test_an_out_dir_that_is_a_file_fails_before_training(tmp_path, capsys):
    blocker = tmp_path / "runs"
    blocker.write_text("not a folder")
    err = cli_error(["train", "--set", f"train.out_dir={blocker}", "wandb.mode=disabled"], capsys)
    assert f"train.out_dir '{blocker}' is a file, not a folder" in err
    assert blocker.read_text() == "not a folder"


@pytest.mark.slow
def test_a_full_disk_leaves_no_partial_file_and_names_the_checkpoint(tmp_path):
    """A file-size limit makes the checkpoint's write fail for real (EFBIG), as a full disk would."""
    experiment = tiny_experiment(tmp_path, train={"steps": 2})
    file = tmp_path / "e.yaml"
    file.write_text(yaml.safe_dump(experiment))

    def limit_file_size():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (50_000, 50_000))

    done = subprocess.run([sys.executable, "-m", "zoo.cli", "train", str(file)], capture_output=True, text=True,
                          preexec_fn=limit_file_size, timeout=120)
    run_dir = run_dir_of(experiment)
    assert done.returncode == 2, done.stderr
    assert f"{run_dir / 'checkpoint.pt'}: could not be written" in done.stderr
    assert "the partial temporary file was removed" in done.stderr and "Traceback" not in done.stderr
    assert not run_dir.exists(), "no checkpoint, no partial temporary file, no folder holding only its lock"


@pytest.fixture
def checkpoint(tmp_path):
    return zoo.train(tiny_experiment(tmp_path / "good", train={"steps": 2})).checkpoint


def test_corrupt_and_foreign_checkpoints_are_named_errors(tmp_path, checkpoint):
    cases = {
        "garbage.pt": (b"not a checkpoint at all", "not a readable checkpoint"),
        "cut.pt": (checkpoint.read_bytes()[:5000], "not a readable checkpoint"),
    }
    for name, (content, text) in cases.items():
        (tmp_path / name).write_bytes(content)
        with pytest.raises(zoo.CheckpointError, match=rf"{name}: {text}"):
            zoo.load(tmp_path / name)
    torch.save({"weight": torch.zeros(2)}, tmp_path / "foreign.pt")
    torch.save({"x": pickle.PickleError("x")}, tmp_path / "global.pt")
    with pytest.raises(zoo.CheckpointError, match=r"global\.pt: .*refused it \(Unsupported global: GLOBAL pickle"):
        zoo.load(tmp_path / "global.pt")
    with pytest.raises(zoo.CheckpointError, match=r"foreign\.pt: not a zoo checkpoint: it lacks spec, model"):
        zoo.load(tmp_path / "foreign.pt")
    with open(tmp_path / "object.pt", "wb") as handle:
        pickle.dump(pickle.PickleError("x"), handle, protocol=2)
    with pytest.raises(zoo.CheckpointError, match=r"object\.pt: not a readable checkpoint \(.*File is not a zip file"):
        zoo.load(tmp_path / "object.pt")
    state = torch.load(checkpoint, weights_only=True)
    torch.save({**state, "format": 99}, tmp_path / "newer.pt")
    with pytest.raises(zoo.CheckpointError, match="format 99, written by a newer zoo; this zoo reads up to format 1"):
        zoo.load(tmp_path / "newer.pt")


def test_resume_from_a_corrupt_checkpoint_is_one_line(tmp_path, capsys):
    experiment = tiny_experiment(tmp_path, train={"steps": 2})
    zoo.train(experiment)
    (run_dir_of(experiment) / "checkpoint.pt").write_bytes(b"\0" * 100)
    file = tmp_path / "e.yaml"
    file.write_text(yaml.safe_dump(experiment))
    assert "checkpoint.pt: not a readable checkpoint" in cli_error(["train", str(file), "--resume"], capsys)


def test_a_checkpoint_of_format_0_still_loads_and_resumes(tmp_path):
    experiment = tiny_experiment(tmp_path, train={"steps": 20})
    result = zoo.train(experiment)
    state = torch.load(result.checkpoint, weights_only=True)
    progress = state.pop("progress")
    state.pop("format")
    for key in ("first_loss", "high_logs"):
        progress.pop(key)
    torch.save({**state, **progress}, result.checkpoint)  # the layout the zoo wrote before formats
    model, spec = zoo.load(result.checkpoint)
    assert spec.name == "post.sinusoidal.fused.relu" and not model.training
    longer = zoo.train(tiny_experiment(tmp_path, train={"steps": 30}), resume=True)
    assert torch.load(longer.checkpoint, weights_only=True)["progress"]["step"] == 30


def test_a_real_bug_keeps_its_traceback(monkeypatch):
    def broken(args):
        raise RuntimeError("a bug in the zoo")

    monkeypatch.setattr(COMMANDS.get("list"), "run", broken)
    with pytest.raises(RuntimeError, match="a bug in the zoo"):
        main(["list"])


def test_modules_and_functions_of_the_same_name_both_stay_reachable():
    import zoo.specs.model_spec
    import zoo.specs.registries
    import zoo.trainer

    assert callable(zoo.spec) and callable(zoo.train) and callable(zoo.registry)
    assert zoo.specs.model_spec.ModelSpec is zoo.ModelSpec and zoo.specs.registries.Registry is zoo.Registry
    assert zoo.trainer.train is zoo.train
    assert os.path.basename(zoo.trainer.__file__) == "__init__.py"


def test_what_the_zoo_writes_reads_back_the_same_in_yaml_1_2_and_1_1():
    data = {"tags": ["1e-3", "010", "no", "on", "true", "2024-01-01", "0x1f", "plain"], "lr": 1e-9, "big": float("inf")}
    text = dump_yaml(data)
    assert load_yaml(text, "written") == data and yaml.safe_load(text) == data


def test_too_little_free_space_fails_before_training_with_both_sizes(tmp_path):
    with pytest.raises(zoo.ConfigError, match=r"train\.out_dir '.*' has [\d.]+ [KMGT]iB free, but the run's checkpoint "
                                              r"needs about 909494\.7 TiB"):
        check_writable_folder(tmp_path, "train.out_dir", need_bytes=10**18)


def test_a_path_that_is_not_there_gets_the_name_it_was_close_to(tmp_path, capsys, monkeypatch):
    """A typo in an experiment file, a sweep folder, a data folder or a split name: the error says
    what is there, where it used to say only that nothing was."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ffn.yaml").write_text("task: {name: reverse}\n")
    assert "ffn.yml: cannot read experiment file: No such file or directory; did you mean 'ffn.yaml'?" in \
        cli_error(["train", "ffn.yml"], capsys)
    (tmp_path / "sweeps" / "norms").mkdir(parents=True)
    assert "sweeps/nomrs: no such folder; did you mean 'sweeps/norms'?" in cli_error(["compare", "sweeps/nomrs"], capsys)
    assert "sweeps/zzz: no such folder; sweeps/ holds norms" in cli_error(["compare", "sweeps/zzz"], capsys)
    assert "runs/x: no such folder; the working directory has no runs/" in cli_error(["compare", "runs/x"], capsys)
    corpus = tmp_path / "multi30k"
    corpus.mkdir()
    for split in ("train", "valid", "test"):
        for side in ("de", "en"):
            (corpus / f"{split}.{side}").write_text("ein Haus\n" if side == "de" else "a house\n")
    assert "task.data_dir 'multi31k': no such folder; did you mean 'multi30k'?" in cli_error(
        ["train", "--print-config", "--set", "task={name: parallel, data_dir: multi31k}"], capsys)
    err = cli_error(["train", "--set", "task={name: parallel, data_dir: multi30k, valid_split: dev}", "train.steps=1",
                     "wandb.mode=disabled"], capsys)
    assert "no dev.de[.gz] and dev.en[.gz]" in err and "(the folder holds the splits test, train, valid)" in err
    err = cli_error(["train", "--set", "task={name: parallel, data_dir: multi30k, valid_split: vaild}", "train.steps=1",
                     "wandb.mode=disabled"], capsys)
    assert "(the folder holds the splits test, train, valid; did you mean 'valid'?)" in err


def test_print_config_refuses_what_training_would_refuse_before_the_data(capsys):
    assert "model.kind decoder: task mlm trains model.kind encoder" in cli_error(
        ["train", "--print-config", "--set", "model.kind=decoder", "task={name: mlm, data_dir: .}"], capsys)


def test_a_seed_past_torchs_32_bit_mix_trains_and_one_past_64_bits_is_refused(tmp_path, capsys):
    """Seeds above about 2.3e9 overflowed the batch generator's 64-bit seed ("Overflow when unpacking
    long long"); the mix now wraps as torch wraps a negative seed, so every smaller seed draws what it drew."""
    from zoo.tasks.base import step_generator

    assert torch.equal(torch.randint(0, 1000, (8,), generator=step_generator(7, 3)),
                       torch.randint(0, 1000, (8,), generator=torch.Generator().manual_seed((7 * 1_000_003 + 3) * 7919)))
    result = zoo.train(tiny_experiment(tmp_path, train={"steps": 2, "seed": 3_000_000_000, "eval_every": 2}))
    assert result.metrics["eval/loss"] > 0
    sweep = tmp_path / "s.yaml"
    sweep.write_text(yaml.safe_dump({"name": "s", "grid": {"model.norm": ["pre"]}, "seeds": [0, 2**63]}))
    assert "seeds.1" in cli_error(["sweep", str(sweep), "--dry-run"], capsys)
    sweep.write_text(yaml.safe_dump({"name": "s", "tune": {"train.optimizer.lr": [1e-3, 2e-3]},
                                     "metric": "test/loss", "confirm_seeds": [-4]}))
    assert "confirm_seeds.0" in cli_error(["sweep", str(sweep), "--dry-run"], capsys)
    assert "train.seed" in cli_error(["train", "--set", "train.seed=-1", "--print-config"], capsys)
