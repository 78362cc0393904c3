"""Axis `attention`: how the heads of multi-head attention are held.

Both variants compute the same function (`zoo.convert` moves weights between them exactly); they
differ in how the work is laid out, which is what a speed ablation measures.
"""

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import Tensor, nn

from zoo.attend import attend
from zoo.model_spec import ModelSpec
from zoo.parts import Attention
from zoo.registries import registry

register = registry("attention").register


@register("fused")
class FusedAttention(Attention):
    """One packed q/k/v projection for all heads; heads are a tensor dimension, one batched matmul.

    Packed like torch.nn.MultiheadAttention's in_proj: rows [q; k; v], each grouped by head.
    """

    def __init__(self, spec: ModelSpec):
        super().__init__(spec)
        self.in_proj = nn.Linear(spec.d_model, 3 * spec.d_model, bias=spec.bias)
        self.out_proj = nn.Linear(spec.d_model, spec.d_model, bias=spec.bias)

    def _split_heads(self, packed: Tensor, n: int) -> tuple[Tensor, ...]:
        return rearrange(packed, "b t (n h d) -> n b h t d", n=n, h=self.n_heads).unbind(0)

    def _project(self, x: Tensor, rows: slice, n: int) -> tuple[Tensor, ...]:
        bias = None if self.in_proj.bias is None else self.in_proj.bias[rows]
        return self._split_heads(F.linear(x, self.in_proj.weight[rows], bias), n)

    def forward(self, x, memory=None, *, mask, position=None, offset=0, cache=None, need_weights=False):
        d = self.d_model
        if memory is None:
            q, k, v = self._split_heads(self.in_proj(x), 3)
            q, k, v = self.self_keys(0, q, k, v, position, offset, cache)
        else:
            (q,) = self._project(x, slice(0, d), 1)
            k, v = self.memory_keys(0, lambda m: self._project(m, slice(d, 3 * d), 2), memory, cache)
        bias = self.score_bias(position, q, k, offset)
        out, weights = attend(q, k, v, mask, bias, self.attention_dropout(), need_weights)
        return self.out_proj(rearrange(out, "b h t d -> b t (h d)")), weights

    def canonical_state(self) -> dict[str, Tensor]:
        d = self.d_model
        packed = {"weight": self.in_proj.weight, "bias": self.in_proj.bias}
        state = {}
        for kind in self.param_kinds:
            for i, proj in enumerate("qkv"):
                state[f"{proj}.{kind}"] = packed[kind][i * d : (i + 1) * d].detach().clone()
            state[f"out.{kind}"] = getattr(self.out_proj, kind).detach().clone()
        return state

    @torch.no_grad()
    def load_canonical_state(self, state: dict[str, Tensor]) -> None:
        for kind in self.param_kinds:
            getattr(self.in_proj, kind).copy_(torch.cat([state[f"{p}.{kind}"] for p in "qkv"]))
            getattr(self.out_proj, kind).copy_(state[f"out.{kind}"])


class Head(nn.Module):
    """One attention head with its own query, key and value projections d_model -> d_head."""

    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.query = nn.Linear(spec.d_model, spec.d_head, bias=spec.bias)
        self.key = nn.Linear(spec.d_model, spec.d_head, bias=spec.bias)
        self.value = nn.Linear(spec.d_model, spec.d_head, bias=spec.bias)

    @staticmethod
    def _as_head(x: Tensor) -> Tensor:
        return rearrange(x, "b t d -> b 1 t d")

    def queries(self, x: Tensor) -> Tensor:
        return self._as_head(self.query(x))

    def keys_values(self, x: Tensor) -> tuple[Tensor, Tensor]:
        return self._as_head(self.key(x)), self._as_head(self.value(x))


@register("per_head")
class PerHeadAttention(Attention):
    """An nn.ModuleList of heads, each attending on its own; outputs concatenated and projected."""

    def __init__(self, spec: ModelSpec):
        super().__init__(spec)
        self.heads = nn.ModuleList(Head(spec) for _ in range(spec.n_heads))
        self.out_proj = nn.Linear(spec.d_model, spec.d_model, bias=spec.bias)

    def forward(self, x, memory=None, *, mask, position=None, offset=0, cache=None, need_weights=False):
        outs, maps, bias = [], [], None
        for i, head in enumerate(self.heads):
            q = head.queries(x)
            if memory is None:
                k, v = head.keys_values(x)
                q, k, v = self.self_keys(i, q, k, v, position, offset, cache)
            else:
                k, v = self.memory_keys(i, head.keys_values, memory, cache)
            if i == 0:
                bias = self.score_bias(position, q, k, offset)
            head_bias = bias if bias is None or bias.size(0) == 1 else bias[i : i + 1]
            out, weights = attend(q, k, v, mask, head_bias, self.attention_dropout(), need_weights)
            outs.append(out)
            maps.append(weights)
        out = rearrange(torch.cat(outs, dim=1), "b h t d -> b t (h d)")
        return self.out_proj(out), (torch.cat(maps, dim=1) if need_weights else None)

    def canonical_state(self) -> dict[str, Tensor]:
        state = {}
        for kind in self.param_kinds:
            for proj, attr in zip("qkv", ("query", "key", "value")):
                rows = [getattr(getattr(head, attr), kind) for head in self.heads]
                state[f"{proj}.{kind}"] = torch.cat(rows).detach().clone()
            state[f"out.{kind}"] = getattr(self.out_proj, kind).detach().clone()
        return state

    @torch.no_grad()
    def load_canonical_state(self, state: dict[str, Tensor]) -> None:
        for kind in self.param_kinds:
            for proj, attr in zip("qkv", ("query", "key", "value")):
                for head, rows in zip(self.heads, state[f"{proj}.{kind}"].split(self.d_head)):
                    getattr(getattr(head, attr), kind).copy_(rows)
            getattr(self.out_proj, kind).copy_(state[f"out.{kind}"])
