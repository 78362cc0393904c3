"""A run's identity: every field away from its default, by construction; the names runs had keep."""

import pytest
from pydantic import Field

import zoo
from zoo.specs.experiment import ExperimentSpec, TrainSpec, load_experiment
from zoo.specs.identity import fingerprint, identity, run_name
from zoo.specs.model_spec import ModelRecipe
from zoo.sweep.spec import SweepSpec, cell_experiment, expand

WRITTEN_BEFORE = {
    # fingerprints written by the zoo before the recipe and the frozen first names (commit 88b2756)
    "": "0bf6026f", "task.name=sort task.max_len=12": "57aca1e0", "train.eval_beams=4": "eeaf8750",
    "train.z_loss=0.0001": "1a3b605d", "train.explosion=null": "393a378d", "model.preset=t5": "92e05fdf",
    "model.qk_norm=rmsnorm": "14a82a6d", "model.norm_type.eps=0.001": "229c2562", "train.loss_chunk=64": "ffbd800b",
    "train.device=cpu": "40b95434", "train.steps=7 train.eval_every=3": "0bf6026f",
    "model.kind=decoder task.name=copy": "7dc93e66",
}


@pytest.mark.parametrize("sets", list(WRITTEN_BEFORE))
def test_every_earlier_fingerprint_stays(sets):
    assert fingerprint(load_experiment(None, sets.split())) == WRITTEN_BEFORE[sets]


class LongerTrain(TrainSpec):
    """TrainSpec with a field added later, as the next release would add one."""

    new_switch: float = Field(0.5, ge=0.0)


class LongerRecipe(ModelRecipe):
    new_switch: bool = False


def test_a_field_added_with_a_default_keeps_every_name_by_construction():
    before = load_experiment(None, ["model.norm=pre", "train.optimizer.lr=0.01"])

    def later(train=None, model=None):  # the experiment as the next release would hold it
        return ExperimentSpec.model_construct(task=before.task, wandb=before.wandb,
                                              train=LongerTrain(**before.train.model_dump(), **(train or {})),
                                              model=LongerRecipe(**before.model.model_dump(), **(model or {})))

    assert fingerprint(later()) == fingerprint(before)
    moved = later(train={"new_switch": 0.25})
    assert identity(moved)["train.new_switch"] == 0.25 and fingerprint(moved) != fingerprint(before)
    switched = later(model={"new_switch": True})
    assert identity(switched)["model.new_switch"] is True and fingerprint(switched) != fingerprint(before)


def test_the_experiment_holds_a_recipe_validated_once_at_load():
    experiment = load_experiment(None, ["model.vocab_size=64"])
    assert type(experiment.model) is ModelRecipe and experiment.model.src_vocab_size == 64
    assert fingerprint(experiment) != fingerprint(load_experiment(None)), "a model of other sizes is another run"
    assert experiment.model_spec(29, 29).src_vocab_size == 64, "the recipe's own sizes win over the task's"
    assert load_experiment(None).model_spec(29, 31).tgt_vocab_size == 31, "else the task's fill them in"
    with pytest.raises(zoo.ConfigError, match=r"model: .*d_modle.*did you mean 'd_model'"):
        load_experiment(None, ["model.d_modle=64"])
    with pytest.raises(zoo.ConfigError, match="pad_id 5 is outside src_vocab_size 4"):
        load_experiment(None, ["model.vocab_size=4", "model.pad_id=5"])
    with pytest.raises(TypeError, match=r"recipe.sized\(src, tgt\)"):
        zoo.build(experiment.model)


def test_set_changes_the_written_experiment_so_a_task_or_preset_replaces_the_default():
    random = load_experiment(None, ["task.name=random"])
    assert random.task == {"name": "random", "vocab_size": 64, "src_len": 16, "tgt_len": 16}
    assert load_experiment(None, ["model.preset=pre-ln"]).model.norm == "pre"


def test_a_grid_over_presets_keeps_the_bases_own_fields_on_top():
    sweep = SweepSpec.model_validate({"name": "p", "grid": {"model.preset": ["vaswani2017", "t5"]}, "seeds": [0]})
    base = {"model": {"preset": "vaswani2017", "d_model": 64, "n_heads": 2}}
    vaswani, t5 = (cell_experiment(sweep, base, cell).model for cell in expand(sweep))
    assert (vaswani.norm, t5.norm, t5.position.name) == ("post", "pre", "t5")
    assert vaswani.d_model == t5.d_model == 64 and t5.n_heads == 2


def test_a_named_run_keeps_its_name_and_an_unnamed_one_names_its_variant():
    named = load_experiment(None, ["wandb.name=mine"])
    assert run_name(named) == "mine" and fingerprint(named) == WRITTEN_BEFORE[""]
    assert run_name(ExperimentSpec()) == f"post.sinusoidal.fused.relu-seed0-{WRITTEN_BEFORE['']}"
