"""A sharded checkpoint (train.parallel fsdp) made whole in one process: `zoo consolidate` writes it
as one checkpoint file, the kind every other command reads, with the optimizer's state gathered too."""

from __future__ import annotations

from pathlib import Path

from zoo.errors import CheckpointError
from zoo.model.kinds import build
from zoo.specs.experiment import validate_experiment
from zoo.specs.model_spec import ModelSpec
from zoo.trainer.checkpoint import read_checkpoint, save_checkpoint
from zoo.trainer.optim import make_optimizer, make_schedule
from zoo.trainer.sharded_checkpoint import gather_whole


def consolidate(path: str | Path, out: str | Path | None = None) -> Path:
    """Read every shard of `path` into a whole model and its optimizer and write them, with the rest
    of the checkpoint, to `out` (default: checkpoint.pt beside the folder); the file written."""
    path = Path(path)
    state = read_checkpoint(path)
    if "sharded" not in state:
        raise CheckpointError(f"{path}: a whole checkpoint already (zoo consolidate reads the folder of shards that "
                              "train.parallel fsdp writes, checkpoint.dcp)")
    out = Path(out) if out is not None else path.with_name("checkpoint.pt")
    if out.resolve() == path.resolve():
        raise CheckpointError(f"{out}: would replace the sharded checkpoint it is made from; name another file")
    model = build(ModelSpec.model_validate(state["spec"]), seed=0)
    train = validate_experiment(state["experiment"], f"{path}'s experiment").train
    optimizer = make_optimizer(model, train)
    make_schedule(optimizer, train)  # its groups as the run's: each with the initial rate its schedule added
    gather_whole(state["sharded"], model, optimizer)  # where it lies (set aside by a crash mid-save)
    rest = {key: value for key, value in state.items() if key not in ("sharded", "world_size", "format")}
    rest["progress"] = state["progress"].model_dump()
    save_checkpoint(out, {**rest, "model": model.state_dict(), "optimizer": optimizer.state_dict()})
    return out
