"""The comparison as registered sections over one question: every section computes its result
once and every output renders it; a section added from outside is one registration; another
metric is another question of the same design, its goal from the metric's registry entry."""

import json
import math
from pathlib import Path

import pytest
import sweepkit

import zoo
from trainkit import offline_run
from zoo.compare import compare
from zoo.compare.comparison import Comparison
from zoo.compare.sections import SECTIONS, Analysis, Section, analyse, register
from zoo.sweep import SweepSpec
from zoo.sweep.question import Question

NAMES = SECTIONS.names()


def known(norm, ffn, seed):
    return 0.4 + 0.1 * seed + (0.2 if norm == "pre" else 0.0) + (0.05 + 0.01 * seed if ffn == "gelu" else 0.0)


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    sweep = sweepkit.write_sweep(tmp_path_factory.mktemp("sections"), "known",
                                 {"model.norm": ["post", "pre"], "model.ffn": ["relu", "gelu"]}, [0, 1, 2],
                                 lambda a, seed: known(a["model.norm"], a["model.ffn"], seed), target=0.5)
    return sweep.directory()


@pytest.mark.parametrize("name", NAMES)
def test_every_section_computes_once_and_renders_what_it_computed(sweep_dir, name, monkeypatch):
    section = SECTIONS.get(name)
    calls = []
    original = section.compute.__func__
    monkeypatch.setattr(section, "compute", classmethod(lambda cls, analysis: calls.append(1) or original(cls, analysis)))
    report = compare(sweep_dir, wandb_mode="disabled", echo=lambda _: None)
    assert len(calls) == 1, f"section {name} computed {len(calls)} times in one comparison"
    result = report.analysis[name]
    if result is None:  # does not apply to an untuned sweep: nothing of it renders (each is rendered in its own tests)
        assert name in {"tuning", "lr_sensitivity", "scaling", "rate_transfer"}
        return
    lines = section.markdown(result, report.analysis)
    text = report.markdown.read_text()
    assert all(isinstance(line, str) for line in lines) and "\n".join(lines) in text
    assert section.console(result, report.analysis) in report.table_text + report.effects_text
    for key, (columns, rows) in section.tables(result, report.analysis).items():
        assert all(len(row) == len(columns) for row in rows), f"{name}: table {key} has rows of another width"


def test_a_section_registered_from_outside_renders_in_every_output(sweep_dir, monkeypatch, tmp_path):
    """Adding an analysis is one registration: its result reaches report.md, the console and W&B."""

    class Spread(Section):
        order = 35

        @classmethod
        def compute(cls, analysis: Analysis) -> float:
            means = [row.metric.mean for row in analysis["ranking"].rows]
            return max(means) - min(means)

        @classmethod
        def markdown(cls, result, analysis):
            return ["## Spread", "", f"best minus worst: {result:.4f}", ""]

        @classmethod
        def console(cls, result, analysis):
            return f"\nspread {result:.4f}"

        @classmethod
        def tables(cls, result, analysis):
            return {"spread": (["spread"], [[result]])}

    monkeypatch.setattr(SECTIONS, "_parts", dict(SECTIONS._parts))  # the registration is undone after the test
    register("spread")(Spread)
    report = compare(sweep_dir, wandb_mode="offline", echo=lambda _: None)
    spread = (sum(known("pre", "gelu", s) for s in range(3)) - sum(known("post", "relu", s) for s in range(3))) / 3
    assert report.analysis["spread"] == pytest.approx(spread) and spread > 0
    text = report.markdown.read_text()
    assert text.index("## Effect of each axis") < text.index("## Spread") < text.index("## Factorial analysis")
    assert f"spread {spread:.4f}" in report.effects_text
    info, _ = offline_run(sweep_dir)
    table = info["summary"]["spread"]
    written = json.loads((Path(report.wandb_run) / "files" / table["path"]).read_text())
    assert written["columns"] == ["spread"] and written["data"] == [[pytest.approx(spread)]]


def test_another_metric_is_another_question_of_the_same_design(sweep_dir):
    first = analyse(sweep_dir)
    question = first.comparison.question
    assert question.metric == first.comparison.design.metric and not question.exploratory and question.endpoint == ""
    asked = question.asking("test/loss")
    assert (asked.goal, asked.target, asked.primary) == ("min", None, question.primary)
    assert asked.exploratory and asked.endpoint.startswith("secondary (exploratory): test/loss")
    assert question.asking(question.metric) is question
    with pytest.raises(zoo.ConfigError, match=r"unknown metric 'bleux'.*did you mean 'bleu'"):
        question.asking("test/bleux")


def test_a_question_keeps_its_fit_only_for_a_metric_that_falls():
    sweep = SweepSpec(name="s", grid={"model.d_model": [8, 16, 32]}, metric="test/loss", fit={"extrapolate": 4})
    question = Question.of(sweep)
    assert question.fit.extrapolate == 4 and question.asking("test/perplexity").fit == question.fit
    assert question.asking("test/token_acc").fit is None, "a law fits a metric that falls, never one that rises"
    comparison = Comparison.of(sweep)
    assert comparison.asking("test/token_acc").design is sweep, "another question leaves the design as it is"
    assert comparison.config()["metric"] == "test/loss" and comparison.asking("test/bleu").config()["goal"] == "max"


def test_an_unknown_section_is_refused_with_the_choices(sweep_dir):
    analysis = analyse(sweep_dir)
    with pytest.raises(zoo.ConfigError, match=r"unknown section 'efects'.*did you mean 'effects'"):
        analysis["efects"]
    assert not math.isnan(analysis["effects"].noise[0])
