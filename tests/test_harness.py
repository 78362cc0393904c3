"""The zoo's models as a model of lm-evaluation-harness: every loglikelihood it answers is the
model's own forward pass, the harness ranks choices as the model does, rolling loglikelihood and
generation are the model's, and `train.downstream` makes the harness's scores metrics of a run.
The tasks are YAML files reading JSON lines in tests/fixtures/harness (nothing is downloaded)."""

import json
import math
from pathlib import Path

import pytest
import torch

import zoo
from trainkit import MULTI30K, offline_run, run_dir_of, text_task, tiny_experiment, write_corpus
from zoo.errors import ConfigError
from zoo.tasks import build_task
from zoo.trainer.harness import Scorer, run_harness, scorer_of_task, text_ids

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "harness"
CHOICES = [json.loads(line) for line in (FIXTURES / "choices.jsonl").read_text().splitlines()]
TEXTS = [json.loads(line)["text"] for line in (FIXTURES / "texts.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def tasks_folder(tmp_path_factory):
    """The fixture tasks, their data files named by absolute path (as a user's YAML would)."""
    folder = tmp_path_factory.mktemp("harness_tasks")
    for path in FIXTURES.glob("*.yaml"):
        (folder / path.name).write_text(path.read_text().replace("DATA", str(FIXTURES)))
    return str(folder)


@pytest.fixture(scope="module")
def language_model(tmp_path_factory):
    """A small decoder trained a little on sentences of the fixtures' words (word tokenizer)."""
    root = tmp_path_factory.mktemp("lm")
    task = build_task(text_task("lm", write_corpus(root / "corpus")), seed=0)
    torch.manual_seed(0)
    model = zoo.build(zoo.spec("decoder.pre.sinusoidal.fused.relu", vocab_size=len(task.codec), d_model=32, n_heads=2,
                               d_ff=64, n_decoder_layers=2, max_len=24)).eval()
    return model, task


def by_hand(model, ids: list[int], scored: int) -> float:
    """The summed log-probability of the last `scored` ids of `ids`, each given those before it."""
    logits = model(torch.tensor([ids[:-1]])).float().log_softmax(-1)[0]
    targets = torch.tensor(ids[1:])
    return float(logits[-scored:].gather(-1, targets[-scored:, None]).sum())


def test_every_loglikelihood_is_the_models_own_forward_pass(language_model):
    model, task = language_model
    scorer = scorer_of_task(model, task, batch_size=4)
    requests = [(row["question"], " " + choice) for row in CHOICES for choice in row["choices"]]
    answers = scorer.score([scorer.request(*request) for request in requests])
    for (context, continuation), (logprob, greedy) in zip(requests, answers):
        head, tail = text_ids(task.codec, context), text_ids(task.codec, continuation)
        assert head + tail == text_ids(task.codec, context + continuation), "words: the pieces do not cross"
        assert logprob == pytest.approx(by_hand(model, [model.spec.bos_id, *head, *tail], len(tail)), abs=1e-4)
        ids = torch.tensor([[model.spec.bos_id, *head, *tail]])
        predicted = model(ids[:, :-1])[0, -len(tail):].argmax(-1)
        assert greedy == bool((predicted == ids[0, -len(tail):]).all())


def test_a_context_longer_than_the_model_keeps_its_end(language_model):
    model, task = language_model
    scorer = scorer_of_task(model, task)
    context = " ".join(["the cat sat on a mat"] * 10)
    source, target = scorer.request(context, " and")
    assert len(source) + len(target) - 1 == model.spec.max_len + 1, "the sequence fills the model"
    assert source[-3:] == text_ids(task.codec, "on a mat")


def test_the_harness_ranks_choices_as_the_model_does_and_scores_rolling_texts_per_byte(language_model, tasks_folder):
    model, task = language_model
    scorer = scorer_of_task(model, task)
    results = run_harness(scorer, ["zoo_choices", "zoo_texts"], tasks_folder)
    chosen, normalized = [], []
    for row in CHOICES:
        scores = [lp for lp, _ in scorer.score([scorer.request(row["question"], " " + c) for c in row["choices"]])]
        chosen.append(max(range(len(scores)), key=scores.__getitem__) == row["answer"])
        per_byte = [s / len((" " + c).encode()) for s, c in zip(scores, row["choices"])]
        normalized.append(max(range(len(per_byte)), key=per_byte.__getitem__) == row["answer"])
    assert results["zoo_choices"]["acc,none"] == pytest.approx(sum(chosen) / len(chosen))
    assert results["zoo_choices"]["acc_norm,none"] == pytest.approx(sum(normalized) / len(normalized))
    nats = sum(by_hand(model, [model.spec.bos_id, *text_ids(task.codec, t)], len(text_ids(task.codec, t))) for t in TEXTS)
    assert all(len(text_ids(task.codec, t)) <= model.spec.max_len for t in TEXTS), "one window each"
    bits_per_byte = -nats / (math.log(2) * sum(len(t.encode()) for t in TEXTS))
    assert results["zoo_texts"]["bits_per_byte,none"] == pytest.approx(bits_per_byte, rel=1e-5)


def test_rolling_windows_predict_every_id_once(language_model):
    model, task = language_model
    scorer = scorer_of_task(model, task)
    text = " ".join(["the dog ran in a park while birds sang"] * 6)
    ids = text_ids(task.codec, text)
    assert len(ids) > 2 * model.spec.max_len
    windows_total = scorer.rolling(text)
    start, expected = 0, 0.0
    while start < len(ids):  # each window: as much context as fits before the ids it predicts
        end = min(start + model.spec.max_len, len(ids))
        context = [model.spec.bos_id, *ids[:start]][-(model.spec.max_len + 1 - (end - start)) :]
        expected += by_hand(model, [*context, *ids[start:end]], end - start)
        start = end
    assert windows_total == pytest.approx(expected, abs=1e-3)


def test_generation_is_greedy_decoding_cut_at_the_stop_string(language_model, tasks_folder):
    model, task = language_model
    scorer = scorer_of_task(model, task)
    context = CHOICES[0]["question"]
    ids = [model.spec.bos_id, *text_ids(task.codec, context)]
    for _ in range(6):  # step by step, no cache: the argmax of the whole sequence each time, never pad or bos
        logits = model(torch.tensor([ids]))[0, -1]
        logits[[model.spec.pad_id, model.spec.bos_id]] = -math.inf
        ids.append(int(logits.argmax()))
    expected = task.codec.decode(ids[len(text_ids(task.codec, context)) + 1 :])
    assert scorer.generate(context, [], 6) == expected
    stop = expected.split(" ")[1] if " " in expected else expected
    assert scorer.generate(context, [stop], 6) == expected[: expected.find(stop)]
    results = run_harness(scorer, ["zoo_continue"], tasks_folder)
    said = [scorer.generate(row["question"], ["."], 8).strip() == row["choices"][row["answer"]] for row in CHOICES]
    assert results["zoo_continue"]["exact_match,none"] == pytest.approx(sum(said) / len(said))


def test_an_encoder_decoder_scores_the_continuation_as_a_target_of_the_context():
    task = build_task({"name": "parallel", "data_dir": str(MULTI30K), "valid_split": "val", "test_split": None,
                       "train_sentences": 300, "tokenizer": "word", "vocab_size": 300, "shared_vocab": True}, seed=0)
    torch.manual_seed(0)
    model = zoo.build(zoo.spec("pre.sinusoidal.fused.relu", src_vocab_size=len(task.src_vocab),
                               tgt_vocab_size=len(task.tgt_vocab), d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1,
                               n_decoder_layers=1)).eval()
    scorer = scorer_of_task(model, task)
    assert isinstance(scorer, Scorer) and scorer.source is not None
    (logprob, _), = scorer.score([scorer.request("Ein Mann läuft .", " A man runs .")])
    src = torch.tensor([task.encode_source("Ein Mann läuft .")])
    target = [model.spec.bos_id, *text_ids(task.tgt_vocab, " A man runs .")]
    logits = model(src, torch.tensor([target[:-1]])).log_softmax(-1)[0]
    assert logprob == pytest.approx(float(logits.gather(-1, torch.tensor(target[1:])[:, None]).sum()), abs=1e-4)


@pytest.mark.slow  # the harness indexes its 14,000 tasks to say a name is none of them (11 s)
def test_a_task_the_harness_lacks_is_refused_by_name(language_model, tasks_folder, tmp_path, monkeypatch):
    model, task = language_model
    with pytest.raises(ConfigError, match=r"downstream task 'no_such_task': not a task of lm-eval"):
        run_harness(scorer_of_task(model, task), ["no_such_task"], tasks_folder)
    run = tiny_experiment(tmp_path, model={"kind": "decoder", "n_decoder_layers": 1}, task=text_task("lm", "corpus"),
                          train={"downstream": {"tasks": ["zoo_choices", "no_such_task"], "include_path": tasks_folder}})
    write_corpus(tmp_path / "corpus")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"downstream task 'no_such_task'"):
        zoo.train(run)  # refused before the first step, not after training
    assert not list(tmp_path.rglob("checkpoint.pt"))
    with pytest.raises(ConfigError, match=r"train\.downstream: task 'mlm' labels positions"):
        zoo.ExperimentSpec(model={"kind": "encoder"}, task=text_task("mlm", "x"),
                           train={"downstream": {"tasks": ["zoo_choices"]}})


@pytest.mark.slow
def test_runs_score_their_downstream_tasks_at_their_end_and_a_sweep_ranks_by_one(tmp_path, tasks_folder, monkeypatch):
    """A run scores the harness's tasks at its end: the scores are metrics in result.json and in
    the W&B summary (read back offline); a sweep of two variants over two seeds, each run scoring
    them so, is ranked by one as its primary metric."""
    import yaml

    from zoo.cli import main

    def experiment(folder):
        return tiny_experiment(folder, model={"kind": "decoder", "n_decoder_layers": 1, "max_len": 64},
                               task=text_task("lm", write_corpus(tmp_path / "corpus")), wandb={"mode": "offline"},
                               train={"steps": 20, "eval_every": 20, "log_every": 10,
                                      "downstream": {"tasks": ["zoo_choices", "zoo_texts"], "include_path": tasks_folder}})

    metrics = zoo.train(experiment(tmp_path / "one")).metrics
    expected = {"downstream/zoo_choices/acc", "downstream/zoo_choices/acc_norm", "downstream/zoo_texts/bits_per_byte",
                "downstream/zoo_texts/word_perplexity", "downstream/zoo_texts/byte_perplexity"}
    assert expected <= set(metrics)
    result = json.loads((run_dir_of(experiment(tmp_path / "one")) / "result.json").read_text())
    assert {name: result["metrics"][name] for name in expected} == {name: metrics[name] for name in expected}
    assert result["downstream"]["harness"] and "acc_stderr,none" in result["downstream"]["results"]["zoo_choices"]
    info, _ = offline_run(tmp_path / "one")  # what W&B wrote, read back offline
    assert info["summary"]["downstream/zoo_choices/acc"] == metrics["downstream/zoo_choices/acc"]

    monkeypatch.chdir(tmp_path)
    base = experiment(tmp_path / "sweep")
    del base["train"]["out_dir"], base["wandb"]["dir"]
    base["wandb"]["mode"] = "disabled"
    sweep = {"name": "ds", "base": base, "grid": {"model.norm": ["post", "pre"]}, "seeds": [0, 1],
             "metric": "downstream/zoo_texts/bits_per_byte", "goal": "min"}
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(sweep))
    main(["sweep", "sweep.yaml", "--workers", "2"])
    main(["compare", "sweeps/ds", "--wandb-mode", "disabled"])
    report = (tmp_path / "sweeps" / "ds" / "report.md").read_text()
    assert "downstream/zoo_texts/bits_per_byte" in report and "pre − post" in report


def test_a_sweep_may_rank_by_a_downstream_score_of_a_task_its_runs_name():
    from zoo.sweep.loading import check_metric
    from zoo.sweep.spec import SweepSpec

    base = {"model": {"kind": "decoder"}, "task": text_task("lm", "corpus"),
            "train": {"downstream": {"tasks": ["zoo_choices"], "include_path": "tasks"}}}
    sweep = SweepSpec(name="s", grid={"model.norm": ["post", "pre"]}, metric="downstream/zoo_choices/acc")
    check_metric(sweep, base)
    assert sweep.resolved_metric.goal == "max" and sweep.resolved_metric.name.held_out
    with pytest.raises(ConfigError, match="metric 'downstream/hellaswag/acc' is not reported"):
        check_metric(sweep.replace(metric="downstream/hellaswag/acc"), base)
