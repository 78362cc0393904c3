"""Every published table is held at HEAD: one cell of each published ledger (the first post-norm
cell, whose early losses round most sensitively) is trained again to its early window and must
agree with its record, so a change of the code that moves a table fails CI instead of leaving the
table stale."""

from pathlib import Path

import pytest

from zoo.sweep.reproduce import describe, reproduce, sensitive_cell
from zoo.sweep.spec import read_saved_sweep

RESULTS = Path(__file__).resolve().parents[1] / "experiments" / "results"
PUBLISHED = sorted(path.parent.name for path in RESULTS.glob("*/ledger.jsonl"))
ON_A_CORPUS = {"lm-multi30k", "multi30k-norm", "narang-multi30k", "transfer-multi30k"}
"""Ledgers trained on the full Multi30k corpus, which a clone does not hold (`zoo reproduce
--early --set task.data_dir=...` holds them where it is)."""


def test_every_published_ledger_is_held_or_named_as_needing_its_corpus():
    assert len(PUBLISHED) >= 11
    needs_data = {name for name in PUBLISHED if "data_dir" in read_saved_sweep(RESULTS / name)[1].get("task", {})}
    assert needs_data == ON_A_CORPUS


@pytest.mark.parametrize("ledger", [name for name in PUBLISHED if name not in ON_A_CORPUS])
def test_the_first_steps_of_a_published_cell_agree_at_head(ledger):
    path = RESULTS / ledger / "ledger.jsonl"
    (result,) = reproduce(path, [sensitive_cell(path)], early=True, echo=lambda _: None)
    assert result.agrees, describe(result)
