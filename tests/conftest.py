"""Shared fixtures. Every per-variant test parametrizes over GRID, built from the registries, so a
newly registered part is covered without a new test: every pair of values of any two axes (the
model's kind and the per-layer pattern among them, a part's tried settings among its axis's values)
meets in some variant,
and the four seed axes are crossed in full."""

import compileall
import functools
import itertools
import os
from pathlib import Path

import pytest
import torch
from covering import pairwise

import zoo
from zoo.model.generate import never_emitted
from zoo.specs.choices import parse_choice_text, settings_model
from zoo.specs.registries import kinds

LAYER_PATTERNS = {"same": {}, "alternate": {"local": {"every": 2, "at": 0, "set": {"window": 3, "d_ff": 24}}}}
"""The grid's per-layer patterns: every layer alike, or the even layers (the first of each stack)
windowed and narrower than the odd ones."""


THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
"""What sets the threads of torch, of numpy's OpenBLAS and of MKL, each read once, as its library loads."""


def pytest_configure(config):
    """In the controller, before any worker starts: byte-compile the zoo's sources once, and give
    each worker its share of the cores.

    Bytecode: the hundreds of processes the tests start (runs, sweep workers, torchrun ranks) load
    it. Where PYTHONDONTWRITEBYTECODE is set (as on the machine CI runs on) no import writes it,
    and each process compiled the zoo again (0.3 s a start).

    Threads: set in the environment the workers inherit, and so each process a test starts (a
    sweep's workers split it). A worker that set them itself did so after importing torch, which
    loads numpy and its OpenBLAS: those kept a thread per core, which spun against the other
    worker (the published comparison of every ledger took 55 s of CPU in the suite, 19 s alone)."""
    if hasattr(config, "workerinput"):
        return
    for folder in ("zoo", "variants", "tests"):
        compileall.compile_dir(Path(__file__).resolve().parents[1] / folder, quiet=1)
    workers = config.getoption("numprocesses", None)
    if isinstance(workers, int) and workers > 0:
        share = str(max(1, (os.cpu_count() or 1) // workers))
        os.environ.update(dict.fromkeys(THREAD_VARIABLES, share))


def name_of(fields: dict) -> str:
    """The canonical name of the variant with these axis values (a part with settings as its text)."""
    fields = {key: parse_choice_text(value) if key in zoo.AXES else LAYER_PATTERNS[value] if key == "layers" else value
              for key, value in fields.items()}
    return zoo.spec("post.sinusoidal.fused.relu", vocab_size=19, **fields).name


@functools.cache
def combos() -> list[str]:
    """Every combination of every axis's parts (what `zoo build-all` builds): thousands of names,
    made when a test first asks (6 s of every test process's start when they were made at import)."""
    return [name_of(dict(zip(zoo.AXES, combo)))
            for combo in itertools.product(*(zoo.registry(axis).names() for axis in zoo.AXES))]

SEED_AXES = {"norm": ["post", "pre"], "position": ["sinusoidal", "learned"], "attention": ["per_head", "fused"],
             "ffn": ["relu", "gelu"]}
"""The four axes the zoo started from, crossed in full (the main job's grid) for every kind."""

PARTS = [(axis, name) for axis in zoo.AXES for name in zoo.registry(axis).names()]
"""Every registered part once, as (axis, name): the one list for properties of a single part; GRID
is for behaviour, where parts meet."""
PART_IDS = [f"{axis}={name}" for axis, name in PARTS]


def parts_met(excluded: set[tuple[str, str]] = frozenset()) -> list[dict[str, str]]:
    """Rows of one part per axis in which every registered part (but those `excluded`) appears:
    as many rows as the largest axis has parts, for behaviour measured on a model a row at several
    widths (the coordinate check), where parts meet; a failing module's row names its part."""
    names = {axis: [n for n in zoo.registry(axis).names() if (axis, n) not in excluded] for axis in zoo.AXES}
    return [{axis: parts[i % len(parts)] for axis, parts in names.items()} for i in range(max(map(len, names.values())))]


def row_id(row: dict[str, str]) -> str:
    return ",".join(f"{axis}={name}" for axis, name in row.items())


def axis_values(axis: str) -> list[str]:
    """Each part of the axis, and each of the settings its Settings.TRIED names, as a part is
    written in a canonical name (`rope+fraction=0.5`)."""
    values = []
    for name in zoo.registry(axis).names():
        tried = settings_model(zoo.registry(axis).get(name)).TRIED
        values += [name, *(name + "".join(f"+{key}={value}" for key, value in settings.items()) for settings in tried)]
    return values


AXIS_VALUES = {**{axis: axis_values(axis) for axis in zoo.AXES}, "kind": list(kinds()), "layers": list(LAYER_PATTERNS)}
PAIRWISE = pairwise(AXIS_VALUES)
SEED_PRODUCT = [{**dict(zip(SEED_AXES, combo)), "kind": kind}
                for kind in kinds() for combo in itertools.product(*SEED_AXES.values())]
GRID = list(dict.fromkeys(name_of(fields) for fields in [*PAIRWISE, *SEED_PRODUCT]))
AXIS_VALUE_NAMES = list(dict.fromkeys(name_of({axis: value}) for axis, values in AXIS_VALUES.items() for value in values))
"""Each axis value once, every other axis at the grid's base: what a property of one value (a spec's
round trip through its files) runs over; GRID is for behaviour, where values meet."""

TINY = dict(
    vocab_size=19, d_model=16, n_heads=4, n_kv_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=2, dropout=0.0,
    max_len=40,
)
"""A model small enough that the whole grid of variants runs in seconds."""


@pytest.fixture(params=GRID)
def variant(request) -> str:
    return request.param


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory):
    """One tiny run of 40 steps, trained once per test process and shared by the tests that only
    read a finished run (its checkpoint, its metrics, a model folder saved from it elsewhere): none
    may change its files."""
    from trainkit import tiny_experiment

    return zoo.train(tiny_experiment(tmp_path_factory.mktemp("trained-run"), train={"steps": 40}))


@pytest.fixture(scope="session")
def kept_children():
    from zoo.sweep.warm_retrain import WarmChildren

    children = WarmChildren()
    yield children
    children.close()


@pytest.fixture
def warm_retraining(kept_children):
    """Cells trained again (zoo reproduce, the rounding benchmark) in children kept for the whole
    test process (zoo.sweep.warm_retrain): a child's start, about 3 s of CPU, is paid once per
    environment instead of once per cell (28 published ledgers, each trained a few seconds).
    Only the tests that ask for it retrain in them."""
    from zoo.sweep.warm_retrain import warm_children

    with warm_children(kept_children):
        yield


def tiny(name: str, **overrides) -> zoo.ModelSpec:
    return zoo.spec(name, **{**TINY, **overrides})


def padded_batch(lengths, vocab_size: int, seed: int = 0, spec: zoo.ModelSpec | None = None) -> torch.Tensor:
    """Rows of random ordinary tokens, each ending in eos and right-padded to the longest row."""
    pad, eos = (spec.pad_id, spec.eos_id) if spec is not None else (0, 2)
    gen = torch.Generator().manual_seed(seed)
    batch = torch.full((len(lengths), max(lengths)), pad, dtype=torch.long)
    for row, length in enumerate(lengths):
        batch[row, : length - 1] = torch.randint(3, vocab_size, (length - 1,), generator=gen)
        batch[row, length - 1] = eos
    return batch


def reference_greedy(model: zoo.ZooModel, inputs: torch.Tensor, steps: int) -> torch.Tensor:
    """Greedy decoding the slow, obvious way: re-run the whole model on the prefix every step; a
    decoder-only model's rows one at a time, each unpadded, then laid out as generate lays them."""
    spec = model.spec
    if spec.kind == "decoder":
        rows = [_reference_row(model, row[: int((row != spec.pad_id).sum())][None], steps) for row in inputs]
        out = torch.full((len(rows), max(r.size(1) for r in rows)), spec.pad_id)
        for i, row in enumerate(rows):
            out[i, : row.size(1)] = row[0]
        return out
    return _reference_row(model, inputs, steps)


def _reference_row(model: zoo.ZooModel, inputs: torch.Tensor, steps: int) -> torch.Tensor:
    spec = model.spec
    tokens = torch.full((inputs.size(0), 1), spec.bos_id) if spec.kind == "encoder_decoder" else inputs
    done = torch.zeros(inputs.size(0), dtype=torch.bool)
    for _ in range(steps):
        logits = (model(inputs, tokens) if spec.kind == "encoder_decoder" else model(tokens))[:, -1]
        logits[:, never_emitted(spec)] = float("-inf")
        nxt = torch.where(done, spec.pad_id, logits.argmax(-1))
        tokens = torch.cat([tokens, nxt[:, None]], dim=1)
        done |= nxt == spec.eos_id
        if done.all():
            break
    return tokens


@pytest.fixture(autouse=True)
def _wandb_mode_from_the_spec(monkeypatch):
    """WANDB_MODE in the environment wins over a spec; tests decide their mode themselves."""
    monkeypatch.delenv("WANDB_MODE", raising=False)
