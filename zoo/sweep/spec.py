"""SweepSpec: a base experiment, a grid of dotted fields and a list of seeds, expanded into cells.

Named `rows` ask one-at-a-time questions (Narang et al. 2021's design: each modification against
one baseline): each row is a set of changes to the base, and the rows become the grid key `row`,
its first row the baseline every other is paired against. Named `sizes` become the grid key
`size` the same way. `tune` names settings every variant trains each value of, to be chosen per
variant on the validation split by `zoo compare` (zoo.compare.tuned) rather than compared.

Every cell is one ExperimentSpec, validated before anything runs, so a bad grid value fails at
once with the grid key that holds it, not hours later in one cell.
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, PositiveInt, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from zoo.errors import ConfigError, describe_validation
from zoo.files import inside_its_folder
from zoo.metric_names import MetricName
from zoo.metrics import COMPARISON_CHOOSES_ON, Resolved, by_comparison
from zoo.specs.experiment import ExperimentSpec, Seed, assign, validate_experiment, written_defaults
from zoo.specs.strict import Strict
from zoo.specs.switches import one_setting
from zoo.specs.yamlio import read_mapping
from zoo.sweep.keys import (
    check_field,
    check_tune,
    check_tuned_metrics,
    distinct,
    grid_clash,
    rate_keys,
    twice_set,
)
from zoo.sweep.names import SAFE, assignment_text, job_type, value_text
from zoo.sweep.token_ratio import check_steps_unset, ratio_steps

ROW, SIZE = "row", "size"
NAMED = {ROW: "rows", SIZE: "sizes"}
"""Grid keys whose values name sets of changes to the base, and the sweep field that defines them."""
SIZE_KEYS = (SIZE, "model.d_model", "model.n_layers", "model.n_encoder_layers", "model.n_decoder_layers",
             "model.n_heads", "model.d_ff")
"""Grid keys that are model sizes: named sizes, the width, the depth."""
MAX_CELLS = 10_000
"""Cells a sweep may have unless it says more: past this, a grid is more likely a mistake (a
12-key grid of millions) than a plan, and expanding it would take minutes and gigabytes."""
RESERVED_LABELS = ("seed", "variant")
"""Names every cell already carries (in its name and its W&B config): a grid key never shortens to one."""


PositiveFinite = Annotated[float, Field(gt=0, allow_inf_nan=False)]
"""A margin or a ratio: above 0 and a number."""


class FitSettings(Strict):
    """How `zoo compare` fits each variant's metric across the sweep's sizes (zoo.compare.scaling)."""

    against: Literal["compute", "parameters"] = Field(
        "compute", description="the law's variable: training FLOPs (compute), or parameters (at a token ratio the "
                               "sizes hold fixed)")
    extrapolate: float = Field(10.0, gt=1.0, allow_inf_nan=False,
                               description="the difference is carried to this multiple of the largest compute measured")
    check: list[Any] = Field(default_factory=list,
                             description="sizes (values of a size key) trained but left out of the fits, whose "
                                         "measurements are compared with what the fits predict there")


class SweepSpec(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", description="the W&B group and the sweep's folder")
    base: str | dict[str, Any] = Field(default_factory=dict,
                                       description="an ExperimentSpec file (relative to the sweep file) or one inline")
    grid: dict[str, list[Any]] = Field(default_factory=dict, description="dotted experiment field -> the values to try")
    seeds: list[Seed] = Field(default_factory=lambda: [0], min_length=1)
    rows: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="name -> {dotted experiment field: value}: changes to the base, swept as "
                                          "the grid key `row`; the first row (often {}) is the baseline")
    sizes: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="name -> {dotted experiment field: value}: a model size (width, heads, "
                                          "layers together), swept as the grid key `size`; zoo compare reports each "
                                          "axis's effect at each size and whether it holds across them")
    tune: dict[str, list[Any]] = Field(
        default_factory=dict, description="dotted experiment field -> values that every variant and seed trains; "
                                          "each variant's value is chosen on `choose_on` (validation), and the variants "
                                          "are compared on `metric` (a held-out split) at their chosen values")
    choose_on: str | None = Field(None, description="the validation metric that chooses a tuned value; "
                                                    "default: eval/NAME for a metric test/NAME")
    confirm_seeds: list[Seed] = Field(
        default_factory=list, description="fresh seeds on which each variant trains again at the value its tuning "
                                          "chose, once every tuning cell is done; zoo compare then compares the "
                                          "variants on these runs alone, so the seeds that chose never judge")
    metric: str = "eval/exact_match"
    goal: Literal["max", "min"] = Field(None, validate_default=False,
                                        description="default: min for a loss, max for anything else")
    target: float | None = Field(None, description="report steps and seconds until the metric reaches this "
                                  "(for eval_auc/X: until an evaluation of eval/X does)")
    margins: dict[str, Annotated[float, Field(gt=0, allow_inf_nan=False)]] = Field(
        default_factory=dict, description="metric -> equivalence margin: a difference inside ±margin counts as no "
                                          "difference, and zoo compare calls two values level only where two "
                                          "one-sided tests exclude the margin (TOST); without one, 'not separated' "
                                          "stays inconclusive")
    distinct: list[str] = Field(
        default_factory=list, description="grid keys whose values count as separate units in the other axes' tests "
                                          "even where those axes' paired differences correlate above 0.9 across them "
                                          "(correlated twins, which are otherwise one unit, their mean)")
    family: list[str] | None = Field(
        None, description="grid keys whose paired differences and two-way interactions make the primary family "
                          "(Holm's), the question the verdicts answer; default: every grid key but `size` (a ladder's "
                          "sizes are its design: their differences and interactions are reported as a family of "
                          "their own)")
    reuses: list[str] = Field(
        default_factory=list, description="sweeps whose runs this sweep declares it counts where its own runs are the "
                                          "same computations (seeded from their ledgers, or trained again to the same "
                                          "bits); a confirmatory comparison leaves such runs of any other sweep out")
    fit: FitSettings | None = Field(None, description="fit each variant's metric against compute across the sizes: "
                                                      "{against: compute | parameters, extrapolate: 10}; a sweep of "
                                                      "3 or more sizes is fitted with these defaults without it")
    rate_slope_margin: PositiveFinite | None = Field(
        None, description="decades the best learning rate may move per doubling of width and still hold: declared, "
                          "zoo compare fits each variant's best rate (per seed, on choose_on) against log2 width and "
                          "calls the rate held across widths only where two one-sided t-tests put the slope inside "
                          "±this; needs a tuned learning rate and two or more widths "
                          "(zoo.compare.sections.rate_transfer)")
    tokens_per_parameter: PositiveFinite | None = Field(
        None, description="train each cell on this many labels per non-embedding parameter of its model (Kaplan et "
                          "al.'s N; Chinchilla's ladders: about 20), so that a ladder's sizes train tokens in proportion "
                          "to their size: each cell's train.steps follows from its model, its rows packed to one "
                          "length (task.pack) (zoo.sweep.token_ratio); null: the steps the experiment gives")
    out_dir: str = Field("sweeps", description="the sweep's folder is OUT_DIR/NAME")
    max_cells: PositiveInt = Field(MAX_CELLS, description="the most cells (grid values times seeds) the sweep may "
                                                          "have; counted before the grid expands (--max-cells N)")

    @model_validator(mode="before")
    @classmethod
    def _goal_from_metric(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("goal") is None:
            data = {**data, "goal": Resolved.of(str(data.get("metric", "eval/exact_match"))).goal}
        if isinstance(data, dict) and data.get("tune") and data.get("choose_on") is None:
            metric = str(data.get("metric", "eval/exact_match"))
            data = {**data, "choose_on": COMPARISON_CHOOSES_ON if by_comparison(metric)
                    else str(MetricName.parse(metric).on("eval"))}
        return data

    def replace(self, **changes: Any) -> SweepSpec:
        """A copy with `changes`; another metric brings its own goal."""
        return super().replace(**({"goal": None} if "metric" in changes and "goal" not in changes else {}), **changes)

    @property
    def resolved_metric(self) -> Resolved:
        """`metric` parsed and resolved once: what it names, its direction and its bounds."""
        return Resolved.of(self.metric)

    @property
    def fit_settings(self) -> FitSettings:
        return self.fit or FitSettings()

    @model_validator(mode="after")
    def _a_fit_needs_sizes(self) -> SweepSpec:
        """A fit asked of fewer than three sizes, or of a metric that does not fall, fails before anything runs."""
        if self.fit is None:
            return self
        sizes = [key for key in self.grid if key in SIZE_KEYS]
        values = [value for key in sizes for value in self.grid[key]]
        unknown = [value for value in self.fit.check if value not in values]
        if unknown:
            raise ConfigError(f"fit.check: {unknown[0]!r} is not a size of the sweep; choices: "
                              f"{', '.join(map(str, values)) or '(none: the grid has no size key)'}")
        twice = next((value for i, value in enumerate(self.fit.check) if value in self.fit.check[:i]), None)
        if twice is not None:
            raise ConfigError(f"fit.check lists {twice!r} twice; a size is held out of the fits once")
        # the sizes the fits see: each size key's values but those held out, multiplied over the keys
        count = math.prod(len([v for v in self.grid[key] if v not in self.fit.check]) for key in sizes) if sizes else 1
        if count < 3:
            where = (f"grid key(s) {', '.join(sizes)} give {count}" + (" beside fit.check" if self.fit.check else "")
                     if sizes else "the grid has no size key")
            raise ConfigError(f"fit: a power law with an irreducible term needs 3 or more sizes; {where} (sizes:, or a "
                              f"grid over {', '.join(SIZE_KEYS[1:])})")
        if self.resolved_metric.goal != "min":
            raise ConfigError(f"fit: metric {self.metric!r} rises with compute (goal max); the law fits a metric that "
                              "falls towards a floor, such as test/loss")
        return self

    @model_validator(mode="after")
    def _a_rate_slope_needs_a_tuned_rate_and_widths(self) -> SweepSpec:
        """The slope of the best rate against width needs rates to choose from and widths to fit."""
        if self.rate_slope_margin is None:
            return self
        rates = rate_keys(self.tune)
        widths = {width for changes in self.sizes.values() for key, width in changes.items() if key == "model.d_model"}
        widths |= set(self.grid.get("model.d_model", []))
        if len(rates) != 1 or len(widths) < 2:
            said = (f"tune: names {len(rates)} learning rates ({', '.join(rates) or 'none'}), one is fitted"
                    if len(rates) != 1 else f"the sweep's sizes and grid give {len(widths)} width(s) (model.d_model)")
            raise ConfigError(f"rate_slope_margin: the best learning rate is fitted against width, which needs one "
                              f"tuned learning rate and two or more widths; {said}")
        return self

    @property
    def resolved_choose_on(self) -> Resolved | None:
        return None if self.choose_on is None else Resolved.of(self.choose_on)

    @model_validator(mode="after")
    def _goal_is_the_metrics(self) -> SweepSpec:
        """A goal against the metric's declared direction would rank the variants backwards."""
        declared = self.resolved_metric.goal
        if self.goal != declared:
            raise ConfigError(f"goal {self.goal}: metric {self.metric!r} is {declared} (better "
                              f"{'lower' if declared == 'min' else 'higher'}, as {self.resolved_metric.name.metric} "
                              "declares); leave goal out")
        return self

    @model_validator(mode="after")
    def _family_keys_are_grid_keys(self) -> SweepSpec:
        """A family key the grid lacks would test nothing: refused by name, with the choices."""
        unknown = [key for key in self.family or [] if key not in self.grid]
        if unknown or self.family == []:
            said = f"{unknown[0]!r} is not a grid key" if unknown else "it names no grid key"
            raise ConfigError(f"family: {said}; choices: {', '.join(self.grid)}")
        return self

    @property
    def primary_keys(self) -> list[str]:
        """The question's family of grid keys: `family`, else every key but the sizes (else all)."""
        if self.family is not None:
            return list(self.family)
        return [key for key in self.grid if key != SIZE] or list(self.grid)

    @model_validator(mode="after")
    def _reuses_names_other_sweeps(self) -> SweepSpec:
        """A sweep reuses runs of other sweeps, each named once."""
        if self.name in self.reuses or len(set(self.reuses)) != len(self.reuses):
            raise ConfigError(f"reuses: {self.reuses}: name other sweeps than {self.name!r}, each once")
        return self

    @model_validator(mode="after")
    def _distinct_keys_are_grid_keys(self) -> SweepSpec:
        """A key declared distinct that the grid lacks would keep nothing apart: refused by name."""
        unknown = [key for key in self.distinct if key not in self.grid]
        if unknown:
            raise ConfigError(f"distinct: {unknown[0]!r} is not a grid key; choices: {', '.join(self.grid)}")
        return self

    @field_validator("seeds")
    @classmethod
    def _distinct_seeds(cls, seeds: list[int]) -> list[int]:
        if len(set(seeds)) != len(seeds):
            raise ConfigError(f"seeds must be distinct, got {seeds}")
        return seeds

    @model_validator(mode="before")
    @classmethod
    def _named_in_the_grid(cls, data: Any) -> Any:
        """The rows' names lead the grid as its key `row`, the sizes' as `size` (written back as
        such: idempotent)."""
        if not isinstance(data, dict):
            return data
        grid, named = dict(data.get("grid") or {}), {}
        for key, field in NAMED.items():
            if isinstance(data.get(field), dict) and data[field]:
                names = list(data[field])
                if grid.setdefault(key, names) != names:
                    raise PydanticCustomError("named", "grid key '{key}' {given} is not the {field}' names {names}",
                                              {"key": key, "field": field, "given": grid[key], "names": names})
                named[key] = names
        return {**data, "grid": {**named, **{k: v for k, v in grid.items() if k not in named}}} if named else data

    @model_validator(mode="after")
    def _confirmation_is_fresh(self) -> SweepSpec:
        if not self.confirm_seeds:
            return self
        if not self.tune:
            raise ConfigError(f"confirm_seeds {self.confirm_seeds}: a sweep confirms the values it tuned; give tune: "
                              "too, or leave confirm_seeds out")
        if len(set(self.confirm_seeds)) != len(self.confirm_seeds):
            raise ConfigError(f"confirm_seeds must be distinct, got {self.confirm_seeds}")
        shared = sorted(set(self.confirm_seeds) & set(self.seeds))
        if shared:
            raise ConfigError(f"confirm_seeds {shared} are tuning seeds too (seeds {self.seeds}): a choice is "
                              "confirmed on seeds that did not make it; give fresh ones")
        return self

    @model_validator(mode="after")
    def _grid_is_well_formed(self) -> SweepSpec:
        if not self.grid:
            raise ConfigError("a sweep needs at least one grid axis or row")
        definitions = [(key, name, changes) for key in NAMED for name, changes in self.named(key).items()]
        check_tune(self.tune, self.grid, {f"{key} {name!r}": changes for key, name, changes in definitions})
        if self.tune:
            check_tuned_metrics(self.resolved_metric.name, self.resolved_choose_on.name)
        cells = math.prod(len(values) for values in self.axes().values()) * len(self.seeds)
        if cells > self.max_cells:
            sizes = " x ".join(str(len(values)) for values in self.axes().values())
            raise ConfigError(f"the grid has {cells:,} cells ({sizes} values x {len(self.seeds)} seed(s)), more than "
                              f"max_cells {self.max_cells:,}; raise the limit knowingly with --max-cells {cells} "
                              "(or max_cells: in the sweep file), or sweep fewer values")
        for key, values in self.grid.items():
            if key not in NAMED:
                check_field(key, f"grid key {key!r}")
            elif not self.named(key):
                raise ConfigError(f"grid key {key!r} {values!r} names {NAMED[key]}, but the sweep has no `{NAMED[key]}:` "
                                  f"defining them ({NAMED[key]}: {{NAME: {{FIELD: VALUE, ...}}, ...}})")
            if not values or not distinct(values):
                raise ConfigError(f"grid key {key!r} needs a list of distinct values, got {values!r}")
        keys = [key for key in self.grid if key not in NAMED]
        twice = twice_set(keys)
        if twice is not None:
            raise ConfigError(f"grid keys {twice[0]!r} and {twice[1]!r} set one setting (a switch's flat key and its "
                              "group's, or a group and a field of it): its cells would train what their names do not "
                              "say; give one of them")
        for named, name, changes in definitions:
            where = f"{named} {name!r}"
            if not SAFE.fullmatch(name):
                raise ConfigError(f"{where}: its name is part of folder names; use letters, digits, _ . + -")
            twice = twice_set(list(changes))
            if twice is not None:
                raise ConfigError(f"{where}: keys {twice[0]!r} and {twice[1]!r} set one setting (a switch's flat key "
                                  "and its group's, or a group and a field of it), and the one written last would win; "
                                  "give one of them")
            for key in changes:
                check_field(key, f"{where}: key {key!r}")
                also = grid_clash(key, keys)
                if also is not None:
                    raise ConfigError(f"{where}: key {key!r} is {also}; a field is set by one or the other")
        row_keys = {key for changes in self.rows.values() for key in changes}
        for name, changes in self.sizes.items():
            clash = next((key for key in changes for other in row_keys if one_setting(key, other)), None)
            if clash is not None:
                raise ConfigError(f"size {name!r}: key {clash!r} is set by a row too; a field is set by one or the other")
        return self

    def named(self, key: str) -> dict[str, dict[str, Any]]:
        """The definitions of a named grid key's values (rows, sizes); {} for any other key."""
        return getattr(self, NAMED[key]) if key in NAMED else {}

    def axes(self) -> dict[str, list[Any]]:
        """Every key a cell sets a value of: the grid's, then the tuned ones."""
        return {**self.grid, **self.tune}

    def labels(self) -> dict[str, str]:
        """Short names of the grid and tuned keys: the last part (`norm`), or the whole key where
        two share it or where it is a name the sweep gives every cell (`seed`, `variant`)."""
        axes = self.axes()
        last = [key.rsplit(".", 1)[-1] for key in axes]
        return {key: short if last.count(short) == 1 and short not in RESERVED_LABELS else key
                for key, short in zip(axes, last)}

    def directory(self) -> Path:
        return Path(self.out_dir) / self.name


@dataclass(frozen=True)
class Cell:
    """One training run of the sweep: a value for every grid key, and a seed."""

    index: int
    assignment: tuple[tuple[str, Any], ...]
    seed: int
    variant: str
    """The grid (and tuned) values without the seed, e.g. `norm=pre,ffn=gelu`: what seeds are averaged over."""

    @property
    def name(self) -> str:
        return f"{self.variant},seed={self.seed}"


def expand(sweep: SweepSpec) -> list[Cell]:
    """Every (grid values, seed), seeds outermost so that a partial sweep has whole seeds first.
    Two cells whose names would share a folder (even on a case-insensitive file system) are an error."""
    labels, axes = sweep.labels(), sweep.axes()
    keys, cells = list(axes), []
    for seed in sweep.seeds:
        for values in itertools.product(*axes.values()):
            variant = assignment_text(labels, zip(keys, values))
            cells.append(Cell(len(cells), tuple(zip(keys, values)), seed, variant))
    seen: dict[str, Cell] = {}
    for cell in cells:
        other = seen.setdefault(cell.name.casefold(), cell)
        if other is not cell:
            raise ConfigError(f"sweep {sweep.name!r}: cells {dict(other.assignment)} and {dict(cell.assignment)} "
                              f"would share the folder {cell.name!r}; make the grid values distinct in more than "
                              "letter case and type")
    return cells


def confirmation_cells(sweep: SweepSpec) -> list[Cell]:
    """Every cell a confirmation may train: each variant at each tuned value on each confirm seed
    (the chosen ones among them are trained: zoo.compare.confirm), indexed after the tuning cells."""
    if not sweep.confirm_seeds:
        return []
    tuning = len(expand(sweep))
    fresh = sweep.model_copy(update={"seeds": sweep.confirm_seeds, "confirm_seeds": []})
    return [replace(cell, index=tuning + cell.index) for cell in expand(fresh)]


def shard(cells: Sequence[Cell], index: int, count: int) -> list[Cell]:
    """Shard `index` of `count` (0-based): every count-th cell, so the shards partition the cells."""
    if count < 1 or not 0 <= index < count:
        raise ConfigError(f"--shard {index}/{count}: expected i/n with 0 <= i < n")
    return [cell for cell in cells if cell.index % count == index]


def cell_experiment(sweep: SweepSpec, base: dict[str, Any], cell: Cell) -> ExperimentSpec:
    """The cell's experiment: the base, the grid values and the seed, logged into the sweep's group."""
    data = {**written_defaults(), **copy.deepcopy(dict(base))}  # as written: a grid's preset replaces the base's
    if sweep.tokens_per_parameter is not None:
        check_steps_unset(data, "the base")
    for key, value in cell.assignment:
        for field, setting in (sweep.named(key)[value].items() if key in NAMED else [(key, value)]):
            # a copy: a later key setting a field inside this value must not change the sweep's own value
            assign(data, field, copy.deepcopy(setting), f"{key} {value!r}: " if key in NAMED else "grid ")
    if sweep.tokens_per_parameter is not None:
        check_steps_unset(data, f"cell {cell.name}'s values")
    folder, labels = sweep.directory(), sweep.labels()
    tags = [f"{labels[key]}={value_text(value)}" for key, value in cell.assignment]
    config = {labels[key]: value if isinstance(value, str | int | float | bool) else value_text(value)
              for key, value in cell.assignment}
    for key, value in (("train.seed", cell.seed), ("train.out_dir", str(folder / "runs")),
                       ("wandb.name", cell.name), ("wandb.group", sweep.name), ("wandb.job_type", job_type(cell)),
                       ("wandb.dir", str(folder)), ("wandb.tags", [*data.get("wandb", {}).get("tags", []), "sweep", *tags]),
                       ("wandb.config", {**config, "variant": cell.variant})):
        assign(data, key, value)
    experiment = validate_experiment(data, f"sweep {sweep.name!r}, cell {cell.name}")
    if sweep.tokens_per_parameter is None:
        return experiment
    assign(data, "train.steps", ratio_steps(experiment, sweep.tokens_per_parameter))
    return validate_experiment(data, f"sweep {sweep.name!r}, cell {cell.name}")


def read_saved_sweep(folder: Path) -> tuple[SweepSpec, dict[str, Any]]:
    """The sweep a folder's sweep.yaml records and its base experiment, which `zoo sweep` writes
    into it: a base that is only a file name (an edited or hand-written sweep.yaml) says nothing
    about the experiment the cells ran, so it is refused, naming the file."""
    saved = inside_its_folder(folder / "sweep.yaml", "a sweep's saved sweep.yaml")
    data = read_mapping(saved, "saved sweep")
    base = data.get("base") or {}
    if not isinstance(base, dict):
        raise ConfigError(f"{saved}: base {base!r} is not the base experiment itself; the sweep.yaml that `zoo sweep` "
                          "writes holds the whole base experiment, which the recorded cells ran")
    try:
        return SweepSpec.model_validate({**data, "base": {}}), base
    except ValidationError as err:
        raise ConfigError(f"{saved}: {describe_validation(err)}") from None
