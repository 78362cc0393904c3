"""Every error a user can meet through the Python API is a zoo.ZooError that says what to change;
every other `raise` in the zoo marks a bug, a protocol or the operating system's answer."""

from __future__ import annotations

import argparse
import ast
import builtins
import importlib
import inspect
import re
from pathlib import Path

import pytest
import torch
import yaml
from pydantic import ValidationError
from pydantic_core import PydanticCustomError

import zoo
from zoo.errors import ZooError

ROOT = Path(zoo.__file__).parent
NOT_A_MISTAKE = (NotImplementedError, SystemExit, KeyboardInterrupt, AttributeError, OSError)
"""Raised on purpose, never for a user's mistake: an abstract method (met only where a subclass
forgot it: a bug), the command line's exit, a signal passed on, the attribute protocol, and the
operating system's answer about a path (exit_code_of prints it as one line)."""
TURNED_INTO_ZOO_ERRORS = (PydanticCustomError, argparse.ArgumentTypeError, yaml.YAMLError)
"""Raised where a reader makes them one: pydantic's inside validators (a ConfigError at the spec's
entry), argparse's in argument types (a usage line, exit 2), YAML's in the loader (file:line)."""


def raises() -> list[tuple[str, int, str]]:
    """(module, line, the raised class or factory as written) of every `raise X` and `raise X(...)`."""
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        module = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Raise) and node.exc is not None:
                target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                if isinstance(target, (ast.Name, ast.Attribute)):
                    found.append((module, node.lineno, ast.unparse(target)))
    return found


def resolved(module: str, written: str) -> object:
    """What a raised name means in its module; None for a local (an error caught and raised again)."""
    head, *rest = written.split(".")
    namespace = vars(importlib.import_module(module))
    value = namespace.get(head, getattr(builtins, head, None))
    for part in rest:
        value = getattr(value, part, None)
    return value


def test_every_raise_is_a_zoo_error_or_not_a_users_mistake():
    wrong = []
    for module, line, written in raises():
        value = resolved(module, written)
        if value is None:
            continue
        factory = inspect.isfunction(value) and inspect.signature(value).return_annotation == "PydanticCustomError"
        if not factory and not (isinstance(value, type) and issubclass(value, (ZooError, *NOT_A_MISTAKE,
                                                                                  *TURNED_INTO_ZOO_ERRORS))):
            wrong.append(f"{module}:{line} raises {written}")
    assert not wrong, "a user's mistake is a zoo.ZooError (zoo/errors.py); a bug keeps Python's: " + "; ".join(wrong)


def test_the_scan_sees_the_raises():
    kinds = {written for _, _, written in raises()}
    assert {"ConfigError", "InteropError", "InputError", "NotImplementedError"} <= kinds


def tiny(source: str = "pre-ln", **fields) -> zoo.ZooModel:
    return zoo.build(source, **{"vocab_size": 10, "d_model": 16, "n_heads": 2, "d_ff": 32, "n_encoder_layers": 1,
                                "n_decoder_layers": 1, "max_len": 8, "position": "learned", **fields})


IDS = torch.ones(1, 3, dtype=torch.long)
MISTAKES = {
    "a spec built by calling it": (lambda: zoo.ModelSpec(vocab_size=10, d_model=-1),
                                   zoo.ConfigError, "ModelSpec: d_model: Input should be greater than 0"),
    "another library's name": (lambda: zoo.ExperimentSpec(train={"max_steps": 5}),
                               zoo.ConfigError, "unknown field 'max_steps' (did you mean 'steps'?)"),
    "a frozen spec": (lambda: setattr(zoo.ModelSpec(vocab_size=10), "d_model", 64),
                      zoo.ConfigError, "frozen: spec.replace(d_model=...)"),
    "a replace": (lambda: zoo.spec("pre-ln", vocab_size=10).replace(ffn="swigluu"),
                  zoo.ConfigError, "did you mean 'swiglu'"),
    "a spec of no kind": (lambda: zoo.resolve(42), zoo.ConfigTypeError, "cannot make a ModelSpec from int"),
    "an unknown name": (lambda: zoo.registry("optimizer").get("adamm"), zoo.ConfigError, "did you mean 'adam'"),
    "a name with a dot": (lambda: zoo.registry("metric").register("a.b"), zoo.ConfigError, "without dots"),
    "float ids": (lambda: tiny()(IDS.float(), IDS), zoo.InputTypeError, "src must hold int64 token ids"),
    "an id past the vocabulary": (lambda: tiny()(IDS * 10, IDS), zoo.InputError, "src holds id 10"),
    "a sequence past max_len": (lambda: tiny()(torch.ones(1, 9, dtype=torch.long), IDS), zoo.InputError,
                                "9 positions is longer than max_len 8"),
    "an encoder asked to decode": (lambda: tiny("encoder.pre.learned.fused.relu").generate(IDS), zoo.ConfigError,
                                   "a model of kind encoder does not decode"),
    "no such checkpoint": (lambda: zoo.load("no-such.pt"), zoo.CheckpointError, "no such checkpoint"),
    "no such corpus": (lambda: zoo.train({"task": {"name": "parallel", "data_dir": "no-such-folder"}}),
                       zoo.MissingData, "no train.de"),
    "a model no spec describes": (lambda: zoo.to_hf(tiny(), "gpt2"), zoo.ConfigError, "is not a gpt2 model"),
}


@pytest.mark.parametrize("call, kind, text", MISTAKES.values(), ids=MISTAKES)
def test_a_mistake_through_the_python_api_is_a_zoo_error_that_names_it(call, kind, text):
    with pytest.raises(kind, match=re.escape(text)) as err:
        call()
    assert isinstance(err.value, ZooError)
    if kind is zoo.ConfigError and isinstance(err.value.__cause__, ValidationError):
        assert err.value.__cause__.errors(), "pydantic's details stay reachable as the cause"


def test_a_configuration_no_spec_reads_is_an_interop_error():
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=20, activation_function="tanh",
                                     bos_token_id=1, eos_token_id=2)
    with pytest.raises(zoo.InteropError, match=re.escape("from_hf (gpt2): GPT-2 activation_function 'tanh' has no zoo")):
        zoo.from_hf(transformers.GPT2LMHeadModel(config))
