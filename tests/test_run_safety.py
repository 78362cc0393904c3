"""No run overwrites, fakes or silently loses a result: unique folders, resume exact or refused,
finite checkpoints only, explosions marked diverged, locks, and a picture that cannot fail a run."""

import json
import re
import signal
import struct
import subprocess
import sys

import pytest
import torch

import zoo
from trainkit import run_dir_of, tiny_experiment
from zoo.cli import main
from zoo.specs.experiment import ExplosionSpec
from zoo.trainer import Trainer, picture
from zoo.trainer.evaluate import Evaluator
from zoo.trainer.guards import LossWatch
from zoo.trainer.optim import lr_multiplier


def test_runs_that_differ_in_any_field_get_folders_of_their_own(tmp_path):
    first = zoo.train(tiny_experiment(tmp_path, train={"steps": 20}))
    second = zoo.train(tiny_experiment(tmp_path, train={"steps": 20, "optimizer": {"lr": 1e-3}}))
    third = zoo.train(tiny_experiment(tmp_path, train={"steps": 20}, task={"name": "copy", "min_len": 3, "max_len": 6}))
    folders = {first.run_dir, second.run_dir, third.run_dir}
    assert len(folders) == 3 and all(d.name.startswith("post.sinusoidal.fused.relu-seed0-") for d in folders)
    for result in (first, second, third):
        saved = json.loads((result.run_dir / "result.json").read_text())
        assert saved["status"] == "finished" and saved["metrics"] == pytest.approx(result.metrics)


def test_the_same_run_again_is_refused_and_loses_nothing(tmp_path):
    experiment = tiny_experiment(tmp_path, train={"steps": 20})
    first = zoo.train(experiment)
    before = {p.name: p.read_bytes() for p in first.run_dir.iterdir() if p.is_file()}
    with pytest.raises(zoo.RunConflict, match=r"already holds a finished run of 20 steps; it trained the 20 steps "
                                              r"asked: its result stands \(--resume prints it\); to train anew"):
        zoo.train(experiment)
    assert {p.name: p.read_bytes() for p in first.run_dir.iterdir() if p.is_file()} == before


def test_another_step_count_meets_the_same_run_and_is_told_which_way_on_fits(tmp_path):
    """The step count is not part of a run's identity: more steps continue the run (--resume),
    fewer cannot, and the message says which, never a way that would be refused next."""
    experiment = tiny_experiment(tmp_path, train={"steps": 20})
    first = zoo.train(experiment)
    more = tiny_experiment(tmp_path, train={"steps": 40})
    with pytest.raises(zoo.RunConflict, match=r"continue it to 40 steps with --resume \(the same run, trained on\)"):
        zoo.train(more)
    assert zoo.train(more, resume=True).history[-1]["train/step"] == 40
    fewer = tiny_experiment(tmp_path, train={"steps": 10})
    with pytest.raises(zoo.RunConflict, match=r"its 40 steps are more than the 10 asked, so it cannot be continued to "
                                              rf"them: its result stands \(zoo eval {first.checkpoint} scores"):
        zoo.train(fewer)
    with pytest.raises(zoo.ConfigError, match=r"--resume refused: train.steps 10 is fewer than the 40 steps"):
        zoo.train(fewer, resume=True)
    assert zoo.train({**fewer, "wandb": {**fewer["wandb"], "name": "ten"}}).run_dir.name == "ten", "a new name trains anew"


def test_resume_refuses_a_changed_experiment_naming_each_field(tmp_path):
    experiment = tiny_experiment(tmp_path, train={"steps": 20}, wandb={"name": "mine"})
    zoo.train(experiment)
    changed = tiny_experiment(tmp_path, train={"steps": 20, "optimizer": {"lr": 1e-3}}, wandb={"name": "mine"},
                              task={"name": "reverse", "min_len": 3, "max_len": 7})
    with pytest.raises(zoo.ConfigError) as err:
        zoo.train(changed, resume=True)
    message = str(err.value)
    assert "--resume refused" in message
    assert "train.optimizer.lr: 0.003 in the checkpoint, 0.001 now" in message
    assert "task.max_len: 6 in the checkpoint, 7 now" in message
    fewer = tiny_experiment(tmp_path, train={"steps": 10}, wandb={"name": "mine"})
    with pytest.raises(zoo.ConfigError, match=r"train\.steps 10 is fewer than the 20 steps"):
        zoo.train(fewer, resume=True)


def test_resume_of_an_edited_experiment_names_what_changed_and_leaves_nothing(tmp_path):
    first = zoo.train(tiny_experiment(tmp_path, train={"steps": 20}))
    edited = tiny_experiment(tmp_path, train={"steps": 20, "optimizer": {"lr": 1e-3}})
    with pytest.raises(zoo.ConfigError, match=rf"this experiment has no checkpoint yet, and {first.checkpoint} is of "
                                              r"another experiment \(train\.optimizer\.lr: 0\.003 in the checkpoint, "
                                              r"0\.001 now\)"):
        zoo.train(edited, resume=True)
    assert [p.name for p in tmp_path.iterdir() if p.is_dir()] == [first.run_dir.name]
    assert zoo.train(edited).run_dir != first.run_dir, "without --resume it is a new run of its own"


def test_resume_with_more_steps_and_new_intervals_takes_them(tmp_path):
    """A constant rate (a schedule that ignores train.steps) resumes longer as a fresh run would; a
    decaying one is refused (tests/test_resume_integrity.py)."""
    experiment = tiny_experiment(tmp_path, train={"steps": 40, "eval_every": 20, "schedule": "constant"})
    first = zoo.train(experiment)
    longer = tiny_experiment(tmp_path, train={"steps": 80, "eval_every": 10, "schedule": "constant"})
    second = zoo.train(longer, resume=True)
    assert second.run_dir == first.run_dir, "resume finds the same folder"
    evals = [row["train/step"] for row in second.history if "eval/loss" in row]
    assert evals == [20, 40, 50, 60, 70, 80], "the new evaluation interval applies after the resume"
    lrs = {row["train/step"]: row["train/lr"] for row in second.history if "train/lr" in row}
    train_spec = zoo.ExperimentSpec.model_validate(longer).train
    assert lrs[60] == pytest.approx(3e-3 * lr_multiplier(train_spec, 60)), "the schedule runs on to the new total"
    assert torch.load(second.checkpoint, weights_only=True)["progress"]["step"] == 80


def test_one_step_that_breaks_the_model_is_neither_checkpointed_nor_finished(tmp_path):
    """The loss of step 1 is finite; the update with lr 1e30 leaves weights whose evaluation is
    not. Before the fix this run wrote its checkpoint and ended `finished` with eval loss NaN."""
    experiment = tiny_experiment(tmp_path, train={"steps": 1, "optimizer": {"lr": 1e30}, "warmup_steps": 0,
                                                  "grad_clip": None, "schedule": "constant"})
    with pytest.raises(zoo.Diverged, match="step 1: the evaluation loss is nan"):
        zoo.train(experiment)
    run_dir = run_dir_of(experiment)
    assert json.loads((run_dir / "result.json").read_text())["status"] == "diverged"
    assert not (run_dir / "checkpoint.pt").exists()


def test_non_finite_weights_are_never_written(tmp_path):
    trainer = Trainer(zoo.ExperimentSpec.model_validate(tiny_experiment(tmp_path)))
    try:
        trainer._checkpoint()
        good = trainer.checkpoint_path.read_bytes()
        with torch.no_grad():
            next(trainer.model.parameters())[0] = float("nan")
        with pytest.raises(zoo.Diverged, match="the weights are no longer finite"):
            trainer._checkpoint()
        assert trainer.checkpoint_path.read_bytes() == good, "the last good checkpoint stays"
    finally:
        trainer.folder.release()


@pytest.mark.parametrize("field, value", [("lr", float("inf")), ("weight_decay", float("inf")), ("lr", float("nan"))])
def test_non_finite_hyperparameters_are_rejected(tmp_path, field, value):
    with pytest.raises(zoo.ConfigError, match=rf"train\.optimizer\.{field}: Input should be a finite number"):
        zoo.train(tiny_experiment(tmp_path, train={"optimizer": {field: value}}))


def test_the_explosion_rule_counts_consecutive_logs_above_the_threshold():
    watch = LossWatch(ExplosionSpec(factor=10.0, logs=3))
    watch.first_step(3.0)
    for step, loss in enumerate([29.0, 31.0, 35.0, 12.0, 40.0, 50.0], 1):  # a dip below 30 resets the count
        watch.observe(loss, step)
    with pytest.raises(zoo.Diverged, match=r"step 7: the training loss 60 is above 10 x its initial value 3 for 3 logs"):
        watch.observe(60.0, 7)
    ending = LossWatch(ExplosionSpec(), first_loss=3.0)
    ending.observe(31.0, 1)
    with pytest.raises(zoo.Diverged, match="at the end of training"):
        ending.at_end(31.0, 1)
    LossWatch(None, first_loss=3.0).observe(1e9, 1)  # explosion: null turns the rule off


def test_a_finite_but_exploding_run_is_diverged_and_keeps_a_checkpoint_from_before(tmp_path):
    experiment = tiny_experiment(tmp_path, train={"steps": 120, "optimizer": {"lr": 1.0}, "grad_clip": None,
                                                  "warmup_steps": 0, "log_every": 10, "checkpoint_every": 10})
    with pytest.raises(zoo.Diverged, match=r"above 10 x its initial value .* for 3 logs in a row"):
        zoo.train(experiment)
    run_dir = run_dir_of(experiment)
    result = json.loads((run_dir / "result.json").read_text())
    logged = {row["train/step"]: row["train/loss"] for row in result["history"] if "train/loss" in row}
    at = result["diverged_at"]
    assert result["status"] == "diverged" and max(logged) == at
    assert all(logged[s] > 10 * 3.0 for s in (at - 20, at - 10, at)), "three logs in a row far above the start"
    assert all(loss < 1e6 for loss in logged.values()), "finite: only the explosion rule could catch it"
    saved = torch.load(run_dir / "checkpoint.pt", weights_only=True)["progress"]["step"]
    assert saved < at - 20, "no checkpoint was written once the loss had exploded"


def hold_lock(folder, name=".lock"):
    """Another process holding a zoo lock, as a second `zoo train` or `zoo sweep` would."""
    code = (f"import time; from zoo.files import FolderLock; lock = FolderLock({str(folder)!r}, {name!r}).acquire(); "
            "print('held', flush=True); time.sleep(60)")
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_a_run_folder_in_use_by_another_process_is_refused_with_its_pid(tmp_path):
    experiment = tiny_experiment(tmp_path, train={"steps": 5})
    holder = hold_lock(run_dir_of(experiment))
    try:
        with pytest.raises(zoo.RunConflict, match=rf"is in use: another zoo process \(pid {holder.pid}\)"):
            zoo.train(experiment)
    finally:
        holder.kill()
        holder.wait()
    assert zoo.train(experiment).metrics, "the lock goes with the process that held it"


def png_size(path) -> tuple[int, int]:
    return struct.unpack(">II", path.read_bytes()[16:24])


@pytest.mark.slow
def test_the_attention_picture_is_bounded_for_long_strings_and_many_heads(tmp_path):
    result = zoo.train(tiny_experiment(tmp_path, model={"n_heads": 16, "d_model": 32, "max_len": 400},
                                       task={"name": "copy", "min_len": 150, "max_len": 160},
                                       train={"steps": 2, "batch_size": 4, "eval_size": 2}))
    width, height = png_size(result.attention_png)
    assert width <= 110 * 42 and height <= 110 * (1.5 + 0.3 * picture.MAX_TOKENS) + 10


def test_a_picture_that_fails_costs_the_picture_not_the_run(tmp_path, monkeypatch):
    def out_of_memory(*args, **kwargs):
        raise MemoryError("figure too large")

    monkeypatch.setattr("zoo.trainer.picture.cross_attention_png", out_of_memory)
    with pytest.warns(RuntimeWarning, match="picture was not drawn: MemoryError"):
        result = zoo.train(tiny_experiment(tmp_path, train={"steps": 5}))
    assert result.attention_png is None
    assert json.loads((result.run_dir / "result.json").read_text())["status"] == "finished"


@pytest.mark.slow
def test_sigterm_stops_zoo_train_after_a_step_with_a_checkpoint_of_that_step(tmp_path):
    experiment = tiny_experiment(tmp_path, train={"steps": 3000, "checkpoint_every": 1000})
    file = tmp_path / "e.json"
    file.write_text(json.dumps(experiment))
    run_dir = run_dir_of(experiment)
    process = subprocess.Popen([sys.executable, "-m", "zoo.cli", "train", str(file)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    assert process.stdout.readline().startswith("data: valid 32; vocabulary"), "the run says its data first"
    assert re.match(r"run \S+: device cpu, \d+ threads, precision fp32 \(train.precision auto\), 1 process$",
                    process.stdout.readline()), "then where and how it trains"
    assert process.stdout.readline().startswith("step 20/3000"), "training has begun"
    process.terminate()
    _, err = process.communicate(timeout=60)
    assert process.returncode == 143, err
    assert "stopped by SIGTERM after step" in err and "continue with --resume" in err
    result = json.loads((run_dir / "result.json").read_text())
    saved = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    assert result["status"] == "interrupted" and 0 < saved["progress"]["step"] == result["steps"] < 3000


def sigint_to_self(times: int):
    """A real SIGINT, `times` times, as Ctrl-C pressed that often. Raised in this (the main) thread,
    whose handler then runs before raise_signal returns: os.kill may hand it to another thread of
    the process (torch's, W&B's), and the main thread would see it only some bytecodes later."""
    for _ in range(times):
        signal.raise_signal(signal.SIGINT)


def train_interrupted(tmp_path, experiment: dict, capsys) -> tuple[str, str]:
    """`zoo train` of the experiment, which a SIGINT must end with exit 130 and no traceback; the
    experiment's file and what was said on stderr."""
    file = str(tmp_path / "e.json")
    (tmp_path / "e.json").write_text(json.dumps(experiment))
    with pytest.raises(SystemExit) as exit_info:
        main(["train", file])
    err = capsys.readouterr().err
    assert exit_info.value.code == 130 and "Traceback" not in err, err
    return file, err


def test_sigint_while_wandb_finishes_exits_130_with_the_result_intact(tmp_path, monkeypatch, capsys):
    """The probe: Ctrl-C while W&B finished gave a KeyboardInterrupt traceback and exit 1."""
    from zoo.trainer.tracking import Tracker

    real_finish = Tracker.finish

    def finish_interrupted(self, failed=False):
        sigint_to_self(1)
        real_finish(self, failed)

    monkeypatch.setattr(Tracker, "finish", finish_interrupted)
    experiment = tiny_experiment(tmp_path, train={"steps": 4, "eval_every": 2}, wandb={"mode": "offline"})
    _, err = train_interrupted(tmp_path, experiment, capsys)
    assert "SIGINT arrived while W&B finished; the run is complete: its result is " in err
    result = json.loads((run_dir_of(experiment) / "result.json").read_text())
    assert result["status"] == "finished" and result["steps"] == 4 and "eval/loss" in result["metrics"]
    assert list((tmp_path / "wandb").glob("offline-run-*/run-*.wandb")), "W&B finished writing its run"


def test_two_sigints_during_an_evaluation_stop_at_once_with_exit_130_and_the_last_checkpoint(tmp_path, monkeypatch,
                                                                                               capsys):
    real_evaluate = Evaluator.__call__

    def evaluate_interrupted(self, model, step, *args, **kwargs):
        if step == 4:
            sigint_to_self(2)  # the first asks for a stop after the step; the second stops at once
        return real_evaluate(self, model, step, *args, **kwargs)

    monkeypatch.setattr(Evaluator, "__call__", evaluate_interrupted)
    experiment = tiny_experiment(tmp_path, train={"steps": 8, "eval_every": 4, "checkpoint_every": 2})
    file, err = train_interrupted(tmp_path, experiment, capsys)
    assert "stopped at once by a second SIGINT at step 4; its last checkpoint is " in err
    run_dir = run_dir_of(experiment)
    assert json.loads((run_dir / "result.json").read_text())["status"] == "interrupted"
    assert torch.load(run_dir / "checkpoint.pt", weights_only=True)["progress"]["step"] == 2, "step 4 was not saved"
    monkeypatch.setattr(Evaluator, "__call__", real_evaluate)
    main(["train", file, "--resume"])
    assert json.loads((run_dir / "result.json").read_text())["status"] == "finished"


def test_sigint_outside_training_is_one_line_and_exit_130(tmp_path, monkeypatch, capsys):
    import zoo.trainer.evaluate as evaluate

    checkpoint = zoo.train(tiny_experiment(tmp_path, train={"steps": 2})).checkpoint
    monkeypatch.setattr(evaluate, "evaluate_split", lambda *args, **kwargs: sigint_to_self(1))
    before = signal.signal(signal.SIGINT, signal.default_int_handler)  # as a fresh `zoo` process has it
    try:
        with pytest.raises(SystemExit) as exit_info:
            main(["eval", str(checkpoint)])
    finally:
        signal.signal(signal.SIGINT, before)
    err = capsys.readouterr().err
    assert exit_info.value.code == 130 and err.startswith("zoo: interrupted (SIGINT)") and err.count("\n") == 1, err


def test_an_error_a_stop_signal_causes_mid_step_stops_the_run_as_the_signal_would(tmp_path, monkeypatch):
    """SIGTERM during torch.compile's build kills its workers and the build fails (InductorError):
    that failure is the signal's doing, so the run stops as SIGTERM stops it, recorded as
    interrupted, with no traceback; an error with no signal behind it stays a bug."""
    import os

    from zoo.trainer.step import TrainStep

    def dying_build(self, step, batch):
        os.kill(os.getpid(), signal.SIGTERM)
        raise RuntimeError("InductorError: SubprocException: a compile worker died")

    monkeypatch.setattr(TrainStep, "__call__", dying_build)
    experiment = tiny_experiment(tmp_path, train={"steps": 3})
    with pytest.raises(zoo.Interrupted, match=r"stopped by SIGTERM during step 1 \(it ended what was running: "
                                              r"RuntimeError: InductorError: SubprocException") as stopped:
        zoo.train(experiment)
    assert stopped.value.signum == signal.SIGTERM
    assert json.loads((run_dir_of(experiment) / "result.json").read_text())["status"] == "interrupted"

    monkeypatch.setattr(TrainStep, "__call__", lambda self, step, batch: (_ for _ in ()).throw(RuntimeError("a bug")))
    with pytest.raises(RuntimeError, match="a bug"):
        zoo.train(tiny_experiment(tmp_path / "bug", train={"steps": 3}))
