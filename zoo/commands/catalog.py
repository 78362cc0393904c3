"""The commands that show what the zoo holds: `zoo list` (presets, every axis's parts, tasks,
optimizers, schedules, metrics and corpus formats), `zoo show` (a variant's resolved spec, or a
registered choice's settings, their defaults and what they mean) and `zoo build-all` (every
combination built and run once)."""

from __future__ import annotations

import argparse
import fnmatch
import inspect
import itertools
import time
import typing
from collections.abc import Sequence
from typing import Any

from zoo.commands import Command, add_sets, register
from zoo.errors import ConfigError
from zoo.specs.catalog import (
    base_widths,
    entering,
    following_width,
    list_variants,
    merge_fields,
    name_fields,
    preset_chain,
    preset_description,
    recipe,
    resolve,
)
from zoo.specs.choices import part_text, settings_model, settings_text
from zoo.specs.experiment import assign, parse_sets
from zoo.specs.model_spec import ModelSpec
from zoo.specs.registries import AXES, FORMAT, METRIC, NAMED_AXES, RECIPE, TASKS, registry

SHOWN_KINDS = (*RECIPE, TASKS, METRIC, FORMAT, *AXES)
"""What `zoo show KIND NAME` can show."""
WHERE = {"optimizer": "train.optimizer", "schedule": "train.schedule", TASKS: "task", METRIC: "eval/NAME, test/NAME",
         FORMAT: "task.format"}


def recipe_lines() -> list[str]:
    """`zoo list`'s lines of the training recipe's choices: each name with its settings' defaults."""
    lines = []
    for kind in RECIPE:
        lines += [f"\n{kind}s ({WHERE[kind]}; a mapping {{name: ..., setting: value}} sets its settings):",
                  *(f"  {part_text(kind, name)}" for name in registry(kind).names())]
    return lines


def choice_text(kind: str, name: str) -> str:
    """A registered choice's description, then each setting with its type, default and meaning."""
    if kind not in SHOWN_KINDS:
        raise ConfigError(f"zoo show {kind} {name}: {kind!r} is not a kind of registered choice; "
                          f"choices: {', '.join(SHOWN_KINDS)}")
    found = registry(kind).get(name)
    doc = inspect.getdoc(found) or ""
    lines = [f"# {kind} {name} ({WHERE.get(kind, 'model.' + kind)}): {' '.join(doc.split())}"]
    if kind == METRIC:
        scorer = found.scorer(found.Settings())
        lines += [f"# {metric_text(name)}", *([f"# scored by sacrebleu: {scorer}"] if scorer else [])]
    if kind == FORMAT:
        return "\n".join([*lines, f"# files: {format_files(name)}"])
    model = found.Params if kind == TASKS else settings_model(found)
    if not model.model_fields:
        return "\n".join([*lines, "# no settings"])
    lines.append(f"# settings (default; meaning){f', in train.metrics.{name}' if kind == METRIC else ''}:")
    for key, field in model.model_fields.items():
        default = "required" if field.is_required() else repr(field.get_default(call_default_factory=True))
        choices = literal_choices(field.annotation)
        said = "; ".join(part for part in (field.description, choices and f"choices: {', '.join(map(repr, choices))}") if part)
        lines.append(f"{key}: {default}" + (f"  # {said}" if said else ""))
    return "\n".join(lines)


def literal_choices(annotation) -> list:
    """The values a Literal setting takes (within an Optional or a union too); [] for any other."""
    if typing.get_origin(annotation) is typing.Literal:
        return list(typing.get_args(annotation))
    return [value for arg in typing.get_args(annotation) for value in literal_choices(arg)]


def format_files(name: str) -> str:
    """The files a corpus format reads for one split, each maybe gzipped."""
    return " and ".join(f"SPLIT{file[5:]}[.gz]" for file in registry(FORMAT).get(name).names("SPLIT", "SRC", "TGT"))


def metric_text(name: str) -> str:
    """Which way a metric improves, its range, and which tasks report it."""
    metric = registry(METRIC).get(name)
    low, high = metric.bounds
    span = f"{low:g} to {high:g}".replace("inf", "∞")
    tasks = [task for task in registry(TASKS).names() if name in registry(TASKS).get(task).metrics()]
    if tasks:
        by = f"reported by {', '.join(tasks)}"
    elif "downstream" in metric.needs:
        by = "scored by lm-evaluation-harness for a task of train.downstream (downstream/TASK/NAME)"
    else:
        by = "computed by zoo compare over a tuned sweep's runs"
    return f"{'lower' if metric.goal == 'min' else 'higher'} is better, {span}; {by}"


def task_metrics_text(task) -> str:
    """The metrics a run of the task reports with its default settings (defaults alone: a task's
    required settings, such as a corpus folder, decide no metric); optional splits add theirs."""
    return ", ".join(task.final_metrics(task.Params.model_construct()))


def model_sets(sets: Sequence[str]) -> dict[str, Any]:
    """`--set` for commands that take a model alone (`show`, `build-all`): keys are ModelSpec
    fields, with or without a leading `model.`, parsed as `zoo train` parses its own."""
    fields: dict[str, Any] = {}
    for key, value in parse_sets(sets):
        assign(fields, key.removeprefix("model."), value, "--set ", [*ModelSpec.model_fields, "vocab_size", "preset"])
    return fields


PLACEHOLDER_VOCABULARY = 32000
"""The vocabulary `zoo show` assumes where none is given (a common BPE size), and says so."""


@register("list", 10)
class ListCommand(Command):
    """list presets and the registered parts of every axis"""

    def run(self, args: argparse.Namespace) -> None:
        for name in list_variants(args.pattern):
            print(f"{name:20s} {preset_description(name)}")
        later = [axis for axis in AXES if axis not in NAMED_AXES]
        print(f"\naxes (any combination is a canonical name: {'.'.join(NAMED_AXES)}, then {', '.join(later)} "
              "where not at its default; a part's non-default settings follow it as +key=value):")
        for axis in AXES:
            print(f"  {axis:10s} {', '.join(part_text(axis, name) for name in registry(axis).names())}")
        print("\ntasks (task.name) and the final metrics a run reports, which a sweep can rank by:")
        for name in registry("task").names():
            task = registry("task").get(name)
            print(f"  {name:16s} {task_metrics_text(task)}")
        print("\n".join(recipe_lines()))
        print("\ncorpus formats (task.format; auto: the first whose files exist):")
        for name in registry(FORMAT).names():
            print(f"  {name:15s} {format_files(name)}")
        print("\nmetrics (eval/NAME, test/NAME, eval_auc/NAME; zoo show metric NAME):")
        for name in registry(METRIC).names():
            print(f"  {name:15s} {metric_text(name)}")

    def add_args(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("pattern", nargs="?", default="*", help="fnmatch pattern over preset names")


@register("show", 20)
class ShowCommand(Command):
    """print the resolved spec of a preset or canonical name"""

    def run(self, args: argparse.Namespace) -> None:
        from zoo.model.size_checks import exact_parameters

        if args.choice is not None:
            print(choice_text(args.name, args.choice))
            return

        sets = model_sets(args.set)
        if "preset" in sets:
            raise ConfigError(f"zoo show {args.name} --set preset={sets['preset']}: the variant is the name already; "
                              f"show the other one as zoo show {sets['preset']}")
        named, sets = name_fields(args.name), entering(sets)
        written = recipe(merge_fields(named, sets))
        placeholder = None if written.src_vocab_size and written.tgt_vocab_size else PLACEHOLDER_VOCABULARY
        spec = written.sized(PLACEHOLDER_VOCABULARY, PLACEHOLDER_VOCABULARY)
        if args.name in list_variants():
            print(f"# preset {' -> '.join(preset_chain(args.name))}: {preset_description(args.name)}")
        if placeholder:
            print(f"# vocabulary: none given, so a placeholder of {placeholder:,} tokens on each side; the parameter count "
          "and the vocabulary sizes below are for it (--set vocab_size=N for yours)")
        print(f"# canonical name: {spec.name}")
        print(f"# parameters: {exact_parameters(spec, buffers=False):,d}")
        scaled = following_width(named, sets)
        if scaled:
            width, inner = base_widths(named)
            print(f"# d_ff: {scaled['d_ff']}, d_model {spec.d_model} times {args.name}'s ratio ({inner} at d_model "
                  f"{width}), since only d_model was given (--set d_ff=N for another)")
        if spec.d_ff == "auto":
            print(f"# d_ff: auto = {spec.ffn_width} for ffn {spec.ffn.name}")
        for axis, choice in spec.axes().items():
            if type(choice.settings).model_fields:
                print(f"# {axis} {choice.name} settings: {settings_text(choice.settings)}")
        print(spec.to_yaml(), end="")

    def add_args(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("name", help="a preset or canonical name; or a kind (optimizer, schedule, task, an axis) ...")
        parser.add_argument("choice", nargs="?", help="... and a registered name of it: zoo show optimizer adafactor")
        add_sets(parser, "ModelSpec fields, e.g. --set vocab_size=8000 d_model=256", "KEY=VALUE")


BUILD_ALL_SIZE = {"vocab_size": 64, "d_model": 32, "n_heads": 4, "n_kv_heads": 2, "d_ff": 64, "n_encoder_layers": 1,
          "n_decoder_layers": 2}
"""build-all's default size: every combination checked in seconds; sizes of a preset by --set."""


DEFAULT_NORM_TYPE = ModelSpec.model_fields["norm_type"].default


def combination_names(combo: tuple[str, ...]) -> tuple[str, ...]:
    """The parts joined in axis order, and the canonical name's form where norm_type is its
    default and so left out (`pre.rope.fused.relu`)."""
    joined = ".".join(combo)
    return (joined, ".".join(combo[:-1])) if combo[-1] == DEFAULT_NORM_TYPE else (joined,)


def part_combinations(only: str = "*") -> list[tuple[str, ...]]:
    """Every registered combination of the axes' parts whose name `only` matches (a glob)."""
    return [combo for combo in itertools.product(*(registry(axis).names() for axis in AXES))
            if any(fnmatch.fnmatchcase(name, only) for name in combination_names(combo))]


@register("build-all", 30)
class BuildAllCommand(Command):
    """build and run every registered combination, at a small size unless --set says otherwise"""

    def run(self, args: argparse.Namespace) -> None:
        """Build every registered combination, run one forward pass, print its name and size."""
        import torch

        from zoo.model.kinds import build

        overrides = {**BUILD_ALL_SIZE, **model_sets(args.set)}
        combos = part_combinations(args.only)
        if not combos:
            raise ConfigError(f"build-all: --only {args.only!r} matches no combination of {'.'.join(AXES)} (nor a "
                              f"canonical name, which leaves out norm_type {DEFAULT_NORM_TYPE!r}), e.g. "
                              "'pre.rope.fused.relu' or '*.moe.*'")
        sizes = ", ".join(f"{k} {v}" for k, v in overrides.items())
        print(f"{len(combos)} combinations of {', '.join(AXES)} on preset {args.preset} ({sizes})")
        src = torch.tensor([[5, 6, 7, 8, 2, 0], [9, 10, 11, 12, 13, 2]])
        tgt = torch.tensor([[1, 8, 7, 6, 5, 2], [1, 13, 12, 11, 10, 9]])
        start = time.perf_counter()
        for combo in combos:
            spec = resolve({"preset": args.preset, **dict(zip(AXES, combo))}, **overrides)
            model = build(spec, seed=0).eval()
            with torch.no_grad():
                logits = model(src.clamp(max=spec.src_vocab_size - 1), tgt.clamp(max=spec.tgt_vocab_size - 1))
            if not torch.isfinite(logits).all():
                raise SystemExit(f"zoo: {spec.name} produced non-finite logits")
            print(f"{spec.axes_name:36s} {model.num_parameters():>12,d} parameters")  # the sizes' switches are on line 1
        print(f"built and ran {len(combos)} models in {time.perf_counter() - start:.1f} s")

    def add_args(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--preset", default="vaswani2017", help="sizes and options for every combination")
        parser.add_argument("--only", default="*", metavar="GLOB",
                            help="only the combinations whose parts, joined by dots in axis order (norm_type too), "
                            "match, e.g. '*.moe.*'")
        add_sets(parser, "ModelSpec fields for every combination (default: "
                 + " ".join(f"{k}={v}" for k, v in BUILD_ALL_SIZE.items()) + "), e.g. --set d_model=512", "KEY=VALUE")
