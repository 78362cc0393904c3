"""Provenance of the question: every cell `zoo sweep` trains records the sweep's declared question
(metric, margins, family, target, fit, choose_on) and the sweep file's hash, and `zoo compare`
calls a study whose question changed after cells ran exploratory, and says when runs record none."""

import json

import sweepkit

from zoo.compare.sections import SECTIONS, analyse
from zoo.records.ledger import Ledger
from zoo.sweep.question import DECLARED, declaration


def value(a, seed):
    return 0.5 + 0.1 * (a["model.norm"] == "pre") + 0.01 * seed


def rewrite_declarations(folder, change):
    """The ledger's lines with `change(declared)` applied to each finished record's declaration."""
    path = folder / "ledger.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    for line in lines:
        if line["status"] == "finished":
            line["declared"] = change(line["declared"], line["seed"])
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_the_declaration_holds_the_question_and_the_files_hash(tmp_path):
    sweep = sweepkit.write_sweep(tmp_path, "d", {"model.norm": ["post", "pre"]}, [0, 1], value,
                                 margins={"eval/exact_match": 0.02})
    declared = declaration(sweep)
    assert set(DECLARED) < set(declared) and len(declared["sweep_sha256"]) == 64
    assert (declared["metric"], declared["margins"], declared["family"]) == ("eval/exact_match", {"eval/exact_match": 0.02},
                                                                              ["model.norm"])
    again = sweep.model_copy(update={"seeds": [0, 1, 2]})
    assert declaration(again)["sweep_sha256"] != declared["sweep_sha256"], "the file's hash moves with any edit"
    assert {k: v for k, v in declaration(again).items() if k in DECLARED} == {k: declared[k] for k in DECLARED}
    spelled = sweep.model_validate({**sweep.model_dump(mode="json"), "distinct": []})  # a field at its default
    assert declaration(spelled)["sweep_sha256"] == declared["sweep_sha256"], "defaults never move the hash"
    assert declaration(sweep.model_copy(update={"distinct": ["model.norm"]}))["sweep_sha256"] != declared["sweep_sha256"]
    records = Ledger(sweep.directory() / "ledger.jsonl").read().records
    assert all(r.declared == declared for r in records), "as zoo sweep records it with every cell"


def test_a_question_unchanged_since_the_cells_ran_is_confirmatory(tmp_path):
    sweep = sweepkit.write_sweep(tmp_path, "same", {"model.norm": ["post", "pre"]}, [0, 1], value)
    analysis = analyse(sweep.directory())
    result = analysis["declaration"]
    assert not result.exploratory and result.undeclared == 0
    assert SECTIONS.get("declaration").warnings(result, analysis) == []
    assert "The question, as every run recorded it: metric `eval/exact_match`" in \
        "\n".join(SECTIONS.get("declaration").markdown(result, analysis))


def test_a_margin_declared_after_the_first_cells_makes_the_study_exploratory(tmp_path):
    sweep = sweepkit.write_sweep(tmp_path, "late", {"model.norm": ["post", "pre"]}, [0, 1], value,
                                 margins={"eval/exact_match": 0.05})
    rewrite_declarations(sweep.directory(), lambda declared, seed: {**declared, "margins": {}} if seed == 0 else declared)
    analysis = analyse(sweep.directory())
    (warning,) = SECTIONS.get("declaration").warnings(analysis["declaration"], analysis)
    assert warning.startswith("exploratory: the sweep's question changed after 2 of the runs were trained (margins: {} "
                              "when cells ran, {'eval/exact_match': 0.05} now)")
    assert "no verdict of this report is confirmatory" in warning


def test_runs_without_a_recorded_question_are_said_to_lack_one(tmp_path):
    sweep = sweepkit.write_sweep(tmp_path, "old", {"model.norm": ["post", "pre"]}, [0, 1], value)
    rewrite_declarations(sweep.directory(), lambda declared, seed: None)
    analysis = analyse(sweep.directory())
    result = analysis["declaration"]
    assert result.undeclared == 4 and not result.exploratory
    assert SECTIONS.get("declaration").notes(result, analysis) == [
        "4 of 4 runs record no declared question (trained before zoo sweep recorded one): whether the question was set "
        "before they ran is not on record"]


def test_a_declaration_recorded_before_a_field_existed_reads_it_at_its_default(tmp_path):
    """Cells recorded before `distinct` was declared hold no such field: their question is the same
    as one declaring none, and another than one declaring a key."""
    from zoo.sweep.question import declaration_changes

    sweep = sweepkit.write_sweep(tmp_path, "old", {"model.norm": ["post", "pre"]}, [0, 1], value)
    now = declaration(sweep)
    recorded = {k: v for k, v in now.items() if k != "distinct"}
    assert declaration_changes(recorded, now) == []
    declared = declaration(sweep.model_copy(update={"distinct": ["model.norm"]}))
    assert declaration_changes(recorded, declared) == ["distinct: [] when cells ran, ['model.norm'] now"]
