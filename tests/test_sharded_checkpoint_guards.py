"""A sharded checkpoint (checkpoint.dcp) is guarded as checkpoint.pt is: its index is never
unpickled beyond DCP's own classes (a planted `.metadata` runs no code), every file's SHA-256 is
checked at every read (a flipped byte, a cut or a missing shard is refused by name), and a
checkpoint set aside by a crash mid-save is read where it lies. The checkpoints here are real DCP
folders written in this process by the trainer's own save_sharded (one rank, no process group)."""

import os
import pickle
import shutil
import subprocess
import sys

import pytest
import torch

import zoo
from zoo.errors import CheckpointError
from zoo.specs.experiment import validate_experiment
from zoo.trainer.checkpoint import read_checkpoint
from zoo.trainer.consolidate import consolidate
from zoo.trainer.optim import make_optimizer, make_schedule
from zoo.trainer.sharded_checkpoint import REST, save_sharded


@pytest.fixture(scope="module")
def sharded(tmp_path_factory, trained_run):
    """The trained run's checkpoint written again as shards, as a one-rank fsdp run would write it."""
    state = read_checkpoint(trained_run.checkpoint)
    model, _ = zoo.load(trained_run.checkpoint)
    optimizer = make_optimizer(model, validate_experiment(state["experiment"]).train)
    make_schedule(optimizer, validate_experiment(state["experiment"]).train)
    optimizer.load_state_dict(state["optimizer"])
    rest = {key: value for key, value in state.items() if key not in ("model", "optimizer", "format")}
    rest["progress"] = state["progress"].model_dump()
    path = tmp_path_factory.mktemp("sharded") / "checkpoint.dcp"
    save_sharded(path, model.train(), optimizer, rest, rank=0, world=2, barrier=lambda: None)
    return path, model.eval()


@pytest.fixture
def copy(tmp_path, sharded):
    path = tmp_path / "run" / "checkpoint.dcp"
    shutil.copytree(sharded[0], path)
    return path


def test_a_sharded_checkpoint_reads_back_the_weights_it_was_written_from(copy, sharded):
    loaded, _ = zoo.load(copy)
    assert all(torch.equal(a, b) for a, b in zip(loaded.state_dict().values(), sharded[1].state_dict().values(),
                                                  strict=True))
    assert "shards" not in read_checkpoint(copy), "the digests are checked, not handed on"


class Planted:
    """An object whose unpickling runs a command: what a hostile `.metadata` holds."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_a_planted_metadata_runs_no_code(copy, tmp_path):
    marker = tmp_path / "ran"
    (copy / ".metadata").write_bytes(pickle.dumps(Planted(marker)))
    with pytest.raises(CheckpointError, match=r"file \.metadata (damaged|cut short|grown)"):  # zoo.pt's record of it
        zoo.load(copy)
    from zoo.trainer.shard_guard import read_metadata
    with pytest.raises(CheckpointError, match=r"names posix\.system.*not one of DCP's metadata classes"):
        read_metadata(copy / ".metadata")
    assert not marker.exists()


def test_a_planted_metadata_with_matching_digests_is_refused_before_it_runs(copy, tmp_path):
    """Digests are no defence against one who rewrites zoo.pt too: the restricted unpickler is."""
    marker = tmp_path / "ran"
    (copy / ".metadata").write_bytes(pickle.dumps(Planted(marker)))
    rest = torch.load(copy / REST, weights_only=True)
    from zoo.trainer.shard_guard import shard_digests
    rest["shards"] = shard_digests(copy, leave_out=(REST,))
    torch.save(rest, copy / REST)
    for attempt in (lambda: zoo.load(copy), lambda: consolidate(copy)):
        with pytest.raises(CheckpointError, match="not one of DCP's metadata classes"):
            attempt()
    assert not marker.exists()


def flip(path, offset):
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x40
    path.write_bytes(bytes(data))


def shard_of(copy):
    return sorted(copy.glob("*.distcp"))[0]


@pytest.mark.parametrize("damage, said", [
    (lambda shard: flip(shard, shard.stat().st_size // 2), r"shard __0_0\.distcp damaged"),
    (lambda shard: shard.write_bytes(shard.read_bytes()[:100]), r"shard __0_0\.distcp cut short"),
    (lambda shard: shard.unlink(), r"missing shard __0_0\.distcp \(written by 2 ranks\)"),
    (lambda shard: (shard.parent / ".metadata").write_bytes(b""), r"file \.metadata cut short"),
    (lambda shard: (shard.parent / ".metadata").unlink(), r"missing file \.metadata"),
], ids=["flipped", "truncated", "missing", "empty-metadata", "no-metadata"])
def test_a_damaged_sharded_checkpoint_is_refused_by_name_everywhere(copy, damage, said):
    damage(shard_of(copy) if list(copy.glob("*.distcp")) else None)
    for attempt in (lambda: zoo.load(copy), lambda: consolidate(copy), lambda: read_checkpoint(copy)):
        with pytest.raises(CheckpointError, match=said):
            attempt()
    cli = subprocess.run([sys.executable, "-m", "zoo.cli", "consolidate", str(copy)], capture_output=True, text=True,
                         timeout=300)
    assert cli.returncode == 2 and cli.stderr.count("\n") == 1 and "zoo:" in cli.stderr, cli.stderr


def test_a_dcp_failure_is_one_checkpoint_error_not_a_base_exception(copy):
    """DCP's own CheckpointException is a BaseException: a shard that passes the digests but does
    not fit (here: digests of a checkpoint written before they were recorded) still ends as one error."""
    rest = torch.load(copy / REST, weights_only=True)
    del rest["shards"]
    torch.save(rest, copy / REST)
    shard = shard_of(copy)
    shard.write_bytes(shard.read_bytes()[:200])
    with pytest.raises(CheckpointError, match=r"checkpoint\.dcp: its shards could not be read"):
        zoo.load(copy)


def test_a_checkpoint_set_aside_by_a_crash_mid_save_is_read_where_it_lies(copy):
    aside = copy.with_name(".checkpoint.dcp.old")
    os.replace(copy, aside)
    model, _ = zoo.load(copy)
    out = consolidate(copy)
    assert out == copy.with_name("checkpoint.pt") and out.is_file() and aside.is_dir() and not copy.exists()
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), zoo.load(out)[0].state_dict().values(),
                                                  strict=True))
