"""Metrics are registered as parts are: each declares its direction, its range and the tasks that
report it, and its typed settings (train.metrics); text metrics are sacrebleu's, signed in
result.json and the W&B config; `zoo reproduce` shows, without comparing, a metric the zoo gained
after a record was made."""

import json
import math
import re
import typing

import pytest
import sacrebleu

import zoo
from trainkit import offline_run, run_dir_of, tiny_experiment
from zoo.metric_names import MetricName
from zoo.metrics import Tally, better, goal_of, range_of, reported
from zoo.model.zoo_model import ZooModel
from zoo.specs.identity import fingerprint
from zoo.sweep.loading import check_metric
from zoo.sweep.record_differences import added_since, history_differences, metric_differences, scorer_differences
from zoo.sweep.reproduce import Reproduction, describe
from zoo.sweep.spec import SweepSpec

METRICS = zoo.registry("metric").names()
HYPOTHESES = ["the cat sat on the mat", "a dog ran", "birds sang in a park", "the the the"]
REFERENCES = ["the cat sat on a mat", "a dog ran in the park", "birds sang in a park", "the mat"]
TALLY = Tally(loss_sum=23.0, correct=31, tokens=40, exact=1, rows=4, text_bytes=150, hypotheses=HYPOTHESES,
              references=REFERENCES)


@pytest.mark.parametrize("name", METRICS)
def test_every_metric_declares_its_direction_and_range_and_scores_inside_it(name):
    metric = zoo.registry("metric").get(name)
    low, high = metric.bounds
    assert metric.goal in ("min", "max") and low < high and metric.__doc__
    assert goal_of(f"test/{name}") == goal_of(f"best/eval/{name}") == metric.goal
    assert range_of(f"eval_auc/{name}") == metric.bounds
    if metric.needs & {"comparison", "downstream"}:  # zoo compare computes it over runs, or the harness reports it
        return
    value = metric.score(TALLY, metric.Settings())
    assert low <= value <= high and math.isfinite(value)
    worse, best = (value + 1, value) if metric.goal == "min" else (value - 1, value)
    assert better(name, best, worse) and not better(name, worse, best)
    assert not better(name, best, worse, min_delta=1.5), "an improvement within min_delta is none"


def test_a_metric_registered_without_a_goal_is_refused(monkeypatch):
    """Without a declared direction a lower-is-better metric ranked as if higher were better."""
    from zoo.metrics import Metric, register

    metrics = zoo.registry("metric")
    monkeypatch.setattr(metrics, "_parts", dict(metrics._parts))  # what this test registers goes with it

    class Edits(Metric):
        """Edits needed per target: lower is better, but nothing says so."""

        @classmethod
        def score(cls, tally, settings):
            return 0.0

    with pytest.raises(zoo.ConfigError, match=r"metric 'edits_per_target' \(.*Edits\) declares no goal: set goal = "
                                              r"'min' \(lower is better, as a loss\) or 'max'"):
        register("edits_per_target")(Edits)
    assert "edits_per_target" not in metrics.names(), "nothing half-registered"
    Edits.goal = "min"
    assert register("edits_per_target")(Edits) is Edits and zoo.metrics.goal_of("eval/edits_per_target") == "min"


def test_text_metrics_are_sacrebleus_corpus_scores_with_their_signatures():
    registry = zoo.registry("metric")
    expected = {"bleu": sacrebleu.corpus_bleu, "chrf": sacrebleu.corpus_chrf, "ter": sacrebleu.corpus_ter}
    for name, corpus_score in expected.items():
        metric = registry.get(name)
        assert metric.score(TALLY, metric.Settings()) == corpus_score(HYPOTHESES, [REFERENCES]).score
        signature = metric.scorer(metric.Settings())
        assert signature.startswith("nrefs:1|") and f"version:{sacrebleu.__version__}" in signature
    none = zoo.registry("metric").get("loss").Settings()
    assert registry.get("loss").score(TALLY, none) == 23 / 40
    assert registry.get("perplexity").score(TALLY, none) == math.exp(23 / 40)


def another_value(field):
    """A value of a setting other than its default: the next choice, the other truth value, one more."""
    default, kind = field.default, field.annotation
    if typing.get_origin(kind) is typing.Literal:
        return next(v for v in typing.get_args(kind) if v != default)
    if kind in (bool, "bool"):
        return not default
    return default + 1 if all(m.__class__.__name__ != "Le" or default + 1 <= m.le for m in field.metadata) else default - 1


SETTINGS = [(name, key) for name in METRICS for key in zoo.registry("metric").get(name).Settings.model_fields]


@pytest.mark.parametrize("name, key", SETTINGS, ids=[f"{n}.{k}" for n, k in SETTINGS])
def test_every_metric_setting_shows_in_the_score_or_in_how_it_was_scored(name, key):
    metric = zoo.registry("metric").get(name)
    field = metric.Settings.model_fields[key]
    changed = metric.Settings.model_validate({key: another_value(field)})
    default = metric.Settings()
    assert (metric.score(TALLY, changed), metric.scorer(changed)) != (metric.score(TALLY, default),
                                                                      metric.scorer(default)), \
        f"{name}.{key} changes nothing a record would show"
    if metric.scorer(default):  # a signed scorer (sacrebleu's) names every setting, the ones its signature omits too
        assert metric.scorer(changed) != metric.scorer(default), f"{name}.{key} is not in the recorded signature"


def test_metric_settings_are_checked_and_kept_out_of_the_runs_identity_at_their_defaults():
    def experiment(**metrics):
        return zoo.ExperimentSpec(task={"name": "toy_translation"}, train={"metrics": metrics})

    assert experiment(chrf={"word_order": 2}).train.metrics == {"chrf": {"word_order": 2}}
    assert fingerprint(experiment(chrf={"word_order": 0}, bleu={})) == fingerprint(experiment())
    assert fingerprint(experiment(chrf={"word_order": 2})) != fingerprint(experiment())
    for metrics, text in [({"chrff": {}}, "unknown metric 'chrff'; did you mean 'chrf'?"),
                          ({"chrf": {"word_ordr": 2}}, "unknown setting 'word_ordr'; did you mean 'word_order'?"),
                          ({"bleu": {"tokenize": "ja"}}, "tokenize: Input should be '13a', 'intl'"),
                          ({"chrf": {"beta": 10**40}}, "beta: Input should be less than or equal to 10")]:
        with pytest.raises(zoo.ConfigError, match=re.escape(f"train.metrics: {text}")):
            experiment(**metrics)
    with pytest.raises(zoo.ConfigError, match=re.escape("train.metrics.bleu: the task reports no 'eval/bleu'")):
        zoo.ExperimentSpec(task={"name": "reverse"}, train={"metrics": {"bleu": {"lowercase": True}}})


@pytest.mark.parametrize("task", zoo.registry("task").names())
def test_each_task_reports_the_metrics_its_traits_call_for(task):
    found = zoo.registry("task").get(task)
    names = found.metrics()
    assert names[:2] == ["loss", "token_acc"] and names == reported(found.traits())
    assert ("exact_match" in names) == found.generates
    assert ("bits_per_byte" in names) == found.scores_text
    assert {"bleu", "chrf", "ter"} <= set(names) if found.text_metric else not {"bleu", "chrf", "ter"} & set(names)
    assert "lr_sensitivity" not in names


@pytest.mark.slow
def test_a_text_run_reports_chrf_and_ter_and_records_how_each_metric_was_scored(tmp_path):
    chrf_plus = {"word_order": 2}
    experiment = tiny_experiment(tmp_path, task={"name": "toy_translation"}, wandb={"mode": "offline"},
                                 train={"steps": 20, "eval_every": 10, "log_every": 10, "metrics": {"chrf": chrf_plus}})
    zoo.train(experiment)
    result = json.loads((run_dir_of(experiment) / "result.json").read_text())
    for name in ("bleu", "chrf", "ter"):
        assert f"eval/{name}" in result["metrics"] and f"{zoo.metrics.CURVE}/{name}" in result["metrics"]
        metric = zoo.registry("metric").get(name)
        assert result["scorers"][name] == metric.scorer(metric.Settings(**(chrf_plus if name == "chrf" else {})))
    assert "|nw:2|" in result["scorers"]["chrf"], "chrF++, as train.metrics set"
    assert result["scorers"]["exact_match"] == "zoo"
    info, records = offline_run(tmp_path)
    assert info["config"]["scorers"]["ter"].startswith("nrefs:1|case:lc|tok:tercom")
    logged = [r["history"]["item"] for r in records if r["type"] == "history"]
    assert sum("eval/chrf" in row for row in logged) == 2


def test_train_metrics_chooses_what_is_scored_and_an_evaluation_scoring_no_decoded_metric_decodes_nothing(
        tmp_path, monkeypatch):
    decoded = []
    generate = ZooModel.generate

    def counted(model, src, *args, **kwargs):
        decoded.append(src.size(0))
        return generate(model, src, *args, **kwargs)

    monkeypatch.setattr(ZooModel, "generate", counted)
    metrics = zoo.registry("metric")
    unscored = {name: False for name in zoo.registry("task").get("toy_translation").metrics()
                if "generates" in metrics.get(name).needs}
    assert len(unscored) >= 4, unscored
    experiment = tiny_experiment(tmp_path, task={"name": "toy_translation"},
                                 train={"steps": 20, "eval_every": 10, "log_every": 10, "metrics": unscored})
    zoo.train(experiment)
    assert decoded == [1], "the end's cross-attention picture decodes its one example; no evaluation decodes"
    zoo.train({**experiment, "train": {**experiment["train"], "metrics": {}, "out_dir": str(tmp_path / "all")}})
    assert len(decoded) > 2, "scoring exact match and the text metrics decodes each evaluation's batches"
    result = json.loads((run_dir_of(experiment) / "result.json").read_text())
    assert {MetricName.parse(name).metric for name in result["metrics"]} == {"loss", "token_acc"}
    assert set(result["scorers"]) == {"loss", "token_acc"}
    assert fingerprint(zoo.ExperimentSpec.model_validate(experiment)) != fingerprint(
        zoo.ExperimentSpec.model_validate({**experiment, "train": {**experiment["train"], "metrics": {}}}))


@pytest.mark.parametrize("train, said", [
    ({"metrics": {"loss": False}}, "train.metrics: loss: false: every evaluation scores loss"),
    ({"metrics": {"bleu": False}, "keep_best": "bleu"}, "train.keep_best: 'eval/bleu' is not scored (train.metrics "
                                                       "sets bleu: false)"),
    ({"metrics": {"chrf": False}, "early_stop": "chrf"}, "train.early_stop.metric: 'eval/chrf' is not scored"),
    ({"metrics": {"chrf": True}}, "train.metrics: a mapping {metric: {setting: value}, or metric: false}"),
])
def test_a_metric_that_must_be_scored_cannot_be_set_false(train, said):
    with pytest.raises(zoo.ConfigError, match=re.escape(said)):
        zoo.ExperimentSpec(task={"name": "toy_translation"}, train=train)


def test_a_sweep_cannot_compare_on_a_metric_its_runs_do_not_score():
    base = {"task": {"name": "toy_translation"}, "train": {"metrics": {"bleu": False}}}
    sweep = SweepSpec(name="s", grid={"model.norm": ["post", "pre"]}, metric="eval/bleu")
    with pytest.raises(zoo.ConfigError, match=r"metric 'eval/bleu' is not reported .*choices: eval/loss, "
                                              r"eval/token_acc, eval/exact_match, eval/chrf"):
        check_metric(sweep, base)
    check_metric(sweep.replace(metric="eval/chrf"), base)


def test_reproduce_shows_a_metric_added_since_the_record_and_compares_the_rest():
    recorded = {"eval/loss": 1.0, "eval/bleu": 20.0}
    now = {"eval/loss": 1.0, "eval/bleu": 20.0, "eval/chrf": 40.0, "eval/ter": 70.0}
    added = added_since(recorded, None, now)
    assert added == ["eval/chrf", "eval/ter"] and metric_differences(recorded, now, added) == []
    assert added_since(recorded, {"loss": "zoo", "bleu": "x", "chrf": "y", "ter": "z"}, now) == [], \
        "a record that lists chrF as scored and lacks its value lost it"
    assert metric_differences({**recorded, "eval/chrf": 41.0}, now, ["eval/ter"]) == ["eval/chrf: 41.0 recorded, 40.0 now"]
    assert scorer_differences({"bleu": "version:2.5.1"}, {"bleu": "version:2.6.0"}) == [
        "bleu scored by 'version:2.5.1' recorded, 'version:2.6.0' now"]
    text = describe(Reproduction("norm=pre,seed=0", added=added))
    assert text == ("norm=pre,seed=0: every final metric matches bit for bit (not in the record, so not compared: "
                    "chrf, ter, metrics the zoo gained since)")


def test_a_history_key_the_record_never_logged_is_not_compared_but_one_it_logged_is_everywhere():
    recorded = [{"train/step": 10, "train/loss": 2.0, "train/wall_s": 1.0}, {"train/step": 20, "train/loss": 1.5}]
    now = [{"train/step": 10, "train/loss": 2.0, "train/flops": 1e9, "train/wall_s": 3.0},
           {"train/step": 20, "train/loss": 1.5, "train/flops": 2e9}]
    assert history_differences(recorded, now) == [], "train/flops began to be logged after the record"
    assert history_differences(recorded, [now[0], {"train/step": 20, "train/flops": 2e9}]) == [
        "train/loss at step 20: 1.5 recorded, not reported now"]
    logged = [{**recorded[0], "train/flops": 1e9}, {**recorded[1], "train/flops": 3e9}]
    assert history_differences(logged, now) == ["train/flops at step 20: 3000000000.0 recorded, 2000000000.0 now"]
    assert history_differences([recorded[0], {**recorded[1], "train/flops": 2e9}], now) == [
        "train/flops at step 10: not in the record, 1000000000.0 now"], \
        "a key the record logged is compared at every step"


def test_zoo_list_and_show_explain_the_metrics(capsys):
    from zoo.cli import main

    main(["list"])
    listed = capsys.readouterr().out
    assert "  ter             lower is better, 0 to ∞; reported by parallel, parallel_shards, toy_translation" in listed
    assert "  acc             higher is better, 0 to 1; scored by lm-evaluation-harness for a task of " \
           "train.downstream (downstream/TASK/NAME)" in listed
    main(["show", "metric", "chrf"])
    shown = capsys.readouterr().out
    assert "higher is better, 0 to 100" in shown and "# scored by sacrebleu: nrefs:1|case:mixed|eff:yes|nc:6" in shown
    assert "# settings (default; meaning), in train.metrics.chrf:\nchar_order: 6  # the longest" in shown
