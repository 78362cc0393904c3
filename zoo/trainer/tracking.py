"""W&B logging that can never cost a training run: every call is guarded, and a failure becomes
one warning after which the run trains on without tracking."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from zoo.specs.experiment import ExperimentSpec, resolved_mode
from zoo.specs.model_spec import DEFAULT_KIND, ModelSpec
from zoo.specs.switches import flat_fields


def axis_tags(spec: ModelSpec) -> list[str]:
    """One tag per axis, and the kind where it is not the default (`kind=decoder`)."""
    kind = [] if spec.kind == DEFAULT_KIND else [f"kind={spec.kind}"]
    return [*kind, *(f"{axis}={value}" for axis, value in spec.axes().items())]


def top_level(experiment: ExperimentSpec, spec: ModelSpec) -> dict[str, Any]:
    """Config keys beside the experiment's groups, which W&B's parallel-coordinates and parameter
    importance panels take without setup: the model's kind, each model axis (`norm: pre`), the
    seed, and the experiment's `wandb.config` (a sweep cell's grid values and variant)."""
    return {"kind": spec.kind, **{axis: str(choice) for axis, choice in spec.axes().items()},
            "seed": experiment.train.seed, **experiment.wandb.config}


class Tracker:
    def __init__(self, experiment: ExperimentSpec, spec: ModelSpec, name: str,
                 active: bool, run_id: str | None = None):
        self.run = None
        mode = resolved_mode(experiment.wandb.mode)
        if not active or mode == "disabled":
            return
        w = experiment.wandb
        config = experiment.model_dump(mode="json")
        # the full, resolved ModelSpec, each switch under its flat key as W&B runs have always held
        # it (model.window, not model.attn.window), so a dashboard groups earlier and later runs alike
        # (W&B keeps no empty mapping: a model without per-layer rules holds no `layers`)
        config["model"] = {key: value for key, value in flat_fields(spec.model_dump()).items() if value != {}}
        config["model_name"] = spec.name
        config.update(top_level(experiment, spec))
        self._guard("init", lambda: self._init(w, mode, name, config, spec, run_id))

    def _init(self, w, mode, name, config, spec, run_id) -> None:
        import wandb

        Path(w.dir).mkdir(parents=True, exist_ok=True)
        self.run = wandb.init(
            project=w.project, entity=w.entity, group=w.group, name=name, job_type=w.job_type,
            tags=list(dict.fromkeys([*w.tags, *axis_tags(spec)])), config=config, dir=w.dir, mode=mode,
            id=run_id, resume="allow" if run_id else None, settings=wandb.Settings(console="off"),
        )
        self.run.define_metric("train/step")
        self.run.define_metric("*", step_metric="train/step")  # every metric's x-axis, eval/* and test/* too

    def _guard(self, what: str, call) -> Any:
        try:
            return call()
        except Exception as err:  # W&B trouble must never end training
            warnings.warn(f"W&B {what} failed, training goes on without W&B: {err!r}", RuntimeWarning, stacklevel=3)
            self.run = None
            return None

    @property
    def run_id(self) -> str | None:
        return None if self.run is None else self.run.id

    @property
    def files_dir(self) -> str | None:
        return None if self.run is None else self.run.dir

    @property
    def where(self) -> dict[str, str]:
        """The run's id and local folder, as a run's record holds them (empty without W&B)."""
        return {} if self.run is None else {"wandb_run": self.run.id, "wandb_dir": str(Path(self.run.dir).parent)}

    def log(self, metrics: dict[str, float], step: int) -> None:
        if self.run is not None:
            self._guard("log", lambda: self.run.log({**metrics, "train/step": step}))

    def config(self, values: dict[str, Any]) -> None:
        """More config keys, known once the run is assembled (how metrics are scored, the data)."""
        if self.run is not None:
            self._guard("config", lambda: self.run.config.update(values, allow_val_change=True))

    def summary(self, values: dict[str, Any]) -> None:
        if self.run is not None:
            self._guard("summary", lambda: self.run.summary.update(values))

    def image(self, key: str, path: Path, caption: str, step: int) -> None:
        if self.run is not None:
            import wandb

            self._guard("image", lambda: self.run.log({key: wandb.Image(str(path), caption=caption), "train/step": step}))

    def finish(self, failed: bool = False) -> None:
        if self.run is not None:
            self._guard("finish", lambda: self.run.finish(exit_code=1 if failed else 0))
            self.run = None
