"""The `flex` attention: FlexAttention's path (its CPU path here, its fused kernels on a GPU) computes
what the reference computes, for every position scheme, with padding, all-padding rows, grouped
heads, windows, soft-capped scores, each kind and cached decoding; where FlexAttention cannot run,
the reference does."""

import pytest
import torch
from conftest import TINY, padded_batch

import zoo
from zoo.kernels import flex
from zoo.specs.registries import kinds

POSITIONS = zoo.registry("position").names()


@pytest.fixture
def flex_calls(monkeypatch) -> list[tuple]:
    """FlexAttention's path taken on the CPU too; each call's query shape recorded."""
    monkeypatch.setattr(flex, "FLEX_ON_CPU", True)
    calls, attend = [], flex.flex_attend

    def counted(q, *args):
        calls.append(tuple(q.shape))
        return attend(q, *args)

    monkeypatch.setattr(flex, "flex_attend", counted)
    return calls


def inputs(spec: zoo.ModelSpec) -> tuple[torch.Tensor, ...]:
    src, tgt = padded_batch([7, 3, 5], TINY["vocab_size"], seed=1), padded_batch([6, 4, 2], TINY["vocab_size"], seed=2)
    src[2] = 0  # a row that is all padding
    return (src, tgt) if spec.kind == "encoder_decoder" else (tgt,)


@pytest.mark.parametrize("kind", kinds())
@pytest.mark.parametrize("position", POSITIONS)
@pytest.mark.parametrize("extra", [{}, {"n_kv_heads": 1, "attn_softcap": 2.0}, {"window": 3}],
                         ids=["plain", "gqa+softcap", "window"])
def test_flex_computes_what_the_reference_computes(flex_calls, kind, position, extra):
    reference = zoo.build(f"pre.{position}.fused.gelu", seed=0, kind=kind, **{**TINY, **extra}).eval()
    model = zoo.convert(reference, attention="flex").eval()
    with torch.no_grad():
        expected, got = reference(*inputs(reference.spec)), model(*inputs(model.spec))
    assert flex_calls, "FlexAttention's path ran"
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got, expected, atol=2e-5, rtol=1e-5)
    if kind != "encoder":  # cached decoding: one query over the cache each step
        prompt = inputs(model.spec)[0]
        flex_calls.clear()
        assert torch.equal(model.generate(prompt, max_new_tokens=5), reference.generate(prompt, max_new_tokens=5))
        assert any(shape[2] == 1 for shape in flex_calls)


def test_training_on_the_cpu_takes_the_reference_with_the_same_gradients(flex_calls):
    reference = zoo.build("pre.alibi.fused.relu", seed=0, **TINY)
    model = zoo.convert(reference, attention="flex")
    flex_calls.clear()  # convert's probe of the function (inference, no gradient) may take the kernel
    src, tgt = inputs(reference.spec)
    for m in (reference, model):
        m(src, tgt)[tgt != 0].pow(2).mean().backward()
    assert not flex_calls, "FlexAttention has no backward pass on the CPU"
    grads = dict(reference.named_parameters())
    for name, param in model.named_parameters():
        assert torch.equal(param.grad, grads[name].grad), name


def test_attention_dropout_and_maps_take_the_reference(flex_calls):
    model = zoo.build("pre.t5.flex.relu", seed=0, **{**TINY, "dropout": 0.3}).eval()
    src, tgt = inputs(model.spec)
    with torch.no_grad():
        model(src, tgt)
        assert flex_calls, "in evaluation no dropout: FlexAttention"
        flex_calls.clear()
        model.train()(src, tgt)
    assert not flex_calls, "FlexAttention has no attention dropout"
    assert not flex.runs_here(torch.zeros(1, device="cpu"), None, 0.0, need_weights=True)


def test_heads_narrower_than_the_cuda_kernel_takes_go_to_the_reference():
    """FlexAttention's CUDA kernel refuses heads under 16 dimensions (tests/test_gpu.py holds both
    sides on a GPU); the CPU's unfused path takes any width."""
    assert [flex.cuda_kernel_takes(width) for width in (4, 8, 15, 16, 64)] == [False, False, False, True, True]


def test_without_the_switch_the_cpu_computes_with_the_reference(monkeypatch):
    calls = []
    monkeypatch.setattr(flex, "flex_attend", lambda *args: calls.append(args))
    model = zoo.build("pre.alibi.flex.relu", seed=0, **TINY).eval()
    with torch.no_grad():
        assert torch.isfinite(model(*inputs(model.spec))).all()
    assert not calls, "the unfused CPU path is slower than the reference"
