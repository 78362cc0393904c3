"""Every published table is held at HEAD: one cell of each published ledger (the first post-norm
cell, whose early losses round most sensitively) is trained again to its early window and must
agree with its record, so a change of the code that moves a table fails CI instead of leaving the
table stale. A ledger trained on the full Multi30k corpus, which a clone does not hold, is trained
from the batches its replay beside it recorded (zoo.sweep.replay)."""

from pathlib import Path

import pytest

from zoo.sweep.reproduce import describe, reproduce, sensitive_cell
from zoo.sweep.spec import read_saved_sweep

pytestmark = [pytest.mark.slow,  # trains whole runs, starts processes or runs benchmarks: not in the fast tier
              pytest.mark.usefixtures("warm_retraining")]

RESULTS = Path(__file__).resolve().parents[1] / "experiments" / "results"
PUBLISHED = sorted(path.parent.name for path in RESULTS.glob("*/ledger.jsonl"))
ON_A_CORPUS = {"lm-multi30k", "local-global-multi30k", "local-global-stdlib", "multi30k-norm", "mup-slope",
               "mup-transfer", "narang-multi30k", "python-lm", "scale-ladder", "token-ladder", "transfer-multi30k"}
"""Ledgers trained on a corpus a clone lacks (the full Multi30k, Python's standard library, a token
store of Python source), each with its replay.pt.gz."""
WHERE = ("data_dir", "path")
"""A task's fields that say where its data is (a corpus folder, a token store)."""


def test_every_published_ledger_on_a_corpus_the_clone_lacks_has_a_replay():
    assert len(PUBLISHED) >= 11
    needs_data = {name for name in PUBLISHED if set(WHERE) & set(read_saved_sweep(RESULTS / name)[1].get("task", {}))}
    assert needs_data == ON_A_CORPUS
    assert {name for name in PUBLISHED if (RESULTS / name / "replay.pt.gz").is_file()} == ON_A_CORPUS


@pytest.mark.parametrize("ledger", PUBLISHED)
def test_the_first_steps_of_a_published_cell_agree_at_head(ledger):
    path = RESULTS / ledger / "ledger.jsonl"
    replay = RESULTS / ledger / "replay.pt.gz" if ledger in ON_A_CORPUS else None
    task = read_saved_sweep(RESULTS / ledger)[1].get("task", {})
    sets = [f"task.{key}=/nonexistent/corpus" for key in WHERE if key in task] if replay else []  # nothing is read
    (result,) = reproduce(path, [sensitive_cell(path)], sets, echo=lambda _: None, early=True, replay=replay)
    assert result.agrees, describe(result)


def test_every_final_metric_a_published_curve_holds_equals_it():
    """zoo reproduce holds such a metric to its curve on any machine (an edit found there): the
    premise, that a run writes both from one number, holds for every published record (6,640
    values when written), and none of them holds a value its metric cannot take."""
    from zoo.metrics import impossible_values
    from zoo.records.ledger import Ledger
    from zoo.sweep.record_differences import contradictions, vouched

    held, said = 0, []
    for name in PUBLISHED:
        for record in Ledger(RESULTS / name / "ledger.jsonl").read().records:
            if record.status == "finished":
                held += len(vouched(record))
                said += [f"{name} {record.cell}: {line}" for line in [*contradictions(record),
                                                                         *impossible_values(record)]]
    assert held >= 6640 and not said, said[:5]
