"""train.parallel and train.activation_checkpointing without processes: what is refused before
anything runs, and recomputed blocks giving the very gradients kept activations give."""

import re
from contextlib import nullcontext
from pathlib import Path

import pytest
import torch
from conftest import GRID, padded_batch, tiny

import zoo
from trainkit import tiny_experiment
from zoo.model.kinds import model_class
from zoo.specs.experiment import TrainSpec, validate_experiment
from zoo.trainer.feed import Batch
from zoo.trainer.objective import batch_loss_sum
from zoo.trainer.parallelism import Parallelism
from zoo.trainer.recompute import recompute_blocks, stack_blocks
from zoo.trainer.sharded_checkpoint import check_world_size
from zoo.trainer.sharding import shard


def gradients(model: zoo.ZooModel, seed: int = 3) -> dict[str, torch.Tensor]:
    spec, kind = model.spec, model_class(model.spec)
    src = padded_batch([9, 12, 7], spec.src_vocab_size, spec=spec)
    tgt = padded_batch([9, 12, 7] if kind.trains_on == "positions" else [5, 8, 8], spec.tgt_vocab_size, seed=1, spec=spec)
    inputs, labels = kind.frame(spec, src, tgt)
    batch = Batch(inputs, kind.input_masks(spec, inputs), labels, int((labels != spec.pad_id).sum()))
    torch.manual_seed(seed)  # dropout's masks
    batch_loss_sum(model.train(), model.generator, batch, spec.pad_id, TrainSpec(), nullcontext()).backward()
    return {name: p.grad for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("name", GRID)
def test_recomputed_blocks_give_the_same_gradients(name):
    """Every block recomputed in the backward pass, with dropout drawing masks: the random state is
    replayed, so the gradients are the same to the bit."""
    spec = tiny(name, dropout=0.1)
    kept, recomputed = zoo.build(spec, seed=0), zoo.build(spec, seed=0)
    assert recompute_blocks(recomputed, "blocks", 2) == sum(map(len, stack_blocks(recomputed))) > 0
    expected, found = gradients(kept), gradients(recomputed)
    assert found.keys() == expected.keys()
    for parameter, gradient in expected.items():
        assert torch.equal(found[parameter], gradient), parameter


@pytest.mark.parametrize(("choice", "k", "marked"), [("none", 2, []), ("blocks", 2, [0, 1, 2, 3, 4]),
                                                     ("every_k", 2, [0, 2, 4]), ("every_k", 3, [0, 3])])
def test_the_chosen_blocks_are_recomputed(choice, k, marked):
    model = zoo.build(tiny("decoder.pre.rope.fused.relu", n_decoder_layers=5), seed=0)
    recompute_blocks(model, choice, k)
    assert [i for i, block in enumerate(stack_blocks(model)[0]) if block.recompute] == marked


def test_a_k_without_every_k_is_refused():
    with pytest.raises(zoo.ConfigError, match=r"train\.activation_checkpointing_k 3 is read only with "
                                              r"activation_checkpointing: every_k \(it is blocks\)"):
        validate_experiment({"train": {"activation_checkpointing": "blocks", "activation_checkpointing_k": 3}})


def test_fsdp_without_torchrun_is_refused_before_anything_runs(tmp_path, monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with pytest.raises(zoo.ConfigError) as refused:
        zoo.train(tiny_experiment(tmp_path, train={"parallel": "fsdp", "device": "cpu"}))
    assert str(refused.value) == (
        "train.parallel fsdp: shards the model over the processes torchrun starts, and this is one process without "
        "it; start it as `torchrun --nproc_per_node N -m zoo.cli train ...` (N 1 too), or set train.parallel: ddp")
    assert not list(tmp_path.iterdir()), "a refused start leaves no folder"


def test_rows_that_do_not_divide_over_the_ranks_are_refused_before_any_joins(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.distributed, "init_process_group", lambda **_: pytest.fail("the group was joined"))
    for name, value in {"WORLD_SIZE": "3", "LOCAL_WORLD_SIZE": "3", "RANK": "0", "LOCAL_RANK": "0"}.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(zoo.ConfigError) as refused:
        zoo.train(tiny_experiment(tmp_path, train={"parallel": "fsdp", "device": "cpu", "batch_size": 32}))
    assert str(refused.value) == ("train.parallel fsdp: train.batch_size 32 does not divide over the 3 ranks torchrun "
                                  "started; take a multiple of 3, or start a number of processes that divides it")
    assert not list(tmp_path.iterdir())


def test_a_checkpoint_of_another_world_size_needs_the_resharding_step(tmp_path):
    saved = {"sharded": tmp_path / "checkpoint.dcp", "world_size": 4}
    with pytest.raises(zoo.ConfigError) as refused:
        check_world_size(saved, 2, reshard=False)
    assert str(refused.value) == (
        f"{tmp_path / 'checkpoint.dcp'}: written by 4 ranks, and this run has 2: resume with --resume --reshard to read "
        "its shards at 2 (it then continues within float rounding, not bitwise), or start 4 processes")
    check_world_size(saved, 2, reshard=True)
    check_world_size(saved, 4, reshard=False)
    check_world_size({"model": {}}, 2, reshard=False)  # a whole checkpoint is read by any world size


def test_reshard_goes_with_resume(capsys):
    from zoo.cli import main

    with pytest.raises(SystemExit):
        main(["train", "--reshard"])
    assert capsys.readouterr().err.strip() == (
        "zoo: --reshard reads a sharded checkpoint at another world size, so it goes with --resume")


@pytest.mark.parametrize(("name", "parameter", "part"), [
    ("rezero.sinusoidal.fused.relu", "encoder.layers.0.self_attn_residual.scale", "norm rezero"),
    ("fixup.sinusoidal.fused.relu", "encoder.layers.0.self_attn_residual.in_bias", "norm fixup"),
    ("pre.sinusoidal.fused.relu.scalenorm", "encoder.layers.0.self_attn_residual.norm.gain", "norm_type scalenorm")])
def test_a_scalar_parameter_is_refused_in_one_line(name, parameter, part):
    """torch's fully_shard refuses tensors of no dimension: said before a process group is needed."""
    with pytest.raises(zoo.ConfigError) as refused:
        shard(zoo.build(tiny(name), seed=0), None)
    assert str(refused.value) == (f"train.parallel fsdp: the model holds a scalar parameter ({parameter}, of {part}), "
                                  "and torch's fully_shard shards only tensors of one dimension or more; use "
                                  "train.parallel: ddp")


def test_a_weight_two_units_would_hold_is_refused():
    model = zoo.build(tiny("decoder.pre.rope.fused.relu"), seed=0)
    first, second = stack_blocks(model)[0][:2]
    second.ffn.linear1.weight = first.ffn.linear1.weight
    with pytest.raises(zoo.ConfigError, match=r"the parameter decoder\.layers\.0\.ffn\.linear1\.weight \(also "
                                              r"decoder\.layers\.1\.ffn\.linear1\.weight\) is used in more than one"):
        shard(model, None)


def test_one_process_without_fsdp_joins_no_group(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert Parallelism.from_env(torch.device("cpu"), TrainSpec()) == Parallelism()


@pytest.mark.parametrize("checkpointing", ["none", "blocks", "every_k"])
def test_parallelism_is_resolved_once_from_the_train_spec(monkeypatch, checkpointing):
    """What a run's ranks share is read from one object built where the run starts: its memory
    shares say what trims one rank's memory, and nothing is replicated in one process."""
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    k = 3 if checkpointing == "every_k" else 2
    train = TrainSpec(activation_checkpointing=checkpointing, activation_checkpointing_k=k)
    found = Parallelism.from_env(torch.device("cpu"), train)
    assert (found.world, found.sharded, found.replicated, found.name) == (1, False, False, "ddp")
    assert found.checkpointing == checkpointing and found.checkpoint_every == k
    expected = None if checkpointing == "none" else {"world": 1, "sharded": False, "checkpointing": checkpointing,
                                                      "k": k}
    assert found.memory_shares() == expected
    assert Parallelism(world=2).replicated and not Parallelism(world=2, sharded=True).replicated


def test_no_module_but_the_spec_asks_which_parallelism_a_run_uses():
    """train.parallel is read by TrainSpec.sharded alone; a started run reads Parallelism."""
    root = Path(zoo.__file__).parent
    asking = re.compile(r"\.parallel\s*[!=]=")
    found = [str(path.relative_to(root)) for path in root.rglob("*.py") if asking.search(path.read_text())]
    assert found == ["specs/experiment.py"], found


def test_a_sweep_whose_sharded_cells_cannot_split_their_rows_is_refused_before_any_trains(tmp_path):
    from test_sweep import tiny_sweep

    from zoo.sweep import run_sweep

    sweep, base = tiny_sweep(tmp_path, {"model.norm": ["post", "pre"]})
    base["train"].update(parallel="fsdp", batch_size=32)
    with pytest.raises(zoo.ConfigError) as refused:
        run_sweep(sweep, base, processes_per_cell=3, echo=lambda _: None)
    assert str(refused.value).startswith("train.parallel fsdp: train.batch_size 32 does not divide over the 3 ranks")
    assert not (tmp_path / "tiny").exists(), "nothing ran, nothing was written"


def test_a_run_that_does_not_shard_never_imports_fsdp_dtensor_or_dcp():
    """They cost every process's start 0.7 s (the trainer's and each sweep cell's) when imported at
    the top of the trainer's modules; a sharded run imports them when it shards or saves."""
    import subprocess
    import sys

    heavy = ("torch.distributed.fsdp", "torch.distributed.tensor", "torch.distributed.checkpoint")
    program = f"import sys, zoo.cli, zoo.trainer.console; print([m for m in {heavy!r} if m in sys.modules])"
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300, check=True)
    assert done.stdout.strip() == "[]"


def test_a_k_written_without_a_mode_is_refused_even_at_its_default():
    """k 2 alone (the default's value) was accepted and read by nothing; an experiment written back
    in full holds the mode beside it and reads as it was."""
    with pytest.raises(zoo.ConfigError, match=r"train\.activation_checkpointing_k 2 is read only with "
                                              r"activation_checkpointing: every_k \(it is none, the default\)"):
        validate_experiment({"train": {"activation_checkpointing_k": 2}})
    dumped = validate_experiment({}).model_dump(mode="json")
    assert validate_experiment(dumped).train.activation_checkpointing_k == 2
    assert validate_experiment({"train": {"activation_checkpointing": "every_k", "activation_checkpointing_k": 2}})
