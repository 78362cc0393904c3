"""Every published table is held at HEAD: one cell of each published ledger (the first post-norm
cell, whose early losses round most sensitively) is trained again to its early window and must
agree with its record, so a change of the code that moves a table fails CI instead of leaving the
table stale. A ledger trained on the full Multi30k corpus, which a clone does not hold, is trained
from the batches its replay beside it recorded (zoo.sweep.replay)."""

from pathlib import Path

import pytest

from zoo.sweep.reproduce import describe, reproduce, sensitive_cell
from zoo.sweep.spec import read_saved_sweep

pytestmark = pytest.mark.slow  # trains whole runs, starts processes or runs benchmarks: not in the fast tier

RESULTS = Path(__file__).resolve().parents[1] / "experiments" / "results"
PUBLISHED = sorted(path.parent.name for path in RESULTS.glob("*/ledger.jsonl"))
ON_A_CORPUS = {"lm-multi30k", "local-global-multi30k", "local-global-stdlib", "multi30k-norm", "mup-transfer",
               "narang-multi30k", "scale-ladder", "transfer-multi30k"}
"""Ledgers trained on a corpus a clone lacks (the full Multi30k, Python's standard library), each with its replay.pt.gz."""


def test_every_published_ledger_on_a_corpus_the_clone_lacks_has_a_replay():
    assert len(PUBLISHED) >= 11
    needs_data = {name for name in PUBLISHED if "data_dir" in read_saved_sweep(RESULTS / name)[1].get("task", {})}
    assert needs_data == ON_A_CORPUS
    assert {name for name in PUBLISHED if (RESULTS / name / "replay.pt.gz").is_file()} == ON_A_CORPUS


@pytest.mark.parametrize("ledger", PUBLISHED)
def test_the_first_steps_of_a_published_cell_agree_at_head(ledger):
    path = RESULTS / ledger / "ledger.jsonl"
    replay = RESULTS / ledger / "replay.pt.gz" if ledger in ON_A_CORPUS else None
    sets = ["task.data_dir=/nonexistent/multi30k"] if replay else []  # nothing of the corpus is read
    (result,) = reproduce(path, [sensitive_cell(path)], sets, echo=lambda _: None, early=True, replay=replay)
    assert result.agrees, describe(result)
