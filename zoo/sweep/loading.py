"""A sweep file read and checked against the experiments its cells train, before anything runs:
its base and `--set` changes applied, then every variant's experiment built once and held to the
sweep's question (the metric each task reports, the margins), to distinct runs, and to a fit that
can result. `zoo sweep` and a resumed sweep read a folder's saved sweep (zoo.sweep.spec) instead."""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from zoo.errors import ConfigError, describe_validation
from zoo.metrics import by_comparison
from zoo.specs.experiment import ExperimentSpec, assign, parse_sets, validate_experiment
from zoo.specs.identity import RESUMABLE, flatten, identity
from zoo.specs.registries import describe_unknown
from zoo.specs.yamlio import read_mapping
from zoo.sweep.keys import check_comparisons_metric, kept_metrics
from zoo.sweep.names import assignment_text
from zoo.sweep.spec import NAMED, SIZE_KEYS, Cell, SweepSpec, cell_experiment, expand
from zoo.tasks import task_params


def load_sweep(path: str | Path, sets: Sequence[str] = ()) -> tuple[SweepSpec, dict[str, Any]]:
    """The SweepSpec of a file and its base experiment as data. `--set` keys that start with an
    experiment group (model, task, train, wandb) change the base; the others change the sweep."""
    path = Path(path)
    data = read_mapping(path, "sweep file")
    groups = sorted(set(ExperimentSpec.model_fields) & data.keys())
    if groups and not {"grid", *NAMED.values()} & data.keys():
        raise ConfigError(f"{path} is an experiment file (it has {', '.join(groups)}); train it with zoo train {path}, "
                          f"or sweep it by naming it as a sweep file's base: "
                          f"{{name: NAME, base: {path.name}, grid: {{model.norm: [post, pre]}}}}")
    base_sets = []
    for key, value in parse_sets(sets):
        if key.split(".")[0] in ExperimentSpec.model_fields:
            base_sets.append((key, value))
        else:
            assign(data, key, value, "--set ", [*SweepSpec.model_fields, *ExperimentSpec.model_fields])
    try:
        sweep = SweepSpec.model_validate(data)
    except ValidationError as err:
        raise ConfigError(f"{path}: {describe_validation(err)}") from None
    base = sweep.base
    if isinstance(base, str):
        candidates = [path.parent / base, Path(base)]
        found = next((c for c in candidates if c.is_file()), None)
        if found is None:
            raise ConfigError(f"{path}: base {base!r} is not a file (looked in {path.parent} and the working directory)")
        base = read_mapping(found, "base experiment")
    base = copy.deepcopy(base)
    for key, value in base_sets:
        assign(base, key, value, "--set ")
    validate_experiment(base, f"{path}: base")
    variants = variant_experiments(sweep, base)
    check_metric(sweep, base, variants)
    check_distinct(sweep, variants)
    check_fit_points(sweep, variants)
    return sweep, base


def variant_experiments(sweep: SweepSpec, base: dict[str, Any]) -> list[tuple[Cell, ExperimentSpec]]:
    """Every trained variant once (its cell of the first seed) and its experiment."""
    return [(cell, cell_experiment(sweep, base, cell)) for cell in expand(sweep) if cell.seed == sweep.seeds[0]]


def check_metric(sweep: SweepSpec, base: dict[str, Any],
                 variants: Sequence[tuple[Cell, ExperimentSpec]] | None = None) -> None:
    """The sweep's metric must be one that every cell's task reports at the end of a run, or
    one the comparison computes from them."""
    check_comparisons_metric(sweep.metric, sweep.tune, sweep.confirm_seeds)
    for cell, experiment in variant_experiments(sweep, base) if variants is None else variants:
        task = experiment.task
        cls, params = task_params(task)
        logged = kept_metrics(cls.final_metrics(params), experiment.train)
        for field, name in (("metric", None if by_comparison(sweep.metric) else sweep.metric),
                            ("choose_on", sweep.choose_on if sweep.tune else None)):
            if name is not None and name not in logged and not scored_downstream(str(name), experiment.train):
                raise ConfigError(f"sweep {sweep.name!r}: {field} {name!r} is not reported by task "
                                  f"{task['name']!r} in cell {cell.variant}; choices: {', '.join(logged)}")
        for name in sweep.margins:  # a margin of a metric no run reports would never be applied, in silence
            if name not in logged and not (by_comparison(name) and name == sweep.metric):
                raise ConfigError(f"sweep {sweep.name!r}: margins: "
                                  f"{describe_unknown('metric', name, logged).replace('unknown metric', 'metric')} "
                                  f"(what task {task['name']!r} reports in cell {cell.variant})")


def check_fit_points(sweep: SweepSpec, variants: Sequence[tuple[Cell, ExperimentSpec]]) -> None:
    """A fit asked for (fit:) needs 3 or more distinct points on its axis for each variant: sizes that
    differ in heads alone have one parameter count and one compute, so no law could be fitted and
    compare would say so only after every cell trained. Counted on the meta device, with a stand-in
    vocabulary (the same for every size, so it moves no two sizes together or apart)."""
    if sweep.fit is None:
        return
    from zoo.model.size_checks import exact_parameters

    sizes = [key for key in sweep.grid if key in SIZE_KEYS]
    groups: dict[str, dict[tuple, list[str]]] = {}
    for cell, experiment in variants:
        assignment = dict(cell.assignment)
        if any(assignment[key] in sweep.fit.check for key in sizes):
            continue
        t = experiment.train
        point = (exact_parameters(experiment.model.sized(1000, 1000), buffers=False),
                 *((t.steps, t.batch_size, t.batch_tokens, t.accumulate) if sweep.fit.against == "compute" else ()))
        rest = assignment_text(sweep.labels(), ((k, v) for k, v in cell.assignment if k not in sizes))
        size = assignment_text(sweep.labels(), ((k, v) for k, v in cell.assignment if k in sizes))
        groups.setdefault(rest, {}).setdefault(point, []).append(size)
    for rest, points in groups.items():
        if len(points) < 3:
            alike = next((names for names in points.values() if len(names) > 1), None)
            said = f"; {' and '.join(alike)} have one {sweep.fit.against} (they differ in heads, or nothing the law " \
                   "reads, alone)" if alike else ""
            raise ConfigError(f"sweep {sweep.name!r}: fit against {sweep.fit.against}: the sizes give {len(points)} "
                              f"distinct point(s){f' for {rest}' if rest else ''}, and a power law with an irreducible "
                              f"term needs 3 or more{said}")


def check_distinct(sweep: SweepSpec, variants: Sequence[tuple[Cell, ExperimentSpec]]) -> None:
    """Two variants that train the same run (two sizes or rows that define one model, a value and
    its default) would count one computation twice and report a difference of nothing: refused."""
    seen: dict[str, Cell] = {}
    for cell, experiment in variants:
        dumped = flatten(experiment.model_dump(mode="json"))  # a resume may change these, a sweep may sweep them
        fields = {**identity(experiment), **{key: dumped.get(key) for key in RESUMABLE if key != "train.out_dir"}}
        other = seen.setdefault(json.dumps(fields, sort_keys=True, default=str), cell)
        if other is cell:
            continue
        apart = [f"{NAMED[key][:-1]}s {a!r} and {b!r}" if key in NAMED else f"{key} {a!r} and {b!r}"
                 for (key, a), (_, b) in zip(other.assignment, cell.assignment, strict=True) if a != b]
        raise ConfigError(f"sweep {sweep.name!r}: variants {other.variant} and {cell.variant} train the same run (every "
                          f"field alike once defaults are filled in): {'; '.join(apart)} define one experiment, which "
                          "would count twice; make them differ, or drop one")


def scored_downstream(name: str, train) -> bool:
    """Whether `name` is a score of a task the runs' train.downstream names (downstream/TASK/METRIC,
    a filter between where the harness reports one): which metrics a task of the harness reports is
    its own YAML's to say, so the name is taken as given and the metric's registration decides."""
    parts = name.split("/")
    return train.downstream is not None and len(parts) >= 3 and parts[0] == "downstream" \
        and parts[1] in train.downstream.tasks
