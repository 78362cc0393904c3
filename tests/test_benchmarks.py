"""The benchmark scripts run and print the JSON their README table is made from (`--smoke`: a tiny
size, one round; they measure nothing here, timings belong to the scripts, not to tests)."""

import importlib
import json
import time
from pathlib import Path

import pytest
import torch

import zoo
from trainkit import MULTI30K

pytestmark = pytest.mark.slow  # trains whole runs, starts processes or runs benchmarks: not in the fast tier

BENCHMARKS = Path(__file__).resolve().parents[1] / "experiments" / "benchmarks"


@pytest.fixture
def script(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return lambda name: importlib.import_module(name)


def printed(capsys) -> dict:
    return json.loads(capsys.readouterr().out)


def test_core(script, capsys):
    result = script("core").main(["--smoke"])
    assert printed(capsys) == json.loads(json.dumps(result))
    (size,) = result["training"]
    assert set(size["tokens_per_s"]) >= {"torch.nn.Transformer", "zoo fused", "zoo sdpa"}
    assert size["zoo_best"] in ("zoo fused", "zoo sdpa") and size["ratio_zoo_to_torch"] > 0
    assert result["per_head"]["ratio_per_head_to_fused"] > 0 and result["decoding"]["ratio_cache_to_recompute"] > 0


def test_reference(script, capsys):
    sample = ["t5", "bart", "gpt2", "llama", "gemma2", "bert"]  # every kind and layout; each family's own check is
    result = script("reference").main(["--smoke", "--only", *sample])  # tests/test_hf.py's, over all of them
    assert printed(capsys) == json.loads(json.dumps(result))
    assert [f["family"] for f in result["families"]] == sample, "a row per family asked"
    for measured in result["families"]:
        assert set(measured["ratio_to_transformers"]) == {"zoo fused", "zoo sdpa"}
        assert all(ratio > 0 for ratio in measured["ratio_to_transformers"].values())


def test_trainer(script, capsys):
    result = script("trainer").main(["--smoke"])
    assert printed(capsys)["ratio_trainer_to_bare"] == result["ratio_trainer_to_bare"] > 0


def test_compile(script, capsys):
    result = script("compile").main(["--smoke"])
    assert printed(capsys) == json.loads(json.dumps(result))
    runs = result["results"]
    assert list(runs) == ["eager", "torch default compile", "zoo compile (buckets)"]
    assert runs["eager"]["graphs"] == 0 and runs["eager"]["compile_s"] == 0
    assert all(runs[name]["graphs"] >= 1 and runs[name]["compile_s"] > 0 for name in list(runs)[1:])
    assert result["wall_ratio_to_eager"]["eager"] == 1.0


def test_chunked_loss(script, capsys):
    result = script("chunked_loss").main(["--smoke"])
    assert printed(capsys) == json.loads(json.dumps(result))
    assert set(result["kept_mib"]) == set(result["ms_per_step"]) == {"whole logits", "chunks of 8"}
    assert 0 < result["kept_ratio_chunked_to_whole"] < 1 and result["time_ratio_chunked_to_whole"] > 0


@pytest.mark.parametrize("data", ["multi30k", "made on the spot"])
def test_batching(script, capsys, data):
    result = script("batching").main(["--smoke", *(["--data-dir", str(MULTI30K)] if data == "multi30k" else [])])
    padding = printed(capsys)["padding"]
    assert padding["token batches"]["padding_share"] < padding["sentence batches"]["padding_share"]
    assert result["batch_tokens"] > 0 and ("made-up" in result["corpus"]) == (data != "multi30k")


def test_gpu_says_so_without_cuda_and_runs_its_code_on_cpu(script, capsys):
    gpu = script("gpu")
    if not torch.cuda.is_available():
        result = gpu.main([])
        assert printed(capsys) == result and result["ran"] is False and "no CUDA" in result["reason"]
    result = gpu.main(["--smoke"])
    assert printed(capsys)["results"].keys() == result["results"].keys() == {
        "zoo fused", "zoo per_head", "zoo sdpa", "torch.nn.Transformer"}
    assert result["met"] is None and all(r["tokens_per_s"] > 0 for r in result["results"].values())


def test_model_flops_count_matches_a_hand_count(script):
    """d_model 8, 1+1 layers: dense 6 x params x tokens by side, plus 12 x L^2 x d per attention."""
    gpu = script("gpu")
    model = torch.nn.ModuleDict({"encoder": torch.nn.Linear(8, 8, bias=False), "decoder": torch.nn.Linear(8, 4, bias=False),
                                 "generator": torch.nn.Linear(8, 2, bias=False)})
    flops = gpu.model_flops(model, rows=3, src_len=5, tgt_len=7, d=8, layers=1)
    assert flops == 6 * 3 * (64 * 5 + (32 + 16) * 7) + 12 * 3 * 8 * (25 + 49 + 35)



def test_sweep_workers(script, capsys):
    result = script("sweep_workers").main(["--smoke"])
    assert printed(capsys) == json.loads(json.dumps(result))
    assert result["cells"] == 2 and set(result["seconds"]) == {"worker per pool thread", "process per cell"}
    assert result["ratio_workers_to_process_per_cell"] > 0


def test_flex(script, capsys):
    result = script("flex").main(["--smoke"])
    assert printed(capsys) == json.loads(json.dumps(result))
    ratios = result["ratio_to_sdpa_without_positions"]
    assert ratios["none sdpa"] == 1.0 and all(ratio > 0 for ratio in ratios.values())
    for scheme in [name for name in zoo.registry("position").names() if name != "none"]:
        assert {f"{scheme} {kernel}" for kernel in ("fused", "sdpa", "flex")} <= set(ratios), scheme


def test_registry_runs(script, capsys):
    result = script("registry_runs").main(["--smoke"])
    assert printed(capsys) == json.loads(json.dumps(result))
    lists = result["lists"]
    assert "muon" in lists["optimizer"] and "adam" not in lists["optimizer"], "what no published ledger trains"
    assert len(result["runs"]) == max(map(len, lists.values()))
    for kind in ("optimizer", "schedule", "format"):
        assert {run[kind] for run in result["runs"]} == set(lists[kind]), kind
    assert all({"test/bleu", "test/chrf", "test/ter", "eval/loss"} <= run.keys() for run in result["runs"])


def test_probes(script, capsys):
    result = script("probes").main(["--smoke"])
    assert printed(capsys) == json.loads(json.dumps(result))
    assert set(result["ms"]) == {"probes", "evaluation", "steps between evaluations"}
    assert result["ratio_probes_to_evaluation"] > 0 and result["ratio_probes_to_training"] > 0


def test_spec_calls(script, capsys):
    result = script("spec_calls").main(["--smoke"])
    assert printed(capsys) == json.loads(json.dumps(result))
    assert result["layers"] == 4 and 0 < result["calls_into_zoo_specs"] < 20_000 and result["seconds"] > 0


def test_fsdp(script, capsys):
    result = script("fsdp").main(["--smoke", "--worlds", "2", "--checkpointing"])
    assert printed(capsys) == json.loads(json.dumps(result))
    assert [(row["parallel"], row["world"], row["checkpointing"]) for row in result["rows"]] == [
        ("fsdp", 2, "none"), ("ddp", 2, "none")]
    assert all(row["peak_rss_mib"] >= 0 and row["estimate_mib"] >= 0 and row["step_s"] > 0 for row in result["rows"])
    assert set(result["step_ratio_fsdp_to_ddp"]) == {2} and result["checkpointing_memory_ratio_to_none"] == {}
    if script("heap").in_use_reader() is not None:  # glibc
        assert all(row["ratio_in_use_to_estimate"] > 0 for row in result["rows"])
        assert set(result["estimate_within_25pct_of_in_use"]) == {"fsdp x2", "ddp x2"}


def test_freed_memory(script, capsys):
    result = script("freed_memory").main(["--smoke", "--ledger", "seed-axes"])
    assert printed(capsys) == json.loads(json.dumps(result))
    (row,) = result["results"]
    assert list(row["arms"]) == ["glibc default", "freed memory kept"] and row["steps"] == 2
    assert row["same_losses"] and row["ratio_wall_kept_to_default"] > 0
    assert all(arm["wall_s"] > 0 and arm["peak_rss_mib"] > 0 for arm in row["arms"].values())


def test_the_heap_peak_sees_a_tensor_freed_before_it_ends(script):
    heap = script("heap")
    if heap.in_use_reader() is None:
        pytest.skip("no glibc mallinfo2 here: the benchmarks print no bytes in use")
    with heap.HeapPeak() as peak:
        held = torch.ones(16 * 2**20)  # 64 MiB
        time.sleep(0.05)  # the sampler's turn while it lives
        del held
    assert 64 * 2**20 <= peak.above_start < 80 * 2**20


def test_data(script, capsys):
    result = script("data").main(["--smoke"])
    assert printed(capsys) == json.loads(json.dumps(result))
    zoo_store = result["stores"]["zoo"]
    assert zoo_store["prepare"]["tokens"] == zoo_store["prepare, learning the tokenizer"]["tokens"] > 0
    assert set(result["memory"]["stores"]) == {"1 MB", "4 MB"} and result["memory"]["ratio_largest_to_smallest_peak"] > 0
    assert result["loader"]["ratio_loader_to_step"] > 0
