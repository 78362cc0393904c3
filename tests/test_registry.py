"""Registry lookups, errors, and third-party plugins through entry points."""

import subprocess
import sys
import textwrap

import pytest
from torch import nn

import zoo
from zoo.specs.registries import Registry


def test_axes_and_builtin_names():
    assert zoo.AXES == ("norm", "position", "attention", "ffn", "norm_type")
    assert {"post", "pre", "res_post"} <= set(zoo.registry("norm").names())
    assert {"sinusoidal", "learned", "none"} <= set(zoo.registry("position").names())
    assert {"per_head", "fused"} <= set(zoo.registry("attention").names())
    assert {"relu", "gelu"} <= set(zoo.registry("ffn").names())


def test_unknown_name_suggests_and_lists_choices():
    with pytest.raises(ValueError) as err:
        zoo.registry("ffn").get("gleu")
    choices = ", ".join(zoo.registry("ffn").names())
    assert str(err.value) == f"unknown ffn 'gleu'; did you mean 'gelu'? choices: {choices}"
    with pytest.raises(zoo.UnknownChoiceError, match=r"^unknown norm 'zzz'; choices: "):
        zoo.registry("norm").get("zzz")


def test_unknown_registry_lists_axes():
    with pytest.raises(zoo.UnknownChoiceError, match="unknown registry 'fnn'; did you mean 'ffn'"):
        zoo.registry("fnn")


def test_register_rejects_taken_and_malformed_names():
    reg = Registry("demo")

    @reg.register("a")
    class A(nn.Module):
        pass

    assert reg.get("a") is A and "a" in reg
    with pytest.raises(ValueError, match=r"demo 'a' is already registered by .*A; pick another name"):
        reg.register("a")(type("B", (nn.Module,), {}))
    for bad in ("", "a.b", " a"):
        with pytest.raises(ValueError, match="not allowed"):
            reg.register(bad)
    assert reg.names() == ["a"]


PLUGIN = """
import torch
from torch import nn
from zoo import PartSettings
from zoo.specs.registries import registry
from zoo.variants.ffn import TwoLayerFeedForward

class Swish(nn.Module):
    def __init__(self, beta):
        super().__init__()
        self.beta = beta

    def forward(self, x):
        return x * torch.sigmoid(self.beta * x)

@registry("ffn").register("silu_plugin")
class SiLU(TwoLayerFeedForward):
    # a plugin's part with a setting of its own: swish x * sigmoid(beta x)

    class Settings(PartSettings):
        beta: float = 1.0

    def __init__(self, spec):
        self.activation = lambda: Swish(spec.ffn.beta)
        super().__init__(spec)
"""

CHECK = """
import warnings, torch, zoo
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    names = zoo.registry("ffn").names()
print("names", names)
print("warnings", [str(w.message) for w in caught])
if "silu_plugin" in names:
    model = zoo.build("pre.sinusoidal.fused.silu_plugin", vocab_size=11, d_model=8, n_heads=2, d_ff=16,
                      n_encoder_layers=1, n_decoder_layers=1)
    print("logits", tuple(model(torch.tensor([[3, 4, 2]]), torch.tensor([[1, 5]])).shape))
    options = zoo.ModelSpec.model_json_schema()["properties"]["ffn"]["anyOf"]
    print("schema", "silu_plugin" in options[0]["enum"], [o["title"] for o in options[1:]])
    spec = zoo.spec("pre.sinusoidal.fused.silu_plugin", vocab_size=11, ffn={"beta": 2.0})
    print("name", spec.name, zoo.build(spec).decoder.layers[0].ffn.act.beta)
"""


def install_plugin(root, module_name: str, source: str) -> None:
    """A real installed distribution on sys.path: a module and its dist-info with the entry point."""
    (root / f"{module_name}.py").write_text(textwrap.dedent(source))
    info = root / f"{module_name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module_name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[zoo.variants]\n{module_name} = {module_name}\n")


def run_with_path(root) -> str:
    env = {"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.slow  # a fresh Python process
def test_entry_point_plugin_adds_a_variant(tmp_path):
    install_plugin(tmp_path, "zoo_demo_plugin", PLUGIN)
    out = run_with_path(tmp_path)
    assert "silu_plugin" in out.split("names")[1].splitlines()[0]
    assert "logits (1, 2, 11)" in out
    assert "schema True ['moe', 'silu_plugin']" in out
    assert "name pre.sinusoidal.fused.silu_plugin+beta=2.0 2.0" in out


@pytest.mark.slow  # a fresh Python process
def test_broken_plugin_warns_and_leaves_builtins(tmp_path):
    install_plugin(tmp_path, "zoo_broken_plugin", "raise RuntimeError('boom')\n")
    out = run_with_path(tmp_path)
    assert "'relu'" in out and "silu_plugin" not in out
    assert "zoo plugin 'zoo_broken_plugin'" in out and "boom" in out


PROTOCOL_ONLY = """
import torch, zoo
from torch import nn


@zoo.registry("ffn").register("bare_ffn")
class BareFeedForward(nn.Module):  # no base class, no auto_width
    def __init__(self, spec):
        super().__init__()
        self.proj = nn.Linear(spec.d_model, spec.d_model)
        self.width = spec.ffn_width

    def forward(self, x):
        return torch.tanh(self.proj(x))

@zoo.registry("norm").register("bare_norm")
class BareNorm(nn.Module):  # no base class: no wants_final_norm, no init_gain
    def __init__(self, spec, site, index):
        super().__init__()
        self.norm = nn.LayerNorm(spec.d_model)

    def forward(self, x, sublayer):
        return self.norm(x + sublayer(x))

spec = zoo.spec("bare_norm.sinusoidal.fused.bare_ffn", vocab_size=11, d_model=8, n_heads=2, d_ff="auto")
model = zoo.build(spec, seed=0)
logits = model(torch.tensor([[3, 4, 2]]), torch.tensor([[1, 5]]))
print(spec.ffn_width, model.decoder.layers[0].ffn.width, spec.uses_final_norm, tuple(logits.shape))
"""


@pytest.mark.slow  # a fresh Python process
def test_parts_that_implement_only_the_protocols_get_the_documented_defaults():
    """zoo.parts: without auto_width, d_ff auto is 4 d_model; without wants_final_norm, no final
    norm; without init_gain, a gain of 1."""
    done = subprocess.run([sys.executable, "-c", PROTOCOL_ONLY], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["32", "32", "False", "(1,", "2,", "11)"]


@pytest.mark.slow  # a fresh Python process
def test_the_builtin_tasks_are_registered_in_a_fresh_process_without_the_trainer():
    """`import zoo` is lazy: validating an experiment must not depend on having touched zoo.train."""
    code = ("import zoo\nfrom zoo.specs.experiment import validate_experiment\n"
            "print(validate_experiment({'task': {'name': 'parallel', 'data_dir': 'x'}}).task['name'])\n"
            "print(sorted(zoo.registry('task').names()))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    name, names = done.stdout.splitlines()
    assert name == "parallel" and {"parallel", "lm", "mlm", "reverse"} <= set(eval(names))
