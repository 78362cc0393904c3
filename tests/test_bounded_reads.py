"""Bounded reads allocate what a file holds, not the bound: a model loads under an address-space
limit (`ulimit -v`, as clusters set it), and the bound still refuses a file that is too large,
whether its status says so or it grows while it is read."""

import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import zoo
from trainkit import tiny_experiment
from zoo.errors import ConfigError
from zoo.files import read_bounded

pytestmark = pytest.mark.slow  # trains whole runs, starts processes or runs benchmarks: not in the fast tier

ADDRESS_SPACE = 6 << 30
"""6 GiB: below the memory a bound of "what is available" would ask for on any machine the suite
runs on, and far above what loading a tiny model needs."""


def test_a_tiny_model_loads_three_ways_under_a_6_gib_address_space_limit(tmp_path):
    """zoo.from_pretrained, zoo.load and train.init_from, in a child whose address space is capped."""
    trained = zoo.train(tiny_experiment(tmp_path / "source", train={"steps": 2, "device": "cpu"}))
    folder = zoo.load(trained.checkpoint)[0].save_pretrained(tmp_path / "folder")
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import zoo
        from trainkit import tiny_experiment
        model = zoo.from_pretrained({str(folder)!r})
        loaded, spec = zoo.load({str(trained.checkpoint)!r})
        run = zoo.train(tiny_experiment({str(tmp_path / "again")!r},
                                        train={{"steps": 2, "device": "cpu", "init_from": {str(trained.checkpoint)!r}}}))
        print("loaded", type(model).__name__, spec.name, int(run.history[-1]["train/step"]))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE)))
    assert done.returncode == 0, done.stderr[-2000:]
    said = done.stdout.splitlines()[-1].split()
    assert said[0] == "loaded" and said[-1] == "2", done.stdout


def test_the_bound_refuses_a_file_larger_than_it(tmp_path):
    file = tmp_path / "big.json"
    file.write_bytes(b"x" * 1001)
    with pytest.raises(ConfigError, match=r"big\.json: 1001 B, more than the 1000 B a record may hold"):
        read_bounded(file, "a record", limit=1000)
    assert read_bounded(file, "a record", limit=1001) == b"x" * 1001


def test_a_file_longer_than_its_status_says_is_read_whole_and_held_to_the_bound():
    """/proc's files say they hold 0 bytes: the rest is read in chunks, and the bound still holds."""
    status = read_bounded("/proc/self/status", "a status file")
    assert status.startswith(b"Name:") and b"VmPeak" in status
    with pytest.raises(ConfigError, match=r"status: grew past the 100 B a status file may hold while it was read"):
        read_bounded("/proc/self/status", "a status file", limit=100)
