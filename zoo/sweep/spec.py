"""SweepSpec: a base experiment, a grid of dotted fields and a list of seeds, expanded into cells.

Every cell is one ExperimentSpec, validated before anything runs, so a bad grid value fails at
once with the grid key that holds it, not hours later in one cell.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Sequence

import yaml
from pydantic import Field, ValidationError, field_validator

from zoo.experiment import ExperimentSpec, Strict, assign, with_sets


class SweepSpec(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", description="the W&B group and the sweep's folder")
    base: str | dict[str, Any] = Field(default_factory=dict,
                                       description="an ExperimentSpec file (relative to the sweep file) or one inline")
    grid: dict[str, list[Any]] = Field(description="dotted experiment field -> the values to try")
    seeds: list[int] = Field(default_factory=lambda: [0], min_length=1)
    metric: str = "eval/exact_match"
    goal: Literal["max", "min"] = "max"
    target: float | None = Field(None, description="report steps and seconds until the metric reaches this")
    out_dir: str = Field("sweeps", description="the sweep's folder is OUT_DIR/NAME")

    @field_validator("grid")
    @classmethod
    def _grid_is_well_formed(cls, grid: dict[str, list[Any]]) -> dict[str, list[Any]]:
        if not grid:
            raise ValueError("a sweep needs at least one grid axis")
        for key, values in grid.items():
            if key.split(".")[0] not in ExperimentSpec.model_fields or "." not in key:
                raise ValueError(f"grid key {key!r} is not a dotted experiment field "
                                 f"(model.*, task.*, train.*, wandb.*)")
            if key == "train.seed":
                raise ValueError("grid key 'train.seed': list seeds under `seeds`, not in the grid")
            if not values or len({repr(v) for v in values}) != len(values):
                raise ValueError(f"grid key {key!r} needs a list of distinct values, got {values!r}")
        return grid

    def labels(self) -> dict[str, str]:
        """Short names of the grid keys: the last part (`norm`), or the whole key where two share it."""
        last = [key.rsplit(".", 1)[-1] for key in self.grid]
        return {key: short if last.count(short) == 1 else key for key, short in zip(self.grid, last)}

    def directory(self) -> Path:
        return Path(self.out_dir) / self.name


@dataclass(frozen=True)
class Cell:
    """One training run of the sweep: a value for every grid key, and a seed."""

    index: int
    assignment: tuple[tuple[str, Any], ...]
    seed: int
    variant: str
    """The grid values without the seed, e.g. `norm=pre,ffn=gelu`: what seeds are averaged over."""

    @property
    def name(self) -> str:
        return f"{self.variant},seed={self.seed}"


def value_text(value: Any) -> str:
    text = value if isinstance(value, str) else yaml.safe_dump(value, default_flow_style=True).strip()
    text = text.removesuffix("\n...").strip()
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", text)


def expand(sweep: SweepSpec) -> list[Cell]:
    """Every (grid values, seed), seeds outermost so that a partial sweep has whole seeds first."""
    labels, keys = sweep.labels(), list(sweep.grid)
    cells = []
    for seed in sweep.seeds:
        for values in itertools.product(*sweep.grid.values()):
            variant = ",".join(f"{labels[k]}={value_text(v)}" for k, v in zip(keys, values))
            cells.append(Cell(len(cells), tuple(zip(keys, values)), seed, variant))
    return cells


def shard(cells: Sequence[Cell], index: int, count: int) -> list[Cell]:
    """Shard `index` of `count` (0-based): every count-th cell, so the shards partition the cells."""
    if count < 1 or not 0 <= index < count:
        raise ValueError(f"--shard {index}/{count}: expected i/n with 0 <= i < n")
    return [cell for cell in cells if cell.index % count == index]


def cell_experiment(sweep: SweepSpec, base: dict[str, Any], cell: Cell) -> ExperimentSpec:
    """The cell's experiment: the base, the grid values and the seed, logged into the sweep's group."""
    data = ExperimentSpec.model_validate(base).model_dump(mode="json")
    for key, value in cell.assignment:
        assign(data, key, value, "grid ")
    folder, labels = sweep.directory(), sweep.labels()
    tags = [f"{labels[key]}={value_text(value)}" for key, value in cell.assignment]
    for key, value in (("train.seed", cell.seed), ("train.out_dir", str(folder / "runs")),
                       ("wandb.name", cell.name), ("wandb.group", sweep.name), ("wandb.job_type", "sweep"),
                       ("wandb.dir", str(folder)), ("wandb.tags", [*data.get("wandb", {}).get("tags", []), *tags])):
        assign(data, key, value)
    try:
        return ExperimentSpec.model_validate(data)
    except ValidationError as err:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors())
        raise ValueError(f"sweep {sweep.name!r}, cell {cell.name}: {problems}") from None


def load_sweep(path: str | Path, sets: Sequence[str] = ()) -> tuple[SweepSpec, dict[str, Any]]:
    """The SweepSpec of a file and its base experiment as data. `--set` keys that start with an
    experiment group (model, task, train, wandb) change the base; the others change the sweep."""
    path = Path(path)
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a sweep file holds a mapping, got {type(data).__name__}")
    base_sets = [s for s in sets if s.split("=", 1)[0].split(".")[0] in ExperimentSpec.model_fields]
    for assignment in (s for s in sets if s not in base_sets):
        key, sep, value = assignment.partition("=")
        if not sep or key.split(".")[0] not in SweepSpec.model_fields:
            raise ValueError(f"--set {assignment}: valid keys start with one of: "
                             + ", ".join([*ExperimentSpec.model_fields, *SweepSpec.model_fields]))
        node, parts = data, key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = yaml.safe_load(value)
    sweep = SweepSpec.model_validate(data)
    base = sweep.base
    if isinstance(base, str):
        candidates = [path.parent / base, Path(base)]
        found = next((c for c in candidates if c.is_file()), None)
        if found is None:
            raise ValueError(f"{path}: base {base!r} is not a file (looked in {path.parent} and the working directory)")
        base = yaml.safe_load(found.read_text(encoding="utf-8")) or {}
    base = with_sets(base, base_sets)
    ExperimentSpec.model_validate(base)
    return sweep, base
