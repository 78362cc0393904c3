"""`zoo coord-check`: whether every layer's activations keep their size as width grows (Yang et
al. 2022's coordinate check). The experiment's model, widened by one rule (zoo.specs.ladder),
trains a few steps at each width under each parametrization, on the same batches, at the
experiment's peak rate held constant (no warmup: the check is of the updates' size) and without
dropout. After every step each recorded module's output on the first step's batch is measured by
its mean absolute coordinate; its growth with width is the slope of log(size) against log(width)
after the last step.

Theory: under the standard parametrization Adam's updates grow a layer's output with its fan-in,
so the logits (and most layers) grow with width after a step; under muP nothing does. A module
whose slope passes `threshold` and whose size passes UNIT at the largest width is flagged as
growing, named with the part that computes it.
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

THRESHOLD = 0.3
"""The slope of log(size) against log(width) past which a module grows with width: under the
standard parametrization the logits' slope nears 1 after a few steps; under muP slopes stay near 0."""
UNIT = 1.0
"""The mean absolute coordinate of a unit-variance activation is about 0.8: a growing module must pass 1."""


@dataclass
class Coordinates:
    """One module's mean absolute coordinate, by step, at each width, under one parametrization."""

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

    def grows(self, parametrization: str) -> list[Coordinates]:
        """The modules whose size grows with width under `parametrization`."""
        return [row for row in self.rows if row.parametrization == parametrization and self.growing(row)]

    def diverged(self, parametrization: str) -> list[Coordinates]:
        """The modules whose output stopped being finite at some width: no slope, no verdict on width."""
        return [row for row in self.rows if row.parametrization == parametrization and self.not_finite(row)]

    def not_finite(self, row: Coordinates) -> list[int]:
        """The widths at which the module's last output was not finite (training diverged there)."""
        return [w for w in self.widths if not math.isfinite(row.sizes[w][-1])]

    def growing(self, row: Coordinates) -> bool:
        """A slope past the threshold, to a size past unit coordinates at the largest width: a module
        that stays below the unit scale that embeddings and norms hold is not blowing up, whatever
        its slope (Fixup's branches start at zero and grow as they learn, faster where wider). A
        module that diverged is said so, never called growing with width."""
        return (not self.not_finite(row) and not row.slope() <= self.threshold
                and not row.sizes[self.widths[-1]][-1] <= UNIT)

    def verdict(self, row: Coordinates) -> str:
        widths = self.not_finite(row)
        if widths:
            return f"diverged at d={', '.join(map(str, widths))}"
        return "grows" if self.growing(row) else "holds"

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


def trained_sizes(experiment: ExperimentSpec, spec: ModelSpec, task, steps: int,
                  batch_size: int) -> dict[str, tuple[str, list[float]]]:
    """Each recorded module's mean absolute output coordinate on the first batch after steps
    1 .. `steps` of training at the constant peak rate (constant_rate_steps)."""
    sizes: dict[str, list[float]] = {}
    modules: dict[str, nn.Module] = {}
    outputs: dict[str, list[float]] = {}  # a module called twice a forward (shared layers): each call
    for model, start, _ in constant_rate_steps(experiment, spec, task, steps, batch_size):
        if not modules:
            modules = recorded(model)
            sizes = {name: [] for name in modules}
        outputs.update({name: [] for name in modules})
        handles = [module.register_forward_hook(lambda _m, _i, out, name=name: outputs[name].append(
            float(first(out).abs().mean()))) for name, module in modules.items()]
        try:
            with torch.no_grad():
                model(*start.inputs, start.padding)
        finally:
            for handle in handles:
                handle.remove()
        for name, found in outputs.items():
            sizes[name].append(float(np.mean(found)) if found else math.nan)
    return {name: (parts_of(spec, module), sizes[name]) for name, module in modules.items()}


def coord_check(experiment: ExperimentSpec, widths: Sequence[int], steps: int = 4,
                parametrizations: Sequence[str] = PARAMETRIZATIONS, threshold: float = THRESHOLD,
                batch_size: int | None = None) -> CoordCheck:
    """Train the experiment's model (its d_model the base width) at each width for `steps` steps
    under each parametrization, and measure every recorded module's output at every step."""
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
    for parametrization in parametrizations:
        for width in widths:
            recipe = mup_at(base, width, base) if parametrization == "mup" else widened(base, width)
            spec = recipe.sized(len(task.src_vocab), len(task.tgt_vocab))
            for name, (part, sizes) in trained_sizes(experiment, spec, task, steps,
                                                     batch_size or experiment.train.batch_size).items():
                rows.setdefault((parametrization, name), Coordinates(parametrization, name, part)).sizes[width] = sizes
    return CoordCheck(widths, steps, threshold, list(rows.values()))


def coord_figure(check: CoordCheck):
    """One panel per parametrization: each module's size at the last step against width, log-log."""
    plt = pyplot()
    kinds = list(dict.fromkeys(row.parametrization for row in check.rows))
    fig, axes = plt.subplots(1, len(kinds), figsize=(6 * len(kinds), 4.5), squeeze=False, sharey=True)
    for panel, kind in zip(axes[0], kinds, strict=True):
        for row in (r for r in check.rows if r.parametrization == kind):
            panel.plot(check.widths, [row.sizes[w][-1] for w in check.widths], marker="o",
                       linestyle="--" if check.growing(row) else "-", label=row.module)
        panel.set(xscale="log", yscale="log", xlabel="d_model", title=f"{kind}: after step {check.steps}")
        panel.set_xticks(check.widths, [str(w) for w in check.widths])
        panel.set_xticks([], minor=True)
    axes[0][0].set_ylabel("mean |coordinate|")
    axes[0][-1].legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    return fig


def verdict_lines(check: CoordCheck) -> list[str]:
    out = []
    for kind in dict.fromkeys(row.parametrization for row in check.rows):
        grows, diverged = check.grows(kind), check.diverged(kind)
        said = [] if grows or diverged else ["every module holds its size"]
        if grows:
            said.append("grows with width: " + "; ".join(f"{r.module} ({r.part}, slope {r.slope():.2f})" for r in grows))
        if diverged:
            said.append(f"diverged (no verdict on width; lower the rate or take fewer steps): {len(diverged)} "
                        f"module(s), first {diverged[0].module} ({check.verdict(diverged[0])})")
        out.append(f"{kind}: " + "; ".join(said))
    return out


def write_coord_check(check: CoordCheck, folder: str | Path, command: str) -> list[Path]:
    """coord_check.md (the table and the verdicts) and coord_check.png, in `folder`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    picture = save_figure(coord_figure(check), folder / "coord_check.png")
    lines = ["# Coordinate check", "", f"`{command}`", "",
             f"Each module's mean absolute output coordinate on the first batch after {check.steps} steps at the "
             f"experiment's peak rate, at widths {', '.join(map(str, check.widths))}; slope: of log(size) against "
             f"log(width). A module grows where its slope passes {check.threshold} and its size passes {UNIT} at the "
             "largest width.", "", *(f"- {line}" for line in verdict_lines(check)), "",
             *markdown_table(*check.table()), "", f"![coordinate check]({picture.name})", ""]
    atomic_write(folder / "coord_check.md", "\n".join(lines))
    return [folder / "coord_check.md", picture]
