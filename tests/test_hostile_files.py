"""Files the zoo reads, held to what they claim: a run's source is trusted by its content, a
transformers folder must hold the whole model it names, every file is a regular file read with a
bound, and metadata of the wrong shape is one ZooError naming the file and the field."""

import json
import os
import pickle

import pytest
import sweepkit
from pretrainedkit import save_pretrained_folder
from safetensors.torch import load_file, save_file
from test_bad_input import cli_error

import zoo
from trainkit import tiny_experiment
from zoo.specs.experiment import validate_experiment
from zoo.specs.identity import run_name

STILL = {"steps": 1, "warmup_steps": 0, "eval_every": 1, "checkpoint_every": 1}


@pytest.fixture(scope="module")
def source(tmp_path_factory, trained_run):
    """A trained run's checkpoint and a zoo model folder of the same model."""
    folder = tmp_path_factory.mktemp("source")
    return trained_run.checkpoint, zoo.load(trained_run.checkpoint)[0].save_pretrained(folder / "model")


@pytest.fixture(scope="module")
def t5_folder(tmp_path_factory):
    return save_pretrained_folder(tmp_path_factory.mktemp("t5") / "t5", "t5")[0]


def copy_of(folder, tmp_path):
    target = tmp_path / folder.name
    target.mkdir()
    for file in folder.iterdir():
        (target / file.name).write_bytes(file.read_bytes())
    return target


def test_a_source_holding_a_nan_is_refused_before_training_and_once_fixed_trains(tmp_path, source):
    folder = copy_of(source[1], tmp_path)
    tensors = load_file(folder / "model.safetensors")
    name = next(iter(tensors))
    good = tensors[name].clone()
    tensors[name][0] = float("nan")
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    experiment = tiny_experiment(tmp_path / "runs", train={**STILL, "init_from": str(folder)})
    with pytest.raises(zoo.ConfigError, match=rf"its weight {name} holds a NaN or an infinity; a run cannot start"):
        zoo.train(experiment)
    assert not any((tmp_path / "runs").glob("*/result.json")), "no diverged record of a run that never started"
    tensors[name] = good
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    assert zoo.train(experiment).metrics["eval/loss"] > 0, "the fixed source trains, nothing refuses it"


def test_a_source_overwritten_with_other_weights_is_another_run(tmp_path, source):
    folder = copy_of(source[1], tmp_path)
    experiment = tiny_experiment(tmp_path / "runs", train={**STILL, "init_from": str(folder)})
    before = run_name(validate_experiment(experiment))
    first = zoo.train(experiment)
    tensors = load_file(folder / "model.safetensors")
    tensors = {name: tensor * 1.01 for name, tensor in tensors.items()}
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    after = run_name(validate_experiment(experiment))
    assert before != after and first.run_dir.name == before
    assert zoo.train(experiment).run_dir.name == after, "trained anew, not 'its result stands'"


@pytest.mark.slow
def test_a_transformers_folder_missing_a_tensor_is_refused(tmp_path, t5_folder):
    folder = copy_of(t5_folder, tmp_path)
    tensors = load_file(folder / "model.safetensors")
    dropped = next(name for name in tensors if "DenseReluDense.wi" in name)
    del tensors[dropped]
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(zoo.ConfigError, match=rf"its weights are not a whole T5ForConditionalGeneration \({dropped} is "
                                              "missing"):
        zoo.from_pretrained(folder)


def test_a_transformers_folder_naming_another_class_or_other_sizes_is_refused(tmp_path, t5_folder):
    folder = copy_of(t5_folder, tmp_path)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "architectures": ["BartForConditionalGeneration"]}))
    with pytest.raises(zoo.ConfigError, match=r"(not a whole BartForConditionalGeneration|cannot read it as Bart)"):
        zoo.from_pretrained(folder)
    (folder / "config.json").write_text(json.dumps({**config, "d_ff": 96}))
    with pytest.raises(zoo.ConfigError, match=r"not a whole T5ForConditionalGeneration \(\S+ has shape \(\d+, \d+\), "
                                              r"the config gives \(\d+, \d+\)"):  # not transformers' "the above report"
        zoo.from_pretrained(folder)


class Payload:
    """What a pickle would run when loaded: it would leave a file behind."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_pickled_transformers_folder_is_refused_without_being_opened(tmp_path, t5_folder):
    folder = copy_of(t5_folder, tmp_path)
    (folder / "model.safetensors").unlink()
    marker = tmp_path / "it ran"
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps(Payload(marker)))
    with pytest.raises(zoo.ConfigError, match=r"holds its weights as a pickle \(pytorch_model\.bin\); the zoo reads "
                                              "safetensors only"):
        zoo.from_pretrained(folder)
    assert not marker.exists()


@pytest.mark.parametrize("entry", [[5], "T5ForConditionalGeneration", ["pipeline"], {"a": 1}])
def test_a_bad_architectures_entry_is_one_error(tmp_path, t5_folder, entry):
    folder = copy_of(t5_folder, tmp_path)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "architectures": entry}))
    with pytest.raises(zoo.ConfigError, match=r"config\.json: (architectures is .*, not a list|neither a zoo model)"):
        zoo.from_pretrained(folder)


def devices_and_fifos(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    return {"/dev/zero": ("a device", "/dev/zero"), "fifo": ("a FIFO", str(fifo))}


def test_zoo_eval_and_init_from_read_regular_files_only(tmp_path, capsys, source):
    for kind, path in devices_and_fifos(tmp_path).values():
        assert f"{path}: {kind}, not a regular file, so not read as a checkpoint" in cli_error(["eval", path], capsys)
        experiment = tiny_experiment(tmp_path / "runs", train={**STILL, "init_from": path})
        with pytest.raises(zoo.ConfigError, match=f"{path}: {kind}, not a regular file, so not read as train.init_from"):
            zoo.train(experiment)
        (tmp_path / "experiment.yaml").unlink(missing_ok=True)
        (tmp_path / "experiment.yaml").symlink_to(path)
        assert f"{kind}, not a regular file, so not read as experiment file" in cli_error(
            ["train", str(tmp_path / "experiment.yaml")], capsys)
    folder = copy_of(source[1], tmp_path)
    (folder / "model.safetensors").unlink()
    (folder / "model.safetensors").symlink_to("/dev/zero")
    with pytest.raises(zoo.CheckpointError, match=r"model\.safetensors: a device, not a regular file"):
        zoo.from_pretrained(folder)


def test_a_ledger_that_is_not_a_regular_file_is_one_line_in_compare_and_reproduce(tmp_path, capsys):
    sweep = sweepkit.write_sweep(tmp_path, "fifo", {"model.norm": ["post", "pre"]}, [0, 1], lambda a, seed: 0.5)
    ledger = sweep.directory() / "ledger.jsonl"
    ledger.unlink()
    os.mkfifo(ledger)
    for argv in (["compare", str(sweep.directory())], ["reproduce", str(ledger)]):
        assert f"{ledger}: a FIFO, not a regular file, so not read as a sweep's ledger" in cli_error(argv, capsys)


@pytest.mark.parametrize("aliases", [[1, 2], {"a": 5}, "not json", 7])
def test_zoo_aliases_of_the_wrong_type_are_one_error(tmp_path, source, aliases):
    folder = copy_of(source[1], tmp_path)
    tensors = load_file(folder / "model.safetensors")
    text = aliases if isinstance(aliases, str) else json.dumps(aliases)
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt", "zoo_aliases": text})
    with pytest.raises(zoo.CheckpointError, match=r"model\.safetensors: (its metadata zoo_aliases is .*, not a mapping|"
                                                  r"not a readable safetensors file)"):
        zoo.from_pretrained(folder)


@pytest.mark.parametrize("damage, said", [
    ("config_folder", r"config\.json: is a folder, not the model's configuration"),
    ("weights_folder", r"model\.safetensors: is a folder, not the model's weights"),
    ("deep", r"config\.json: config\.json nests too deeply to read"),
    ("format_text", r"zoo_format is \"1\", not a format number"),
    ("format_float", r"zoo_format is 1\.5, not a format number"),
])
def test_hostile_folder_metadata_is_one_error_naming_the_file(tmp_path, source, damage, said):
    folder = copy_of(source[1], tmp_path)
    config = json.loads((folder / "config.json").read_text())
    if damage.endswith("_folder"):
        file = folder / ("config.json" if damage == "config_folder" else "model.safetensors")
        file.unlink()
        file.mkdir()
    elif damage == "deep":
        (folder / "config.json").write_text("[" * 100_000 + "]" * 100_000)
    else:
        (folder / "config.json").write_text(json.dumps({**config, "zoo_format": "1" if damage == "format_text" else 1.5}))
    with pytest.raises(zoo.ZooError, match=said):
        zoo.from_pretrained(folder)


@pytest.mark.parametrize("file, settings, said", [
    ("tokenizer_config.json", {"pad_token": ["<pad>"]}, r"pad_token in .* is \[\"<pad>\"\], not a token"),
    ("tokenizer_config.json", {"pad_token": {"content": 5}}, r"pad_token in .* is \{\"content\": 5\}, not a token"),
    ("config.json", {"decoder_start_token_id": [0]}, r"decoder_start_token_id is \[0\], not a token id of the tokenizer"),
    ("config.json", {"decoder_start_token_id": 0.7}, r"decoder_start_token_id is 0\.7, not a token id"),
    ("config.json", {"decoder_start_token_id": 99999}, r"decoder_start_token_id is 99999, not a token id .* from 0 to 299"),
])
def test_tokenizer_metadata_of_the_wrong_shape_is_one_error(tmp_path, t5_folder, file, settings, said):
    from zoo.tasks.pretrained_tokenizer import tokenizer_special_ids

    folder = copy_of(t5_folder, tmp_path)
    data = json.loads((folder / file).read_text())
    (folder / file).write_text(json.dumps({**data, **settings}))
    with pytest.raises(zoo.ConfigError, match=said):
        tokenizer_special_ids(str(folder))
