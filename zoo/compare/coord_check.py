"""`zoo coord-check`: whether training's updates keep every layer's output change the same size as
width grows (Yang et al. 2022's coordinate check, of the update). The experiment's model, widened
by one rule (zoo.specs.ladder), trains a few steps at each width under each parametrization, on
the same batches, at the experiment's peak rate held constant (no warmup: the check is of the
updates' size) and without dropout, from `seeds` initializations. After every step each recorded
module's output on the first step's batch is compared with its output at initialization: the mean
absolute coordinate of the change, Δh, averaged over the seeds; its growth with width is the slope
of log(Δh) against log(width) after the last step.

Theory: under the standard parametrization Adam's updates change a layer's output in proportion
to its fan-in, so the logits' Δh grows as width^1; under muP no module's Δh grows or shrinks. The
threshold is calibrated on the standard parametrization's logits in the same check: half their
measured slope (CALIBRATION_SHARE), so the check asks "does a module move with width as the known
standard model's logits do, or half as much?" where they were measured; THRESHOLD where they were
not. A module whose slope passes the threshold grows with width; one below its negative
vanishes. Both are flagged, named with the part that computes them; the check fails (exit 1)
where a module grows or diverges under muP, the blow-up muP exists to prevent. A vanishing module
learns less the wider the model: under muP the logits' update does so at these widths (slope
-0.35 to -0.42 from d_model 32 to 256 for every part that does), since a readout initialized at
random moves the logits by W Δh, a term that falls as width^-1/2 until the readout's own update
dominates; it is flagged, not failed.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from zoo.compare.plots import pyplot
from zoo.compare.tables import markdown_table
from zoo.errors import ConfigError
from zoo.files import atomic_write, save_figure
from zoo.model.blocks import Block
from zoo.model.kinds import build
from zoo.model.stacks import Embedder, OutputProjection
from zoo.specs.experiment import ExperimentSpec, mup_optimizer_problem
from zoo.specs.ladder import mup_at, widened
from zoo.specs.model_spec import ModelSpec
from zoo.specs.parametrization import PARAMETRIZATIONS
from zoo.specs.registries import AXES, registry
from zoo.tasks import build_task
from zoo.trainer.feed import BatchFeed
from zoo.trainer.objective import auxiliary_loss, auxiliary_losses, batch_loss_sum
from zoo.trainer.optim import make_optimizer
from zoo.trainer.parallelism import Parallelism

THRESHOLD = 0.5
"""The slope past which a module's Δh grows (or, negated, vanishes) with width where the standard
parametrization was not measured alongside: half the slope theory gives its logits (1)."""
CALIBRATION_SHARE = 0.5
"""The threshold as a share of the standard parametrization's measured logit slope."""
SEEDS = 3
"""Initializations each width trains from; Δh is their mean (one seed's slope is noisy)."""


@dataclass
class Coordinates:
    """One module's mean absolute change of output since initialization (Δh), by step, at each
    width, under one parametrization, averaged over the seeds."""

    parametrization: str
    module: str
    part: str
    sizes: dict[int, list[float]] = field(default_factory=dict)
    """width -> the size at steps 1, 2, ..."""

    def slope(self, step: int = -1) -> float:
        """The least-squares slope of log(size) against log(width) at a step (the last by default)."""
        widths = sorted(self.sizes)
        sizes = [self.sizes[w][step] for w in widths]
        if min(sizes) <= 0 or not all(map(math.isfinite, sizes)):
            return math.inf if any(not math.isfinite(s) for s in sizes) else math.nan
        return float(np.polyfit(np.log(widths), np.log(sizes), 1)[0])


@dataclass
class CoordCheck:
    widths: list[int]
    steps: int
    threshold: float
    rows: list[Coordinates]
    seeds: int = 1
    calibration: str = "given"
    """How the threshold was set."""

    def parametrizations(self) -> list[str]:
        return list(dict.fromkeys(row.parametrization for row in self.rows))

    def grows(self, parametrization: str) -> list[Coordinates]:
        """The modules whose size grows with width under `parametrization`."""
        return [row for row in self.rows if row.parametrization == parametrization and self.growing(row)]

    def diverged(self, parametrization: str) -> list[Coordinates]:
        """The modules whose output stopped being finite at some width: no slope, no verdict on width."""
        return [row for row in self.rows if row.parametrization == parametrization and self.not_finite(row)]

    def not_finite(self, row: Coordinates) -> list[int]:
        """The widths at which the module's last output was not finite (training diverged there)."""
        return [w for w in self.widths if not math.isfinite(row.sizes[w][-1])]

    def vanishes(self, parametrization: str) -> list[Coordinates]:
        """The modules whose Δh shrinks with width under `parametrization`."""
        return [row for row in self.rows if row.parametrization == parametrization and self.vanishing(row)]

    def growing(self, row: Coordinates) -> bool:
        """A slope past the threshold; a module that diverged is said so, never called growing."""
        return not self.not_finite(row) and not row.slope() <= self.threshold

    def vanishing(self, row: Coordinates) -> bool:
        """A slope below minus the threshold: the module learns less the wider the model (muP's
        logits shrinking 4x under a wrong multiplier were once called steady)."""
        return not self.not_finite(row) and not row.slope() >= -self.threshold

    def verdict(self, row: Coordinates) -> str:
        widths = self.not_finite(row)
        if widths:
            return f"diverged at d={', '.join(map(str, widths))}"
        return "grows" if self.growing(row) else "vanishes" if self.vanishing(row) else "steady"

    def flagged(self, parametrization: str) -> bool:
        """Whether a module grows, vanishes or diverged under a parametrization."""
        return bool(self.failed(parametrization) or self.vanishes(parametrization))

    def failed(self, parametrization: str) -> bool:
        """What fails the check: a module that grows with width or diverged."""
        return bool(self.grows(parametrization) or self.diverged(parametrization))

    def table(self) -> tuple[list[str], list[list[str]]]:
        columns = ["parametrization", "module", "part", *(f"d={w}" for w in self.widths), "slope", "verdict"]
        rows = [[row.parametrization, row.module, row.part, *(f"{row.sizes[w][-1]:.4g}" for w in self.widths),
                 f"{row.slope():.3f}", self.verdict(row)] for row in self.rows]
        return columns, rows


def parts_of(spec: ModelSpec, module: nn.Module) -> str:
    """The registered part a recorded module is, by axis (`attention fused`), or what it is in the model."""
    for axis in AXES:
        part = registry(axis).get(getattr(spec, axis).name)
        if isinstance(module, part):
            return f"{axis} {getattr(spec, axis)}"
    if isinstance(module, Block):
        return f"block (norm {spec.norm}, norm_type {spec.norm_type})"
    if isinstance(module, Embedder):
        return f"embedding (position {spec.position})"
    if isinstance(module, OutputProjection):
        return "output logits"
    return type(module).__name__


def recorded(model: nn.Module) -> dict[str, nn.Module]:
    """The modules whose outputs are measured: each stack's embedding, every block, its attention and
    feed-forward, the final norm, and the logits."""
    out = {}
    for name, module in model.named_modules():
        last = name.rsplit(".", 1)[-1]
        if isinstance(module, (Embedder, Block, OutputProjection)) or last in ("self_attn", "cross_attn", "ffn") \
                or (last == "norm" and name.count(".") == 1 and not isinstance(module, nn.Identity)):
            out[name] = module
    return out


def first(output) -> Tensor:
    """A module's output tensor (attention returns its weights beside it)."""
    return (output[0] if isinstance(output, tuple) else output).detach().float()


def constant_rate_steps(experiment: ExperimentSpec, spec: ModelSpec, task, steps: int, batch_size: int):
    """Train `spec` (built from the experiment's seed) `steps` steps at the experiment's peak rate
    held constant, on the task's batches; yield (model, first batch, the step's loss) after each step."""
    model = build(spec, seed=experiment.train.seed).train()
    optimizer = make_optimizer(model, experiment.train)
    feed = BatchFeed(task, batch_size, spec, Parallelism(), torch.device("cpu"))
    aux = auxiliary_losses(model)
    (start,) = feed.take(1)
    for step in range(1, steps + 1):
        (batch,) = feed.take(step) if step > 1 else (start,)
        loss = batch_loss_sum(model, model.generator, batch, spec.pad_id, experiment.train,
                              contextlib.nullcontext()) / batch.tokens
        extra = auxiliary_loss(aux)
        (loss if extra is None else loss + extra).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        yield model, start, float(loss.detach())


def module_outputs(model: nn.Module, modules: dict[str, nn.Module], batch) -> dict[str, list[Tensor]]:
    """Each recorded module's outputs on the batch, one per call (shared layers are called twice)."""
    outputs: dict[str, list[Tensor]] = {name: [] for name in modules}
    handles = [module.register_forward_hook(lambda _m, _i, out, name=name: outputs[name].append(first(out)))
               for name, module in modules.items()]
    try:
        with torch.no_grad():
            model(*batch.inputs, batch.padding, **batch.model_inputs())
    finally:
        for handle in handles:
            handle.remove()
    return outputs


def trained_sizes(experiment: ExperimentSpec, spec: ModelSpec, task, steps: int,
                  batch_size: int) -> dict[str, tuple[str, list[float]]]:
    """Each recorded module's Δh on the first batch after steps 1 .. `steps` of training at the
    constant peak rate (constant_rate_steps): the mean absolute coordinate of its output minus its
    output at initialization, both in training mode (an MoE's capacity buffers route otherwise in
    evaluation, which alone would read as a change)."""
    model = build(spec, seed=experiment.train.seed).train()  # as constant_rate_steps builds it
    modules = recorded(model)
    batch = BatchFeed(task, batch_size, spec, Parallelism(), torch.device("cpu")).take(1)[0]
    initial = module_outputs(model, modules, batch)
    sizes = {name: [] for name in modules}
    for trained, start, _ in constant_rate_steps(experiment, spec, task, steps, batch_size):
        now = module_outputs(trained, recorded(trained), start)
        for name in modules:
            changes = [float((after - before).abs().mean()) for after, before in zip(now[name], initial[name])]
            sizes[name].append(float(np.mean(changes)) if changes else math.nan)
    return {name: (parts_of(spec, module), sizes[name]) for name, module in modules.items()}


def coord_check(experiment: ExperimentSpec, widths: Sequence[int], steps: int = 4,
                parametrizations: Sequence[str] = PARAMETRIZATIONS, threshold: float | None = None,
                batch_size: int | None = None, seeds: int = SEEDS) -> CoordCheck:
    """Train the experiment's model (its d_model the base width) at each width for `steps` steps
    under each parametrization from `seeds` initializations, and measure every recorded module's
    Δh at every step; the threshold, unless given, calibrated (calibrated_threshold)."""
    widths = sorted(set(widths))
    if len(widths) < 3:
        raise ConfigError(f"--widths {' '.join(map(str, widths))}: a growth with width needs at least 3 widths "
                          "(4 or more for a clear slope)")
    unknown = [p for p in parametrizations if p not in PARAMETRIZATIONS]
    if unknown:
        raise ConfigError(f"parametrization {unknown[0]!r}; choices: {', '.join(PARAMETRIZATIONS)}")
    problem = mup_optimizer_problem(experiment.train.optimizer.name) if "mup" in parametrizations else None
    if problem:
        raise ConfigError(f"{problem} (or check the standard parametrization alone: --parametrization standard)")
    base = experiment.model.replace(dropout=0.0, parametrization="standard", mup_base_width=None,
                                    mup_base_head_width=None)
    task = build_task(experiment.task, experiment.train.seed)
    rows: dict[tuple[str, str], Coordinates] = {}
    first_seed = experiment.train.seed
    for parametrization in parametrizations:
        for width in widths:
            recipe = mup_at(base, width, base) if parametrization == "mup" else widened(base, width)
            spec = recipe.sized(len(task.src_vocab), len(task.tgt_vocab))
            per_seed = [trained_sizes(experiment.model_copy(update={"train": experiment.train.replace(seed=seed)}),
                                      spec, task, steps, batch_size or experiment.train.batch_size)
                        for seed in range(first_seed, first_seed + seeds)]
            for name, (part, _) in per_seed[0].items():
                mean = [float(np.mean(values)) for values in zip(*(found[name][1] for found in per_seed))]
                rows.setdefault((parametrization, name), Coordinates(parametrization, name, part)).sizes[width] = mean
    check = CoordCheck(widths, steps, THRESHOLD if threshold is None else threshold, list(rows.values()), seeds)
    if threshold is None:
        check.threshold, check.calibration = calibrated_threshold(check)
    return check


def calibrated_threshold(check: CoordCheck) -> tuple[float, str]:
    """Half the standard parametrization's measured logit slope, where it was measured and grows;
    else THRESHOLD. Returns the threshold and how it was set."""
    logits = [row for row in check.rows if row.parametrization == "standard" and row.part == "output logits"]
    slopes = [row.slope() for row in logits if not check.not_finite(row)]
    if slopes and all(math.isfinite(s) and s > 0 for s in slopes):
        measured = float(np.mean(slopes))
        return CALIBRATION_SHARE * measured, (f"half the standard parametrization's logit slope measured here "
                                              f"({measured:.2f})")
    return THRESHOLD, f"{THRESHOLD}, half the slope theory gives the standard parametrization's logits (1)"


def coord_figure(check: CoordCheck):
    """One panel per parametrization: each module's Δh at the last step against width, log-log."""
    plt = pyplot()
    kinds = list(dict.fromkeys(row.parametrization for row in check.rows))
    fig, axes = plt.subplots(1, len(kinds), figsize=(6 * len(kinds), 4.5), squeeze=False, sharey=True)
    for panel, kind in zip(axes[0], kinds, strict=True):
        for row in (r for r in check.rows if r.parametrization == kind):
            panel.plot(check.widths, [row.sizes[w][-1] for w in check.widths], marker="o",
                       linestyle="--" if check.growing(row) or check.vanishing(row) else "-", label=row.module)
        panel.set(xscale="log", yscale="log", xlabel="d_model", title=f"{kind}: after step {check.steps}")
        panel.set_xticks(check.widths, [str(w) for w in check.widths])
        panel.set_xticks([], minor=True)
    axes[0][0].set_ylabel("mean |Δh| since initialization")
    axes[0][-1].legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    return fig


NEXT_STEP = ("next: train at the base width with model.parametrization=mup, tune the learning rate there, and "
             "reuse it at every wider model (experiments/mup_transfer.yaml does both)")
"""What a passing check leads to: muP's point is that the rate tuned small transfers."""


def verdict_lines(check: CoordCheck) -> list[str]:
    out = []
    for kind in dict.fromkeys(row.parametrization for row in check.rows):
        grows, vanishes, diverged = check.grows(kind), check.vanishes(kind), check.diverged(kind)
        said = [] if check.flagged(kind) else ["every module's update keeps its size across widths"]
        if grows:
            said.append("grows with width: " + "; ".join(f"{r.module} ({r.part}, slope {r.slope():.2f})" for r in grows))
        if vanishes:
            said.append("vanishes with width: " + "; ".join(f"{r.module} ({r.part}, slope {r.slope():.2f})"
                                                           for r in vanishes))
        if diverged:
            said.append(f"diverged (no verdict on width; lower the rate or take fewer steps): {len(diverged)} "
                        f"module(s), first {diverged[0].module} ({check.verdict(diverged[0])})")
        out.append(f"{kind}: " + "; ".join(said))
    if "mup" in check.parametrizations() and not check.failed("mup"):
        out.append(NEXT_STEP)
    return out


def write_coord_check(check: CoordCheck, folder: str | Path, command: str) -> list[Path]:
    """coord_check.md (the table and the verdicts) and coord_check.png, in `folder`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    picture = save_figure(coord_figure(check), folder / "coord_check.png")
    lines = ["# Coordinate check", "", f"`{command}`", "",
             f"Each module's update: the mean absolute change of its output on the first batch since "
             f"initialization (Δh) after {check.steps} steps at the experiment's peak rate, the mean over {check.seeds} "
             f"seed(s), at widths {', '.join(map(str, check.widths))}; slope: of log(Δh) against log(width). A module "
             f"grows where its slope passes {check.threshold:.3g} and vanishes where it is below {-check.threshold:.3g} "
             f"(the threshold: {check.calibration}).", "", *(f"- {line}" for line in verdict_lines(check)), "",
             *markdown_table(*check.table()), "", f"![coordinate check]({picture.name})", ""]
    atomic_write(folder / "coord_check.md", "\n".join(lines))
    return [folder / "coord_check.md", picture]
