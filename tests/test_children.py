"""Processes the zoo starts: a child killed by a signal is named by the signal (retrain, reproduce,
a sweep's workers), and a child is only ever told to use a CPU capability this CPU has."""

import functools
import importlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from test_reproduce import MAIN_JOB, finished_sweep  # noqa: F401 - the fixture, shared

from trainkit import tiny_experiment
from zoo.children import ended
from zoo.errors import ZooError
from zoo.sweep import reproduce as reproduce_module
from zoo.sweep.reproduce import describe
from zoo.sweep.retrain import CAPABILITY, X86_LEVELS, cpu_capabilities, retrain
from zoo.sweep.runner import log_tail

pytestmark = pytest.mark.slow  # trains whole runs, starts processes or runs benchmarks: not in the fast tier

LACKS_AVX512 = "this CPU lacks it (torch detects AVX2)"


def killed_by(sig: signal.Signals, said: str = "") -> list[str]:
    """A child command that prints `said` on stderr, then dies of `sig` (as a kernel it cannot run would)."""
    return [sys.executable, "-c", f"import os, signal, sys; sys.stderr.write({said!r}); sys.stderr.flush(); "
                                  f"os.kill(os.getpid(), signal.{sig.name})"]


@pytest.mark.parametrize(("code", "said"), [
    (0, "exit code 0"), (3, "exit code 3"),
    (-signal.SIGILL, "killed by SIGILL: an instruction this CPU lacks"),
    (-signal.SIGKILL, "killed by SIGKILL: stopped from outside, often by the kernel's out-of-memory killer"),
    (-signal.SIGSEGV, "killed by SIGSEGV: a crash in native code"),
    (-signal.SIGTERM, "killed by SIGTERM"), (-200, "killed by signal 200")])
def test_a_return_code_is_said_in_words(code, said):
    assert ended(code) == said


def test_sigill_under_a_capability_names_what_the_cpu_lacks():
    assert ended(-signal.SIGILL, "avx512") == "killed by SIGILL: this CPU lacks AVX-512 (ATEN_CPU_CAPABILITY=avx512)"
    assert ended(-signal.SIGSEGV, "avx512") == "killed by SIGSEGV: a crash in native code"


@pytest.mark.parametrize(("detected", "tried", "not_tried"), [
    ("AVX512", ("default", "avx2", "avx512"), {}),
    ("AVX2", ("default", "avx2"), {"avx512": LACKS_AVX512}),
    ("DEFAULT", ("default",), {"avx2": "this CPU lacks it (torch detects the default (no vector extension))",
                               "avx512": "this CPU lacks it (torch detects the default (no vector extension))"}),
    ("SVE256", ("default", "sve256"), {})])
def test_the_capabilities_tried_are_the_detected_one_and_those_below_it(monkeypatch, detected, tried, not_tried):
    """Simulated CPUs: torch's detection says what this CPU runs; nothing above it is tried."""
    monkeypatch.delenv(CAPABILITY, raising=False)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: detected)
    assert cpu_capabilities() == (tried, not_tried)


@pytest.mark.parametrize("level", cpu_capabilities()[0])
def test_a_process_held_to_a_lower_capability_tries_nothing_above_it(level):
    """A real child told to use each level this CPU runs: torch detects that level there, and the
    levels above it are named as not tried, saying why."""
    script = "import json; from zoo.sweep.retrain import cpu_capabilities; print(json.dumps(cpu_capabilities()))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={**os.environ, CAPABILITY: level}, check=True)
    tried, not_tried = json.loads(done.stdout)
    if level in X86_LEVELS:
        above = X86_LEVELS[X86_LEVELS.index(level) + 1:]
        assert tuple(tried) == X86_LEVELS[: X86_LEVELS.index(level) + 1]
        assert set(not_tried) == set(above) and all(f"{CAPABILITY}={level}" in why for why in not_tried.values())
    else:
        assert tried == ["default", level] and not_tried == {}


def test_rounding_trains_under_no_capability_the_cpu_lacks_and_names_it(monkeypatch):
    """experiments/benchmarks/rounding.py on a simulated AVX2 CPU: no child is told avx512, and
    the output says it was not tried and why."""
    monkeypatch.syspath_prepend(str(MAIN_JOB.parents[2] / "benchmarks"))
    rounding = importlib.import_module("rounding")
    monkeypatch.setattr(rounding, "cpu_capabilities", lambda: (("default", "avx2"), {"avx512": LACKS_AVX512}))
    record = reproduce_module.recorded_cells(MAIN_JOB, [])[2][rounding.sensitive_cell(MAIN_JOB)][1]
    asked = []

    def recorded(experiment, threads, scratch, until=None, environment=None, entry=None):
        asked.append((environment or {}).get(CAPABILITY))
        return record  # the training itself is held by test_reproduce; here only what is asked of it

    monkeypatch.setattr(rounding, "retrain", recorded)
    result = rounding.main(["--ledger", "seed-axes"])
    assert [a for a in asked if a] == ["default", "avx2"]
    assert result["capabilities_not_tried"] == {"avx512": LACKS_AVX512}
    assert [label for label in result["results"]["seed-axes"]["gaps"] if label.startswith("capability")] == [
        "capability default", "capability avx2"]


def test_retraining_killed_by_a_signal_names_it_whatever_it_printed(tmp_path):
    experiment = tiny_experiment(tmp_path)
    with pytest.raises(ZooError, match=r"^training it again failed: killed by SIGILL: this CPU lacks AVX-512 "
                                       r"\(ATEN_CPU_CAPABILITY=avx512\)$"):
        retrain(experiment, 1, tmp_path, environment={CAPABILITY: "avx512"},
                entry=killed_by(signal.SIGILL, "a warning printed before the crash\n"))
    with pytest.raises(ZooError, match=r"^training it again failed: killed by SIGSEGV: a crash in native code$"):
        retrain(experiment, 1, tmp_path, entry=killed_by(signal.SIGSEGV))


def test_reproduce_says_which_signal_killed_the_cell_trained_again(finished_sweep, monkeypatch):  # noqa: F811
    monkeypatch.setattr(reproduce_module, "retrain", functools.partial(retrain, entry=killed_by(signal.SIGKILL)))
    (result,) = reproduce_module.reproduce(finished_sweep, ["norm=pre,seed=0"], echo=lambda _: None)
    assert result.error == ("training it again failed: killed by SIGKILL: stopped from outside, often by the "
                            "kernel's out-of-memory killer")
    assert "killed by SIGKILL" in describe(result)


def test_a_cell_whose_worker_was_killed_after_it_logged_keeps_its_log_and_the_signal(tmp_path):
    log = tmp_path / "log.txt"
    log.write_text("step 10/20 loss=2.0\nstep 20/20 loss=1.5\n")
    assert log_tail(log, -signal.SIGKILL) == ("step 10/20 loss=2.0\nstep 20/20 loss=1.5\nits worker was killed by "
                                              "SIGKILL: stopped from outside, often by the kernel's out-of-memory killer")
    assert log_tail(log, 2) == "step 10/20 loss=2.0\nstep 20/20 loss=1.5"
    torchrun = ["[rank1]: zoo: train.parallel fsdp: the model holds a scalar parameter", "zoo: the model holds a scalar",
                *["E1128 torchrun's report of the failure"] * 20]
    log.write_text("\n".join(["step 10/20 loss=2.0", *torchrun]))
    assert log_tail(log, 1) == "zoo: the model holds a scalar", "the zoo's reason, not torchrun's report"
    assert log_tail(Path(tmp_path / "none.txt"), -signal.SIGSEGV) == (
        "its worker ended (killed by SIGSEGV: a crash in native code) before the cell wrote anything")
