"""What interop asks of the specs: the calls into zoo/specs (and the seconds) that one `zoo.to_hf`
of a Gemma 2 of 26 layers makes, where per-layer rules give it two kinds of layer.

    python experiments/benchmarks/spec_calls.py            # prints JSON
    python experiments/benchmarks/spec_calls.py --smoke    # 4 layers: checks the script

Each layer's spec is validated once per kind of layer and kept by the frozen spec (at_layer), and
what the spec expresses is read once for every family to_hf tries; before, 720 validations and
198,445 calls into zoo/specs (2026-11-27, AMD EPYC family 25 model 17).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from pathlib import Path

from common import emit, machine

import zoo

SPECS = str(Path(zoo.__file__).parent / "specs")


def measure(layers: int) -> dict[str, object]:
    spec = zoo.spec("gemma2", vocab_size=64, d_model=32, n_heads=2, n_kv_heads=1, d_ff=64, head_width=16, max_len=64,
                    n_decoder_layers=layers)
    model = zoo.build(spec)
    zoo.to_hf(model)  # transformers' imports and first builds, apart from the count
    model = zoo.build(spec)  # a fresh spec: nothing kept from the first call
    profile = cProfile.Profile()
    start = time.perf_counter()
    profile.enable()
    zoo.to_hf(model)
    profile.disable()
    seconds = time.perf_counter() - start
    stats = pstats.Stats(profile).stats
    calls = sum(count for (file, _, _), (_, count, *_) in stats.items() if file.startswith(SPECS))
    validations = sum(count for (_, _, name), (_, count, *_) in stats.items() if name == "model_validate")
    return {"layers": layers, "calls_into_zoo_specs": calls, "model_validate_calls": validations,
            "seconds": round(seconds, 2)}


def main(argv: list[str] | None = None) -> dict[str, object]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="4 layers: checks the script")
    args = parser.parse_args(argv)
    result = {**measure(4 if args.smoke else 26), "machine": machine()}
    emit(result)
    return result


if __name__ == "__main__":
    main()
