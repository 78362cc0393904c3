"""Finished sweeps written straight into a ledger, with metric values a test chooses: known answers
for `zoo compare`."""

import yaml

from zoo.sweep import Ledger, SweepSpec, expand
from zoo.sweep.question import declaration


def write_sweep(out_dir, name, grid, seeds, value, metric="eval/exact_match", target=None, statuses=None,
                history=None, rows=None, sizes=None, fields=None, **settings) -> SweepSpec:
    """Every cell finished with `metric` = value(assignment, seed) (and eval/loss = 1 - that, where
    the metric is not a loss); `history(assignment, seed, final)` gives its logged rows, by default
    an evaluation of 0 at step 50 and the final value at step 100; `fields(assignment, seed)` gives
    more fields of its record (flops, parameters); `settings`, more fields of the sweep."""
    sweep = SweepSpec(name=name, grid=grid, rows=rows or {}, sizes=sizes or {}, seeds=seeds, metric=metric, target=target,
                      out_dir=str(out_dir), **settings)
    folder = sweep.directory()
    folder.mkdir(parents=True)
    base = {"wandb": {"mode": "offline", "project": "zoo"}}
    (folder / "sweep.yaml").write_text(yaml.safe_dump({**sweep.model_dump(mode="json"), "base": base}, sort_keys=False))
    ledger = Ledger(folder / "ledger.jsonl")
    for cell in expand(sweep):
        a = dict(cell.assignment)
        v = value(a, cell.seed)
        status = (statuses or {}).get(cell.name, "finished")
        rows = (history(a, cell.seed, v) if history else
                [{"train/step": 50, "train/wall_s": 5.0, metric: 0.0},
                 {"train/step": 100, "train/wall_s": 10.0 + cell.seed, metric: v}])
        metrics = {metric: v} if metric.endswith("loss") else {metric: v, "eval/loss": 1 - v}
        record = {"cell": cell.name, "variant": cell.variant, "seed": cell.seed, "assignment": a,
                  "declared": declaration(sweep)}  # as zoo sweep records it
        ledger.append({**record, "status": "running"})
        ledger.append({**record, "status": status, "metrics": metrics if status == "finished" else {},
                       "parameters": 1000 + (a.get("model.norm") == "pre"), "history": rows,
                       **(fields(a, cell.seed) if fields else {})})
    return sweep


def finished_tuned(sweep: SweepSpec, losses, declared: dict | None = None) -> None:
    """A tuned sweep's folder whose every cell finished with eval/loss = losses(assignment, seed)
    (test/loss the same), each run starting at a loss of 5 and recording `declared` as its
    question: for the analyses of the rates."""
    folder = sweep.directory()
    folder.mkdir(parents=True)
    (folder / "sweep.yaml").write_text(yaml.safe_dump({**sweep.model_dump(mode="json"),
                                                       "base": {"wandb": {"mode": "disabled"}}}, sort_keys=False))
    ledger = Ledger(folder / "ledger.jsonl")
    for cell in expand(sweep):
        a = dict(cell.assignment)
        loss = losses(a, cell.seed)
        ledger.append({"cell": cell.name, "variant": cell.variant, "seed": cell.seed, "assignment": a,
                       "first_loss": 5.0, "status": "finished", "history": [{"train/step": 100, "eval/loss": loss}],
                       "metrics": {"eval/loss": loss, "test/loss": loss}, "declared": declared})
