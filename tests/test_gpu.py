"""The trainer on CUDA: auto device and bf16 autocast, fp16 with a grad scaler, torch.compile, and
CPU/GPU agreement of a model. Skipped where CUDA is absent (CI); run them on a GPU machine."""

import pytest
import torch
from conftest import combos, padded_batch, tiny

import zoo
from trainkit import tiny_experiment
from zoo.kernels import flex

if not torch.cuda.is_available():  # one line in the summary for the module, not one per test
    pytest.skip("GPU tests: needs CUDA (none on this machine)", allow_module_level=True)

pytestmark = pytest.mark.gpu


def losses(result) -> list[float]:
    return [row["train/loss"] for row in result.history if "train/loss" in row]


def test_auto_picks_cuda_with_bf16_and_the_checkpoint_loads_on_cpu(tmp_path):
    result = zoo.train(tiny_experiment(tmp_path, train={"device": "auto", "precision": "auto"}))
    state = torch.load(result.checkpoint, weights_only=True, map_location="cpu")
    assert state["experiment"]["train"]["precision"] == "auto" and state["rng"]["cuda"] is not None
    assert losses(result)[-1] < 0.6 * losses(result)[0]
    model, _ = zoo.load(result.checkpoint, map_location="cpu")
    assert next(model.parameters()).device.type == "cpu"


def test_fp16_uses_a_grad_scaler(tmp_path):
    result = zoo.train(tiny_experiment(tmp_path, train={"device": "cuda", "precision": "fp16"}))
    state = torch.load(result.checkpoint, weights_only=True, map_location="cpu")
    assert state["scaler"] is not None and state["scaler"]["scale"] > 0
    assert losses(result)[-1] < 0.6 * losses(result)[0]


def test_compiled_training_follows_eager_training(tmp_path):
    common = {"device": "cuda", "precision": "fp32", "steps": 40}
    eager = zoo.train(tiny_experiment(tmp_path / "eager", train=common))
    compiled = zoo.train(tiny_experiment(tmp_path / "compiled", train={**common, "compile": True}))
    assert losses(compiled) == pytest.approx(losses(eager), rel=1e-3)


@pytest.mark.parametrize("name", combos())
def test_cuda_and_cpu_compute_the_same_model(name):
    torch.backends.cuda.matmul.allow_tf32 = False  # compare fp32 with fp32
    model = zoo.build(tiny(name), seed=0).eval()
    src = padded_batch([5, 7, 3], 19)
    tgt = padded_batch([4, 6, 6], 19, seed=1)
    on_cpu = model(src, tgt)
    on_gpu = model.cuda()(src.cuda(), tgt.cuda()).cpu()
    assert torch.allclose(on_cpu, on_gpu, atol=1e-4, rtol=1e-4)


def test_a_training_step_on_cuda_never_synchronizes(tmp_path):
    """CUDA's own sync debug mode raises on any synchronizing call during steps 2 to 5."""
    from zoo.specs.experiment import validate_experiment
    from zoo.trainer.loop import Trainer

    experiment = tiny_experiment(tmp_path, model={"attention": "sdpa", "n_kv_heads": 1},
                                 train={"device": "cuda", "precision": "bf16", "label_smoothing": 0.1})
    trainer = Trainer(validate_experiment(experiment))
    try:
        trainer._train_step(1)
        for step in range(2, 6):
            batch = trainer.feed.take(step)
            torch.cuda.synchronize()
            torch.cuda.set_sync_debug_mode("error")
            try:
                trainer.train_step(step, batch)
            finally:
                torch.cuda.set_sync_debug_mode("default")
            trainer.feed.prepare(step + 1)
        trainer.train_step.window.settle()
    finally:
        trainer.tracker.finish(failed=False)
        trainer.folder.release()


@pytest.mark.parametrize("position", zoo.registry("position").names())
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_sdpa_kernels_compute_what_fused_computes_on_cuda(position, dtype):
    """The same weights in `fused` (the reference attend) and `sdpa` (CUDA's fused kernels), with
    padding, causality and every position scheme's score bias."""
    torch.backends.cuda.matmul.allow_tf32 = False
    fused = zoo.build(tiny("pre.sinusoidal.fused.relu", position=position), seed=0).eval()
    sdpa = zoo.convert(fused, attention="sdpa").eval()
    fused, sdpa = fused.cuda().to(dtype), sdpa.cuda().to(dtype)
    src, tgt = padded_batch([5, 7, 3], 19).cuda(), padded_batch([4, 6, 6], 19, seed=1).cuda()
    with torch.no_grad():
        expected, got = fused(src, tgt).float(), sdpa(src, tgt).float()
    tolerance = 1e-4 if dtype == torch.float32 else 3e-2
    assert torch.allclose(got, expected, atol=tolerance, rtol=tolerance)


@pytest.mark.parametrize("position", zoo.registry("position").names())
@pytest.mark.parametrize("head_dim", [4, 16])
def test_flex_on_cuda_computes_what_fused_computes(position, head_dim, monkeypatch):
    """FlexAttention's CUDA kernel where it takes the heads (16 dimensions or more), the reference
    where it does not: the same numbers either way, with padding, causality and every position
    scheme's score bias."""
    torch.backends.cuda.matmul.allow_tf32 = False
    calls, attend = [], flex.flex_attend
    monkeypatch.setattr(flex, "flex_attend", lambda q, *args: calls.append(q.shape) or attend(q, *args))
    fused = zoo.build(tiny("pre.sinusoidal.fused.relu", position=position, n_heads=2, d_model=2 * head_dim),
                      seed=0).eval().cuda()
    flexed = zoo.convert(fused, attention="flex").eval()
    src, tgt = padded_batch([5, 7, 3], 19).cuda(), padded_batch([4, 6, 6], 19, seed=1).cuda()
    with torch.no_grad():
        expected, got = fused(src, tgt), flexed(src, tgt)
    assert bool(calls) == (head_dim >= flex.CUDA_MIN_HEAD_DIM)
    assert torch.allclose(got, expected, atol=1e-4, rtol=1e-4)
