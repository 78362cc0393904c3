"""tokens_per_parameter: a ladder whose sizes train labels in proportion to their non-embedding
parameters (zoo.sweep.token_ratio), each cell's steps counted from its model, not written."""

import math

import pytest
import torch
from conftest import TINY
from test_documents import folder_task, write_documents

import zoo
from trainkit import tiny_experiment
from zoo.model.size_checks import non_embedding_parameters
from zoo.specs.registries import kinds
from zoo.sweep import SweepSpec, cell_experiment, expand

SIZES = {"d16": {"model.d_model": 16, "model.n_heads": 2}, "d32": {"model.d_model": 32, "model.n_heads": 2},
         "d48": {"model.d_model": 48, "model.n_heads": 4, "model.n_decoder_layers": 2}}


def counted_on_a_built_model(spec: zoo.ModelSpec) -> int:
    """The trained parameters of the real model but its tables and output projection, by name."""
    with torch.device("meta"):
        model = zoo.build(spec, seed=0)
    unique = {id(p): (name, p) for name, p in model.named_parameters() if p.requires_grad}
    return sum(p.numel() for name, p in unique.values() if ".embed." not in name and not name.startswith("generator"))


EMBEDDINGS = {"apart": {}, "tied": {"tie": True}, "shared": {"share": True, "tie": True}}
"""Tables of their own, an output projection tied to the table, and (with two stacks) one table."""


@pytest.mark.parametrize(("kind", "embeddings"), [
    pytest.param(kind, tables, id=f"{kind}-{name}") for kind in sorted(kinds()) for name, tables in EMBEDDINGS.items()
    if len(kinds()[kind].reads) > 1 or "share" not in tables])
@pytest.mark.parametrize("position", ["learned", "sinusoidal"])
def test_the_non_embedding_count_is_the_built_models_without_its_tables(kind, embeddings, position):
    fields = {**TINY, "kind": kind, "position": position, "embeddings": embeddings, "n_encoder_layers": 2}
    spec = zoo.resolve(fields)
    assert non_embedding_parameters(spec) == counted_on_a_built_model(spec)
    wider = zoo.resolve({**fields, "vocab_size": 3 * TINY["vocab_size"]})
    assert non_embedding_parameters(wider) == non_embedding_parameters(spec), "the vocabulary moves none of them"


def ladder(tmp_path, train=None, task=None, **fields):
    corpus = tmp_path / "corpus"
    if not corpus.exists():
        texts = [f"def f{i}(x):\n    return x * {i}\n" for i in range(40)]
        for split in ("train", "valid", "test"):
            write_documents(corpus, split, texts)
    base = tiny_experiment(tmp_path, model={"kind": "decoder", "n_decoder_layers": 1, "max_len": 32},
                           task=task or folder_task(corpus, pack=17), train={"eval_every": 1000, "log_every": 5,
                                                                              "checkpoint_every": 1000, **(train or {})})
    del base["train"]["steps"]
    sweep = SweepSpec.model_validate({"name": "ratio", "sizes": SIZES, "grid": {"size": list(SIZES)},
                                      "out_dir": str(tmp_path), "tokens_per_parameter": 2.0, "metric": "test/loss",
                                      **fields})
    return sweep, base


@pytest.mark.parametrize("accumulate", [1, 2])
def test_each_size_trains_the_labels_its_parameters_ask_for(tmp_path, accumulate):
    sweep, base = ladder(tmp_path, train={"batch_size": 8, "accumulate": accumulate})
    steps = {}
    for cell in expand(sweep):
        experiment = cell_experiment(sweep, base, cell)
        parameters = counted_on_a_built_model(experiment.model.sized(50, 50))
        labels = 8 * accumulate * 16  # rows of 17 tokens score 16 labels each
        assert experiment.train.steps == math.ceil(2.0 * parameters / labels)
        steps[dict(cell.assignment)["size"]] = experiment.train.steps
    assert steps["d16"] < steps["d32"] < steps["d48"]


@pytest.mark.slow  # trains the three sizes of a ladder
def test_a_trained_ladder_scores_the_labels_the_ratio_asked_for_and_its_table_says_so(tmp_path):
    from zoo.compare import compare
    from zoo.sweep import run_sweep

    sweep, base = ladder(tmp_path, train={"batch_size": 4, "warmup_steps": 1}, tokens_per_parameter=0.2)
    base["wandb"]["mode"] = "disabled"
    assert set(run_sweep(sweep, base, echo=lambda _: None).values()) == {"finished"}
    report = compare(sweep.directory(), wandb_mode="disabled")
    table = report.analysis["scaling"]
    assert table.ladder_columns[-2:] == ["non-embedding parameters", "tokens per non-embedding parameter"]
    for cell, row in zip(expand(sweep), table.ladder, strict=True):
        experiment = cell_experiment(sweep, base, cell)
        parameters = non_embedding_parameters(experiment.model.sized(50, 50))
        tokens = experiment.train.steps * 4 * 16  # every step scores 4 rows of 16 labels
        assert 0.2 * parameters <= tokens < 0.2 * parameters + 4 * 16
        assert row[0] == f"size={dict(cell.assignment)['size']}"
        assert row[5:] == [f"{tokens:,}", row[6], f"{parameters:,}", f"{tokens / parameters:.1f}"]
    assert "| non-embedding parameters | tokens per non-embedding parameter |" in report.markdown.read_text()


def test_a_step_count_written_beside_the_ratio_is_refused_by_where_it_is(tmp_path):
    sweep, base = ladder(tmp_path)
    with pytest.raises(zoo.ConfigError, match=r"tokens_per_parameter sets each cell's train\.steps from its model; "
                                              r"the base sets train\.steps too: remove it"):
        cell_experiment(sweep, {**base, "train": {**base["train"], "steps": 50}}, expand(sweep)[0])
    sizes = {**SIZES, "d16": {**SIZES["d16"], "train.steps": 10}}
    sweep = sweep.model_copy(update={"sizes": sizes})
    with pytest.raises(zoo.ConfigError, match=r"cell size=d16,seed=0's values sets train\.steps too"):
        cell_experiment(sweep, base, expand(sweep)[0])


def test_steps_that_no_count_before_the_run_can_give_are_refused(tmp_path):
    sweep, base = ladder(tmp_path, task={"name": "reverse"})
    base["model"]["kind"] = "encoder_decoder"
    with pytest.raises(zoo.ConfigError, match=r"tokens_per_parameter: the steps follow from the labels a step scores, "
                                              r"known before the run only for rows packed to one length \(task\.pack\); "
                                              r"task 'reverse' gives no task\.pack"):
        cell_experiment(sweep, base, expand(sweep)[0])
    sweep, base = ladder(tmp_path, task=folder_task(tmp_path / "corpus"))
    with pytest.raises(zoo.ConfigError, match=r"task 'lm' gives no task\.pack"):
        cell_experiment(sweep, base, expand(sweep)[0])


def test_a_dry_run_says_each_cells_steps_before_anything_trains(tmp_path, capsys):
    from zoo.cli import main
    from zoo.specs.yamlio import dump_yaml

    sweep, base = ladder(tmp_path)
    (tmp_path / "ratio.yaml").write_text(dump_yaml({**sweep.model_dump(mode="json", exclude_defaults=True), "base": base}))
    main(["sweep", str(tmp_path / "ratio.yaml"), "--dry-run"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[:-1] == [f"{cell.name}  ->  {sweep.directory() / 'runs' / cell.name}  "
                          f"({cell_experiment(sweep, base, cell).train.steps:,} steps)" for cell in expand(sweep)]
