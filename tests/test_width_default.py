"""A d_model given without a d_ff keeps the base's ratio (4 x d_model for vaswani2017 and the
canonical names) instead of its 2048 at every width; a d_ff given, or `auto`, stays as written;
`zoo show` says where a d_ff came from; published runs keep their folders."""

from pathlib import Path

import pytest

import zoo
from zoo.cli import main
from zoo.specs.experiment import validate_experiment

V = {"vocab_size": 64}


@pytest.mark.parametrize("name", ["vaswani2017", "pre.learned.per_head.gelu", *zoo.list_variants("*llama*")[:1]])
def test_d_ff_follows_a_new_d_model_at_the_bases_ratio(name):
    base = zoo.spec(name, **V)
    if base.d_ff == "auto":
        assert zoo.spec(name, d_model=64, n_heads=4, **V).d_ff == "auto"
        return
    assert zoo.spec(name, d_model=64, n_heads=4, **V).d_ff == round(64 * base.d_ff / base.d_model)
    assert zoo.spec(name, d_model=64, n_heads=4, d_ff=100, **V).d_ff == 100, "a d_ff given stays"
    assert zoo.spec(name, d_model=base.d_model, **V).d_ff == base.d_ff


def test_an_experiment_that_writes_d_model_alone_gets_the_ratio_and_one_that_writes_both_keeps_them():
    assert validate_experiment({"model": {"preset": "pre-ln", "d_model": 64, "n_heads": 4}}).model.d_ff == 256
    assert validate_experiment({"model": {"preset": "pre-ln", "d_model": 64, "n_heads": 4, "d_ff": 2048}}).model.d_ff == 2048
    assert validate_experiment({}).model.d_ff == 512, "the default experiment writes its d_ff"


def test_zoo_show_says_where_d_ff_came_from(capsys):
    main(["show", "pre-ln", "--set", "d_model=64", "n_heads=4"])
    out = capsys.readouterr().out
    assert "# d_ff: 256, d_model 64 times pre-ln's ratio (2048 at d_model 512), since only d_model was given" in out
    assert "\nd_ff: 256\n" in out
    main(["show", "pre-ln", "--set", "d_model=64", "n_heads=4", "d_ff=128"])
    assert "# d_ff:" not in capsys.readouterr().out


def test_every_published_cell_keeps_its_fingerprint(monkeypatch):
    """Every cell of every published sweep, resolved today with and without the rule, is the same
    run: their experiments wrote d_ff wherever they changed d_model."""
    from zoo.specs import catalog
    from zoo.specs.identity import fingerprint
    from zoo.sweep.spec import cell_experiment, expand, read_saved_sweep

    folders = sorted(path.parent for path in (Path(__file__).resolve().parents[1] / "experiments" / "results").glob(
        "*/sweep.yaml"))
    swept = [(sweep, base, cell) for sweep, base in map(read_saved_sweep, folders) for cell in expand(sweep)]
    today = [fingerprint(cell_experiment(*each)) for each in swept]
    monkeypatch.setattr(catalog, "following_width", lambda base, overrides: {})
    assert [fingerprint(cell_experiment(*each)) for each in swept] == today and len(today) > 500
