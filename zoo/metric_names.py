"""A logged metric's name, parsed once at the edge into (model, split, metric): `best_checkpoint/
test/chrf` is chrF on the test split of the checkpoint kept at the best evaluation. Every reader of
a name (run records, sweeps, comparisons, curves) asks this type, never splits the text itself."""

from __future__ import annotations

from dataclasses import dataclass

KEPT = ("best_checkpoint", "averaged")
"""The models a run keeps besides its last (train.keep_best, train.average_last), each scored on
every split at the end: a sweep compares on their metrics as `best_checkpoint/test/bleu`."""
CURVE = "eval_auc"
"""The group of curve metrics: how fast a run learned (zoo.metrics.curves)."""
VALIDATION = ("eval", CURVE)
"""What training itself evaluates: a tuned value is chosen there, never compared there."""
NOT_HELD_OUT = (*VALIDATION, "train")
ALWAYS_SCORED = ("loss",)
"""What every evaluation scores whatever train.metrics says: divergence and early stopping read it."""


@dataclass(frozen=True)
class MetricName:
    model: str
    """"" for the run's last model, else one it kept (KEPT)."""
    split: str
    """Where it is scored: train, eval (validation), test, long, eval_auc...; "" for a bare name."""
    metric: str
    """The metric itself (a registered metric's name, or loss)."""

    @classmethod
    def parse(cls, text: str) -> MetricName:
        parts = str(text).split("/")
        model = parts.pop(0) if len(parts) > 1 and parts[0] in KEPT else ""
        metric = parts.pop()
        return cls(model, "/".join(parts), metric)

    def __str__(self) -> str:
        return "/".join(part for part in (self.model, self.split, self.metric) if part)

    @property
    def of_model(self) -> str:
        """The name within its model's metrics: `test/bleu` of `best_checkpoint/test/bleu`."""
        return str(MetricName("", self.split, self.metric))

    @property
    def held_out(self) -> bool:
        """Scored on a split the training never evaluated (test, long)."""
        return bool(self.split) and self.split not in NOT_HELD_OUT

    @property
    def validation(self) -> bool:
        return self.split in VALIDATION

    def on(self, split: str) -> MetricName:
        """The same metric of the same model on another split (test/X's validation counterpart: eval/X)."""
        return MetricName(self.model, split, self.metric)

    @property
    def curve(self) -> MetricName:
        """The logged metric whose evaluations draw this one's curve: itself where it is logged during
        training (train/X, eval/X, a bare name), else the last model's eval/X, the only one measured
        while training (for test/X, long/X, eval_auc/X or a kept model's)."""
        logged = not self.model and (self.split in ("eval", "train") or not self.split)
        return self if logged else MetricName("", "eval", self.metric)
