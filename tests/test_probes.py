"""Mechanism statistics (zoo.kernels.probes): the same for every attention layout, the entropy of the
attention maps, a largest logit that scales with the queries, and in a run's history and W&B at
each evaluation when train.probes asks."""

import pytest
import torch
from conftest import padded_batch, tiny

import zoo
from trainkit import offline_run, tiny_experiment
from zoo.kernels.probes import mechanism_metrics
from zoo.model.kinds import model_class


def statistics(model: zoo.ZooModel) -> dict[str, float]:
    spec, kind = model.spec, model_class(model.spec)
    src = padded_batch([9, 12, 7], spec.src_vocab_size, spec=spec)
    tgt = padded_batch([5, 8, 8], spec.tgt_vocab_size, seed=1, spec=spec)
    inputs, labels = kind.frame(spec, src, tgt)
    return mechanism_metrics(model.eval(), inputs, kind.input_masks(spec, inputs), labels != spec.pad_id)


@pytest.mark.parametrize("attention", zoo.registry("attention").names())
def test_every_attention_layout_gives_the_statistics_of_the_reference(attention):
    """Each layout computes the same function from the same weights (the zoo seeds each weight by
    its canonical name), and under a probe each computes with the reference kernel."""
    reference = statistics(zoo.build(tiny("pre.alibi.fused.relu"), seed=0))
    measured = statistics(zoo.build(tiny(f"pre.alibi.{attention}.relu"), seed=0))
    assert set(measured) == set(reference) and len([k for k in measured if k.startswith("mech/attn_entropy/")]) == 5
    assert measured == pytest.approx(reference, rel=1e-5)


def test_the_entropy_is_that_of_the_attention_maps():
    model = zoo.build(tiny("post.sinusoidal.fused.relu"), seed=0).eval()
    spec, kind = model.spec, model_class(model.spec)
    src = padded_batch([9, 12, 7], spec.src_vocab_size, spec=spec)
    tgt = padded_batch([5, 8, 8], spec.tgt_vocab_size, seed=1, spec=spec)
    inputs, _ = kind.frame(spec, src, tgt)
    with torch.no_grad():
        maps = model.attention_maps(*inputs)
    measured = statistics(model)

    def entropy(weights):
        return float(-(weights * weights.clamp_min(1e-30).log()).sum(-1).mean())

    assert measured["mech/attn_entropy/encoder.layers.0.self_attn"] == pytest.approx(entropy(maps.encoder[0]), rel=1e-5)
    assert measured["mech/attn_entropy/decoder.layers.1.cross_attn"] == pytest.approx(entropy(maps.decoder_cross[1]),
                                                                                     rel=1e-5)


def test_doubling_a_layers_queries_doubles_its_largest_logit_alone():
    model = zoo.build(tiny("post.sinusoidal.fused.relu"), seed=0)
    before = statistics(model)
    attention = model.encoder.layers[0].self_attn
    state = attention.canonical_state()
    attention.load_canonical_state({k: 2 * v if k.startswith("q.") else v for k, v in state.items()})
    after = statistics(model)
    name = "mech/attn_logit_max/encoder.layers.0.self_attn"
    assert after[name] == pytest.approx(2 * before[name], rel=1e-5)
    assert after["mech/attn_logit_max/decoder.layers.0.self_attn"] == before["mech/attn_logit_max/decoder.layers.0.self_attn"]
    assert after["mech/attn_logit_max/decoder.layers.0.cross_attn"] != before["mech/attn_logit_max/decoder.layers.0.cross_attn"]
    assert after["mech/output_logsumexp"] > 0 and after["mech/output_logit_max"] > 0


@pytest.mark.slow
def test_a_run_with_probes_logs_them_at_each_evaluation_and_to_wandb(tmp_path):
    common = {"steps": 20, "eval_every": 10, "log_every": 10, "checkpoint_every": 20}
    probed = zoo.train(tiny_experiment(tmp_path / "on", train={**common, "probes": True},
                                       wandb={"mode": "offline", "dir": str(tmp_path / "on")}))
    rows = [row for row in probed.history if "mech/attn_logit_max" in row]
    assert [row["train/step"] for row in rows] == [10, 20] and all("eval/loss" in row for row in rows)
    assert not any(key.startswith("mech") for key in probed.best), "a statistic is never a best"
    _, records = offline_run(tmp_path / "on")
    logged = [r["history"] for r in records if r["type"] == "history"]
    assert any("mech/attn_logit_max" in str(row) for row in logged), "W&B holds what the history holds"
    plain = zoo.train(tiny_experiment(tmp_path / "off", train=common))
    assert not any(key.startswith("mech") for row in plain.history for key in row)


def test_the_probe_check_costs_compiled_attention_no_graph_break():
    """attend asks whether a probe listens on every call; torch.compile must trace that question."""
    import torch._dynamo as dynamo

    from zoo.kernels.attend import attend

    q = torch.randn(2, 2, 5, 4)
    explained = dynamo.explain(lambda q: attend(q, q, q, None, causal=True)[0])(q)
    assert explained.graph_break_count == 0, [str(reason.reason)[:200] for reason in explained.break_reasons]
