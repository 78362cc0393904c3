"""Axis `attention`: how the heads of multi-head attention are held and computed.

Every variant computes the same function (`zoo.convert` moves weights between them exactly); they
differ in how the work is laid out and which kernel runs it, which is what a speed ablation
measures. All of them take grouped-query attention (`n_kv_heads`, Ainslie et al. 2023).
"""

import torch
import torch.nn.functional as F
from einops import rearrange, repeat
from torch import Tensor, nn

from zoo.kernels import flex
from zoo.kernels.attend import attend, visible_keys, within_window
from zoo.kernels.probes import probing
from zoo.parts import Attention
from zoo.specs.model_spec import ModelSpec
from zoo.specs.registries import registry

register = registry("attention").register


class PackedHeads(Attention):
    """Heads as a tensor dimension: one matmul projects every head's queries, keys and values
    (`packed` gives the stacked weights, rows [q; k; v] grouped by head, as
    torch.nn.MultiheadAttention's in_proj), and one batched kernel attends for all heads."""

    computes = "softmax attention"
    mup = ("queries, keys, values and output are hidden matrices, trained at rate 1/m; scores scaled by "
           "sqrt(base head width) / d_head (zoo.specs.parametrization.score_scale)")

    def packed(self) -> tuple[Tensor, Tensor | None]:
        raise NotImplementedError

    def _heads(self, x: Tensor) -> Tensor:
        return rearrange(x, "b t (h d) -> b h t d", d=self.d_head)

    def forward(self, x, memory=None, *, mask, causal=False, position=None, positions=None, key_positions=None,
                cache=None, need_weights=False):
        weight, bias, kv_width = *self.packed(), self.kv_width
        if memory is None:
            q, k, v = map(self._heads, F.linear(x, weight, bias).split((self.q_width, kv_width, kv_width), dim=-1))
            q = self.rotate_queries(self.norm_queries(q), position, positions)
            k, v = self.self_keys(0, self.norm_keys(k), v, position, positions, cache)
            if self.window is not None:
                mask, key_positions, k, v = within_window(self.window, q.size(-2), mask, positions, key_positions, k, v,
                                                          cache)
        else:
            rows = slice(0, self.q_width)
            q = self.norm_queries(self._heads(F.linear(x, weight[rows], None if bias is None else bias[rows])))
            rows = slice(self.q_width, None)

            def keys_values(m: Tensor) -> tuple[Tensor, Tensor]:
                k, v = F.linear(m, weight[rows], None if bias is None else bias[rows]).split(kv_width, dim=-1)
                return self.norm_keys(self._heads(k)), self._heads(v)

            k, v = self.memory_keys(0, keys_values, memory, cache)
        added = self.score_bias(position, positions, key_positions) if memory is None else None
        out, weights = self.kernel(q, k, v, mask, added, need_weights, causal)
        return self.out_proj(rearrange(out, "b h t d -> b t (h d)")), weights

    def kernel(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, bias: Tensor | None,
               need_weights: bool, causal: bool):
        """n_heads query heads over kv_heads key/value heads, by the zoo's reference `attend`."""
        if self.group > 1:
            k, v = (repeat(t, "b g t d -> b (g r) t d", r=self.group) for t in (k, v))
        return attend(q, k, v, mask, bias, self.attention_dropout(), need_weights, causal, self.scale, self.softcap)


@register("fused")
class FusedAttention(PackedHeads):
    """One packed q/k/v projection for all heads; heads are a tensor dimension, one batched matmul
    (Vaswani et al. 2017, as torch.nn.MultiheadAttention lays it out).

    Packed like MultiheadAttention's in_proj: rows [q; k; v], each grouped by head; k and v have
    kv_heads heads each.
    """

    def __init__(self, spec: ModelSpec):
        super().__init__(spec)
        self.in_proj = nn.Linear(spec.d_model, self.q_width + 2 * self.kv_width, bias=spec.qkv_bias)
        self.out_proj = nn.Linear(self.q_width, spec.d_model, bias=spec.out_bias)

    def packed(self) -> tuple[Tensor, Tensor | None]:
        return self.in_proj.weight, self.in_proj.bias

    def canonical_state(self) -> dict[str, Tensor]:
        sizes = (self.q_width, self.kv_width, self.kv_width)
        packed = {"weight": self.in_proj.weight, "bias": self.in_proj.bias}
        state = {f"{proj}.{kind}": rows.detach().clone()
                 for kind in self.in_kinds for proj, rows in zip("qkv", packed[kind].split(sizes))}
        state |= {f"out.{kind}": getattr(self.out_proj, kind).detach().clone() for kind in self.out_kinds}
        return state | self.qk_norm_state()

    @torch.no_grad()
    def load_canonical_state(self, state: dict[str, Tensor]) -> None:
        for kind in self.in_kinds:
            getattr(self.in_proj, kind).copy_(torch.cat([state[f"{p}.{kind}"] for p in "qkv"]))
        for kind in self.out_kinds:
            getattr(self.out_proj, kind).copy_(state[f"out.{kind}"])
        self.load_qk_norm_state(state)


@register("sdpa")
class SDPAttention(FusedAttention):
    """The fused layout computed by torch.nn.functional.scaled_dot_product_attention (PyTorch 2), so
    CUDA picks its memory-efficient or cuDNN kernel, and key/value groups are not copied per head.

    Without padding, a score bias or a sliding window no mask goes in, and the decoder's causality
    goes in as `is_causal`, so CUDA may pick the flash kernel (normalized queries and keys keep it
    too). Otherwise padding, causality, windows and score biases (ALiBi, T5) go in as one additive
    float mask whose hidden entries are the dtype's most negative
    finite value, exactly as the reference does, so a row that is all padding attends uniformly and
    stays finite (a bool mask would give NaN there). Attention maps (need_weights) come from the
    reference, since the kernels do not return weights, and so does attention with soft-capped
    scores, which no kernel computes.
    """

    def kernel(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, bias: Tensor | None,
               need_weights: bool, causal: bool):
        if need_weights or self.softcap is not None or probing():  # the kernels return no weights, cap no scores
            return super().kernel(q, k, v, mask, bias, need_weights, causal)
        q_len, k_len = q.size(-2), k.size(-2)
        options = {"dropout_p": self.attention_dropout(), "enable_gqa": self.group > 1,
                   "scale": None if self.scale == self.d_head**-0.5 else self.scale}
        if mask is None and bias is None and (q_len == k_len or q_len == 1 or not causal):
            # no padding and no bias: no mask at all, causality by is_causal, so any kernel may run
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal and q_len > 1, **options), None
        return F.scaled_dot_product_attention(q, k, v, attn_mask=additive_term(q, k, mask, bias, causal), **options), None


@register("flex")
class FlexAttention(FusedAttention):
    """The fused layout computed by FlexAttention (zoo.kernels.flex), which reads every score change
    inside one generated kernel: ALiBi's and T5's biases, soft-capped scores, sliding windows and
    padding, where `sdpa` passes a dense float mask or falls back to the reference. Where
    FlexAttention cannot compute (attention dropout in training, attention maps, gradients on the
    CPU) the reference computes the same function."""

    def kernel(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, bias: Tensor | None,
               need_weights: bool, causal: bool):
        if probing() or not flex.runs_here(q, bias, self.attention_dropout(), need_weights):
            return super().kernel(q, k, v, mask, bias, need_weights, causal)
        additive = additive_term(q, k, mask, bias, causal)
        return flex.flex_attend(q, k, v, additive, self.scale, self.softcap, self.group > 1), None


def additive_term(q: Tensor, k: Tensor, mask: Tensor | None, bias: Tensor | None, causal: bool) -> Tensor | None:
    """A position scheme's score bias and the hidden keys (at the dtype's most negative finite
    value, as the reference hides them) as one float term of four dimensions, each of full size
    or broadcast; None where nothing changes the scores."""
    visible = visible_keys(mask, causal, q.size(-2), k.size(-2), q.device)
    if visible is None and bias is None:
        return None
    additive = torch.zeros((), dtype=q.dtype, device=q.device) if bias is None else bias.to(q.dtype)
    if visible is not None:
        additive = additive.masked_fill(~visible, torch.finfo(q.dtype).min)
    return additive[(None,) * (4 - additive.dim())]


class Head(nn.Module):
    """One query head d_model -> d_head; the first head of each key/value group also holds the
    group's key and value projections, which the other heads of the group share."""

    def __init__(self, spec: ModelSpec, holds_keys: bool):
        super().__init__()
        self.query = nn.Linear(spec.d_model, spec.d_head, bias=spec.qkv_bias)
        if holds_keys:
            self.key = nn.Linear(spec.d_model, spec.d_head, bias=spec.qkv_bias)
            self.value = nn.Linear(spec.d_model, spec.d_head, bias=spec.qkv_bias)


@register("per_head")
class PerHeadAttention(PackedHeads):
    """An nn.ModuleList of heads, each with its own projections (the per-head formulation of
    Vaswani et al. 2017, Figure 2). Each head keeps its parameters, but the computation is the
    packed one: the heads' weights are stacked for one matmul, so holding heads apart costs a
    copy of the weights per call, not a loop over heads."""

    def __init__(self, spec: ModelSpec):
        super().__init__(spec)
        self.heads = nn.ModuleList(Head(spec, holds_keys=i % self.group == 0) for i in range(spec.n_heads))
        self.out_proj = nn.Linear(self.q_width, spec.d_model, bias=spec.out_bias)

    def _key_holders(self) -> list[Head]:
        return list(self.heads)[:: self.group]

    def packed(self) -> tuple[Tensor, Tensor | None]:
        layers = [layer for proj in self._projections().values() for layer in proj]
        bias = torch.cat([layer.bias for layer in layers]) if "bias" in self.in_kinds else None
        return torch.cat([layer.weight for layer in layers]), bias

    def _projections(self) -> dict[str, list[nn.Linear]]:
        holders = self._key_holders()
        return {"q": [h.query for h in self.heads], "k": [h.key for h in holders], "v": [h.value for h in holders]}

    def canonical_state(self) -> dict[str, Tensor]:
        state = {f"{proj}.{kind}": torch.cat([getattr(layer, kind) for layer in layers]).detach().clone()
                 for kind in self.in_kinds for proj, layers in self._projections().items()}
        state |= {f"out.{kind}": getattr(self.out_proj, kind).detach().clone() for kind in self.out_kinds}
        return state | self.qk_norm_state()

    @torch.no_grad()
    def load_canonical_state(self, state: dict[str, Tensor]) -> None:
        for kind in self.in_kinds:
            for proj, layers in self._projections().items():
                for layer, rows in zip(layers, state[f"{proj}.{kind}"].split(self.d_head), strict=True):
                    getattr(layer, kind).copy_(rows)
        for kind in self.out_kinds:
            getattr(self.out_proj, kind).copy_(state[f"out.{kind}"])
        self.load_qk_norm_state(state)
