"""Learning-rate schedules, registered by name as parts are: each gives the multiplier of the peak
rate after the warmup (a linear ramp over train.warmup_steps that every schedule shares), from its
own typed settings. `train.schedule: cosine`, or `{name: wsd, decay_fraction: 0.2}`."""

from __future__ import annotations

import math
from typing import ClassVar, Literal

from pydantic import Field

from zoo.specs.choices import PartSettings
from zoo.specs.registries import registry

register = registry("schedule").register


SCANNED = 10_000
"""Runs of at most this many steps have every step's rate looked at by Schedule.untrained."""


class Schedule:
    """A registered schedule: `Settings`, and the multiplier at a step after the warmup."""

    Settings: ClassVar[type[PartSettings]] = PartSettings

    @classmethod
    def after_warmup(cls, settings: PartSettings, step: int, warmup: int, steps: int) -> float:
        raise NotImplementedError

    @classmethod
    def rate(cls, settings: PartSettings, step: int, warmup: int, steps: int) -> float:
        """The multiplier of the peak rate at a 1-based step: the warmup's ramp, then the schedule's."""
        return step / warmup if step <= warmup else cls.after_warmup(settings, step, warmup, steps)

    @classmethod
    def untrained(cls, name: str, settings: PartSettings, warmup: int, steps: int) -> str | None:
        """Why a run would train at rate 0 at every step, or None: each step takes the rate the
        schedule gives it at its end, so a 1-step run of a schedule that ends at 0 has its only step
        at 0 (it trained on nothing). Refused when the experiment is validated (the spec asks the
        registered class, as it asks an optimizer whether muP suits it). Scanned from the first
        step, which has a rate above 0 in every other run: the scan stops there."""
        if steps > SCANNED or not all(cls.rate(settings, step, warmup, steps) == 0 for step in range(1, steps + 1)):
            return None
        return (f"train.schedule {name}: every one of the {steps} step(s) would train at rate 0 (each step takes the "
                "schedule's rate at its end, and this schedule ends at 0); train more steps, set its min_ratio above 0, "
                "or use constant")


def progress(step: int, warmup: int, steps: int) -> float:
    """How far past the warmup a step is, from 0 to 1 at the last step."""
    return min(1.0, (step - warmup) / max(1, steps - warmup))


def multiplier(schedule, step: int, warmup: int, steps: int) -> float:
    """The multiplier of the peak rate at a 1-based step (Schedule.rate of the schedule chosen)."""
    return registry("schedule").get(schedule.name).rate(schedule.settings, step, warmup, steps)


def schedule_problems(schedule, warmup: int, steps: int) -> list[str]:
    """What a run's rates do that its settings hardly mean: a warmup past the last step (the rate
    never reaches its peak). The run still trains as asked; this is a warning."""
    if warmup > steps:
        return [f"train.warmup_steps {warmup} is past train.steps {steps}: the rate never reaches its peak, at most "
                f"{steps / warmup:.2g} of optimizer.lr; lower warmup_steps"]
    return []


@register("constant")
class Constant(Schedule):
    """The peak rate to the end."""

    @classmethod
    def after_warmup(cls, settings, step, warmup, steps):
        return 1.0


@register("inverse_sqrt")
class InverseSqrt(Schedule):
    """Proportional to 1/sqrt(step), continuous at the end of the warmup (Vaswani et al. 2017)."""

    @classmethod
    def after_warmup(cls, settings, step, warmup, steps):
        return math.sqrt(max(warmup, 1) / step)


class DecaySettings(PartSettings):
    min_ratio: float = Field(0.0, ge=0.0, le=1.0, description="the rate at the last step, as a share of the peak")

    TRIED: ClassVar = ({"min_ratio": 0.1},)


@register("cosine")
class Cosine(Schedule):
    """Half a cosine from the peak to min_ratio of it at the last step (Loshchilov and Hutter 2017)."""

    Settings = DecaySettings

    @classmethod
    def after_warmup(cls, settings, step, warmup, steps):
        return settings.min_ratio + (1 - settings.min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress(step, warmup, steps)))


@register("linear")
class Linear(Schedule):
    """A straight line from the peak to min_ratio of it at the last step (BERT, RoBERTa)."""

    Settings = DecaySettings

    @classmethod
    def after_warmup(cls, settings, step, warmup, steps):
        return 1.0 - (1 - settings.min_ratio) * progress(step, warmup, steps)


class StableDecaySettings(PartSettings):
    decay_fraction: float = Field(0.2, gt=0.0, le=1.0, description="the share of the steps after the warmup "
                                                                   "spent decaying, at the end")
    shape: Literal["linear", "cosine", "1-sqrt"] = Field("linear", description="the decay's form (Hägele et al. "
                                                                               "2024 find 1-sqrt best)")
    min_ratio: float = Field(0.0, ge=0.0, le=1.0, description="the rate at the last step, as a share of the peak")

    TRIED: ClassVar = ({"shape": "1-sqrt", "decay_fraction": 0.5},)


@register("wsd")
class WarmupStableDecay(Schedule):
    """Warmup-stable-decay (MiniCPM, Hu et al. 2024): the peak rate until the last decay_fraction of
    the steps, then a decay to min_ratio of it; a run can be continued from before the decay."""

    Settings = StableDecaySettings

    @classmethod
    def after_warmup(cls, settings, step, warmup, steps):
        start = steps - settings.decay_fraction * (steps - warmup)
        if step <= start:
            return 1.0
        done = min(1.0, (step - start) / max(1e-9, steps - start))
        fall = {"linear": done, "cosine": 0.5 * (1 - math.cos(math.pi * done)), "1-sqrt": math.sqrt(done)}[settings.shape]
        return 1.0 - (1 - settings.min_ratio) * fall
