"""A resume continues only what it should: a damaged checkpoint or changed data is refused by name,
a finished result is never replaced by a failed resume, a preempted cell keeps its last step, and
two shard layouts on one folder skip each other's cells instead of failing them."""

import json
import os
import signal
import subprocess
import sys
import time
import zipfile

import pytest
import torch
import yaml
from test_sweep import tiny_sweep

import zoo
from trainkit import run_dir_of, tiny_experiment
from zoo.cli import main
from zoo.sweep import Ledger, run_sweep
from zoo.tasks import corpus
from zoo.trainer.loop import Trainer


def flip_a_weight_byte(checkpoint) -> None:
    """Flip one byte inside the largest tensor record, as a bad disk or copy would."""
    with zipfile.ZipFile(checkpoint) as archive:
        info = max(archive.infolist(), key=lambda i: i.file_size)
    data = bytearray(checkpoint.read_bytes())
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    data[start + info.file_size // 2] ^= 0x40
    checkpoint.write_bytes(bytes(data))


def test_a_damaged_checkpoint_is_refused_by_name_everywhere(tmp_path, capsys):
    experiment = tiny_experiment(tmp_path, train={"steps": 20})
    result = zoo.train(experiment)
    finished = (result.run_dir / "result.json").read_bytes()
    flip_a_weight_byte(result.checkpoint)
    with pytest.raises(zoo.CheckpointError, match=r"checkpoint\.pt: damaged: the bytes of its record '.*' do not match"):
        zoo.load(result.checkpoint)
    with pytest.raises(SystemExit) as exit_info:
        main(["eval", str(result.checkpoint)])
    assert exit_info.value.code == 2 and "checkpoint.pt: damaged" in capsys.readouterr().err
    with pytest.raises(zoo.CheckpointError, match="damaged"):
        zoo.train(tiny_experiment(tmp_path, train={"steps": 40}), resume=True)
    assert (result.run_dir / "result.json").read_bytes() == finished, "the finished result is untouched"


def test_a_failed_resume_never_replaces_a_finished_result(tmp_path, monkeypatch):
    result = zoo.train(tiny_experiment(tmp_path, train={"steps": 20}))
    finished = (result.run_dir / "result.json").read_bytes()

    def broken_step(self, step):
        raise zoo.Diverged(f"step {step}: the loss is nan", step)

    monkeypatch.setattr(Trainer, "_train_step", broken_step)
    with pytest.raises(zoo.Diverged, match=r"the finished result of the earlier run stays in .*result\.json"):
        zoo.train(tiny_experiment(tmp_path, train={"steps": 40}), resume=True)
    assert (result.run_dir / "result.json").read_bytes() == finished


def small_corpus(folder, sentences=60) -> None:
    """A parallel corpus made on the spot: numbers spelled out in German and English."""
    german, english = ["null", "eins", "zwei", "drei", "vier"], ["zero", "one", "two", "three", "four"]
    folder.mkdir(parents=True, exist_ok=True)
    for split, count in (("train", sentences), ("valid", 8)):
        rows = [(i % 5, (i // 5) % 5) for i in range(count)]
        (folder / f"{split}.de").write_text("".join(f"{german[a]} {german[b]}\n" for a, b in rows))
        (folder / f"{split}.en").write_text("".join(f"{english[a]} {english[b]}\n" for a, b in rows))


def corpus_experiment(tmp_path, steps: int) -> dict:
    task = {"name": "parallel", "data_dir": str(tmp_path / "corpus"), "test_split": None, "tokenizer": "word",
            "min_frequency": 1, "vocab_size": 50}
    return tiny_experiment(tmp_path, task=task, train={"steps": steps, "eval_every": steps, "checkpoint_every": steps})


@pytest.mark.parametrize("change", ["edited", "shortened", "reshuffled"])
def test_resume_refuses_changed_data_naming_the_files(tmp_path, change):
    small_corpus(tmp_path / "corpus")
    zoo.train(corpus_experiment(tmp_path, 4))
    valid = tmp_path / "corpus" / "valid.en"
    lines = valid.read_text().splitlines(keepends=True)
    valid.write_text({"edited": "".join(lines).replace("one", "won", 1), "shortened": "".join(lines[:-1]),
                      "reshuffled": "".join(lines[1:] + lines[:1])}[change])
    if change == "shortened":
        (tmp_path / "corpus" / "valid.de").write_text("".join((tmp_path / "corpus" / "valid.de").read_text()
                                                              .splitlines(keepends=True)[:-1]))
    with pytest.raises(zoo.ConfigError, match=rf"data changed since .*checkpoint\.pt was written: .*{valid} \(content "
                                              "changed\\)"):
        zoo.train(corpus_experiment(tmp_path, 8), resume=True)
    record = json.loads((run_dir_of(corpus_experiment(tmp_path, 4)) / "result.json").read_text())
    assert record["status"] == "finished" and str(valid) in record["data"], "the result names the data it read"


def test_a_resume_reads_the_data_once_and_records_what_it_read(tmp_path, monkeypatch):
    small_corpus(tmp_path / "corpus")
    zoo.train(corpus_experiment(tmp_path, 4))
    real, calls = corpus.cached_digest, []
    monkeypatch.setattr(corpus, "cached_digest", lambda path: calls.append(path) or real(path))
    result = zoo.train(corpus_experiment(tmp_path, 8), resume=True)
    record = json.loads((result.run_dir / "result.json").read_text())
    assert record["steps"] == 8 and sorted(record["data"]) == sorted(map(str, calls)), "each file asked once: the "\
        "resume check and the record share one digest of the corpus"
    assert len(calls) == 4 and record["data"] == {str(path): real(path) for path in calls}


@pytest.mark.slow
def test_a_sweep_refuses_to_add_cells_on_changed_data(tmp_path):
    small_corpus(tmp_path / "corpus")
    sweep, _ = tiny_sweep(tmp_path, {"model.norm": ["post"]})
    base = corpus_experiment(tmp_path, 4)
    run_sweep(sweep, base, echo=lambda _: None)
    (tmp_path / "corpus" / "train.de").write_text((tmp_path / "corpus" / "train.de").read_text().replace("eins", "ein"))
    grown = sweep.model_copy(update={"grid": {"model.norm": ["post", "pre"]}})
    with pytest.raises(zoo.ConfigError, match=r"data changed since cell norm=post,seed=0 was trained \(.*train\.de "
                                              r"\(content changed\)\)"):
        run_sweep(grown, base, echo=lambda _: None)


@pytest.mark.slow
def test_a_preempted_sweep_cell_checkpoints_its_last_step_and_records_interrupted(tmp_path):
    """A scheduler's preemption: SIGTERM to every process of the job (the cell, and the sweep, which
    passes it on), then SIGKILL to the sweep, whose death sends the cell one more SIGTERM while it
    is still finishing its step (steps here take a good part of a second)."""
    sweep, base = tiny_sweep(tmp_path, {"model.norm": ["post"]})
    base["wandb"]["mode"] = "disabled"
    base["model"].update(d_model=256, d_ff=1024, n_heads=4)
    base["train"].update(steps=100000, checkpoint_every=100000, eval_every=100000, log_every=1, batch_size=512)
    file = tmp_path / "sweep.yaml"
    file.write_text(yaml.safe_dump({**sweep.model_dump(mode="json"), "base": base}, sort_keys=False))
    process = subprocess.Popen([sys.executable, "-m", "zoo.cli", "sweep", str(file)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    log = tmp_path / "tiny" / "runs" / "norm=post,seed=0" / "log.txt"
    while "step 3/100000" not in (log.read_text() if log.exists() else ""):
        assert process.poll() is None
        time.sleep(0.05)
    child = int((log.parent / ".lock").read_text())
    os.kill(child, signal.SIGTERM)
    process.send_signal(signal.SIGTERM)
    time.sleep(0.1)
    process.kill()
    process.wait(timeout=60)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
            time.sleep(0.1)
        except ProcessLookupError:
            break
    record = json.loads((log.parent / "result.json").read_text())
    assert record["status"] == "interrupted", log.read_text()[-2000:]
    stopped_at = int(record["error"].split("after step ")[1])
    step = torch.load(log.parent / "checkpoint.pt", weights_only=True)["progress"]["step"]
    assert step == stopped_at == record["steps"] >= 3, "the last completed step was saved"


@pytest.mark.slow
def test_two_shard_layouts_on_one_folder_skip_a_cell_the_other_holds(tmp_path):
    sweep, base = tiny_sweep(tmp_path, {"model.norm": ["post", "pre"]})
    base["wandb"]["mode"] = "disabled"
    base["train"].update(steps=30)  # the sweeps overlap while their children start; more steps add nothing
    file = tmp_path / "sweep.yaml"
    file.write_text(yaml.safe_dump({**sweep.model_dump(mode="json"), "base": base}, sort_keys=False))
    runs = [subprocess.Popen([sys.executable, "-m", "zoo.cli", "sweep", str(file), "--shard", shard],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for shard in ("0/1", "0/2")]
    outputs = [run.communicate(timeout=900)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    records = Ledger(tmp_path / "tiny" / "ledger.jsonl").records()
    assert "failed" not in {r["status"] for r in records}, records
    finished = [r["cell"] for r in records if r["status"] == "finished"]
    assert sorted(finished) == ["norm=post,seed=0", "norm=pre,seed=0"], "each cell trained once"


@pytest.mark.parametrize("schedule, refused", [("cosine", True), ("constant", False)])
def test_a_longer_resume_of_a_schedule_that_follows_the_steps_is_refused(tmp_path, schedule, refused):
    """Cosine over 6 steps resumed to 10 would re-stretch the decay (0 at step 6, then up again):
    a run no fresh 10-step run reproduces. A constant rate resumes longer as a fresh run would."""
    experiment = tiny_experiment(tmp_path, train={"steps": 6, "eval_every": 6, "checkpoint_every": 3,
                                                  "warmup_steps": 0, "schedule": schedule})
    zoo.train(experiment)
    longer = {**experiment, "train": {**experiment["train"], "steps": 10}}
    if refused:
        with pytest.raises(zoo.ConfigError, match=r"--resume refused: train.schedule cosine follows train.steps, so the "
                                                  r"6 steps .* had the rates of a 6-step run \(from step 1 on they "
                                                  r"differ from a 10-step run's\)"):
            zoo.train(longer, resume=True)
    else:
        assert zoo.train(longer, resume=True).metrics


def test_a_longer_resume_of_a_run_that_stopped_early_is_refused(tmp_path):
    experiment = tiny_experiment(tmp_path, train={"steps": 40, "eval_every": 2, "checkpoint_every": 2,
                                                  "schedule": "constant", "early_stop": {"patience": 1, "min_delta": 9}})
    result = zoo.train(experiment)
    saved = torch.load(result.checkpoint, weights_only=False)["pieces"]["early_stop"]["stopped_at"]
    assert saved is not None and saved < 40
    with pytest.raises(zoo.ConfigError, match=rf"--resume refused: .* stopped early at step {saved} \(train.early_stop\), "
                                              r"so more steps \(40 -> 60\) would train nothing"):
        zoo.train({**experiment, "train": {**experiment["train"], "steps": 60}}, resume=True)
