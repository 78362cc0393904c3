"""The optional hooks a part may implement, as runtime-checkable Protocols: every place that asks
for one checks the part against its Protocol (`implements(part, AutoWidth)`), never by a string
name, and a part that omits it gets the default written beside it. The built-in base classes
(zoo.parts) declare each hook with its default; a plugin written against the Protocols alone
implements only the hooks it needs. Here, below the model's layers, so the spec can ask too."""

from __future__ import annotations

from typing import Any, ClassVar, Protocol, runtime_checkable

_FOUND: dict[tuple[type, bool, type], bool] = {}


def implements(part: Any, protocol: type) -> bool:
    """isinstance(part, protocol) for a part or a part's class, remembered per class: Python's
    runtime Protocol check costs microseconds, and model building asks it of every module. The
    hooks are class attributes (or set by every instance's __init__), so the class decides."""
    key = (part if isinstance(part, type) else type(part), isinstance(part, type), protocol)
    if key not in _FOUND:
        _FOUND[key] = isinstance(part, protocol)
    return _FOUND[key]


@runtime_checkable
class HasSettings(Protocol):
    """Settings of a part's own (a zoo.specs.choices.PartSettings); without it, none."""

    Settings: ClassVar[type]


@runtime_checkable
class SpecCheck(Protocol):
    """A classmethod that names what the part cannot do with the rest of the spec (RoPE: an odd
    head width); without it, nothing is checked."""

    @classmethod
    def spec_problem(cls, spec: Any) -> str | None: ...


@runtime_checkable
class AutoWidth(Protocol):
    """A feed-forward's width for `d_ff: auto`; without it, 4 d_model."""

    @staticmethod
    def auto_width(d_model: int) -> int: ...


@runtime_checkable
class FinalNorm(Protocol):
    """Whether `final_norm: auto` puts a norm after a stack's last block: a bool class attribute, or
    a classmethod of the spec where the part's settings decide; without it, no."""

    wants_final_norm: Any


@runtime_checkable
class Copies(Protocol):
    """The setting that counts a part's copies of a module (an MoE's `experts`), in which its size
    is linear, so memory estimates count a million from two and three; without it, one copy."""

    copies: ClassVar[str]


@runtime_checkable
class Composes(Protocol):
    """A placement whose class combines a block's sublayers itself (a classmethod: parallel sums
    them); without it, in turn (NormPlacement.compose)."""

    @classmethod
    def compose(cls, x: Any, steps: Any) -> Any: ...


@runtime_checkable
class InitGain(Protocol):
    """A placement (classmethod) that rescales the initial draw of a matrix of a role (zoo.roles) in
    the stack at `site` (None: outside the stacks, the output projection), as DeepNorm and Fixup do;
    without it, 1."""

    @classmethod
    def init_gain(cls, spec: Any, role: str | None, site: Any) -> float: ...


@runtime_checkable
class TakesRealTokens(Protocol):
    """A feed-forward called as `ffn(x, real=...)` with the (B, T) bool mask of real tokens, or None
    where none is padding (MoE routes only those) when `takes_real_tokens` is true; without it, `ffn(x)`."""

    takes_real_tokens: bool


@runtime_checkable
class AuxLoss(Protocol):
    """A part that sets a scalar `aux_loss` (or None) in each training forward, which the trainer
    adds to the loss and logs, summed over parts, as `train/aux_loss` (MoE's load balancing);
    without it, nothing is added."""

    aux_loss: Any


@runtime_checkable
class CountsFlops(Protocol):
    """A feed-forward's classmethod `forward_flops(spec, tokens)`: the FLOPs of its matrix products
    in a training forward over `tokens` positions (zoo.model.flops); without it, a run's FLOPs are
    not counted, and the run says so."""

    @classmethod
    def forward_flops(cls, spec: Any, tokens: int) -> int: ...


@runtime_checkable
class ScalesWithWidth(Protocol):
    """How a part keeps its activations and their updates the same size as width grows under muP
    (zoo.specs.parametrization): `mup`, one sentence naming what in it depends on width and how
    that is scaled; a part that cannot be made muP-correct sets `mup_refused` to why instead.
    Without either, the part is refused under parametrization mup."""

    mup: ClassVar[str]


def wants_final_norm(part: Any, spec: Any) -> bool:
    if not implements(part, FinalNorm):
        return False
    wants = part.wants_final_norm
    return bool(wants(spec) if callable(wants) else wants)
