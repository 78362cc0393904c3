"""A logged metric's name is parsed once into (model, split, metric) and resolved once against the
registry: every reader asks the parsed name, so they cannot disagree on what a name means."""

import math

import pytest

import zoo
from zoo.metric_names import KEPT, MetricName
from zoo.metrics import Resolved

SPLITS = ["", "train", "eval", "test", "long", "eval_auc"]
PLACES = [(model, split) for model in ("", *KEPT) for split in SPLITS if split or not model]
"""Where a metric is logged: a kept model's metric always names its split (`averaged/bleu` is no name)."""


@pytest.mark.parametrize("model, split", PLACES)
@pytest.mark.parametrize("metric", zoo.registry("metric").names())
def test_a_name_parses_into_its_parts_and_prints_back(model, split, metric):
    text = "/".join(part for part in (model, split, metric) if part)
    name = MetricName.parse(text)
    assert (name.model, name.split, name.metric) == (model, split, metric)
    assert str(name) == text and MetricName.parse(str(name)) == name
    assert name.of_model == "/".join(part for part in (split, metric) if part)
    assert name.held_out == (split in ("test", "long"))
    assert name.validation == (split in ("eval", "eval_auc"))
    assert name.on("eval") == MetricName(model, "eval", metric)
    logged = not model and split in ("", "train", "eval")  # what training logs as it goes
    assert name.curve == (name if logged else MetricName("", "eval", metric))


@pytest.mark.parametrize("metric", zoo.registry("metric").names())
def test_a_resolved_name_carries_its_metrics_direction_and_bounds(metric):
    declared = zoo.registry("metric").get(metric)
    resolved = Resolved.of(f"best_checkpoint/test/{metric}")
    assert (resolved.goal, resolved.bounds) == (declared.goal, declared.bounds)
    worse, better = (2.0, 1.0) if declared.goal == "min" else (1.0, 2.0)
    assert resolved.better(better, worse) and not resolved.better(worse, better) and resolved.better(worse, None)
    assert not resolved.better(better, worse, min_delta=1.0)  # by exactly the margin: no improvement
    low, high = resolved.bounds
    assert low < high and not math.isnan(low)


def test_an_unknown_metric_is_refused_with_the_choices_not_given_a_direction():
    with pytest.raises(zoo.ConfigError, match=r"unknown metric 'blue'; did you mean 'bleu'\?.*\(in 'test/blue'\)"):
        Resolved.of("test/blue")
