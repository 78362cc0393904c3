"""The cross-attention map of the last decoder layer for one example, heads side by side."""

from __future__ import annotations

import warnings
from pathlib import Path

import torch

from zoo.files import save_figure
from zoo.model.generate import default_new_tokens
from zoo.model.kinds import EncoderDecoder
from zoo.tasks.base import Task

MAX_TOKENS, MAX_HEADS = 48, 8
"""The picture shows at most this many source tokens, output steps and heads, so its size is
bounded whatever the lengths and the head count (a long-string run once drew a figure too large
for memory)."""


@torch.no_grad()
def decoded_attention(model: EncoderDecoder, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One source (its padding cut), its greedy output, and the last decoder layer's cross-attention
    while it was decoded (H, T, S), on the host."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device  # evaluation batches stay on the host; the model may not
    src = src[:1, : int((src[0] != model.spec.pad_id).sum())].to(device)
    out = model.generate(src, max_new_tokens=min(default_new_tokens(model, src), MAX_TOKENS))
    weights = model.attention_maps(src, out[:, :-1]).decoder_cross[-1][0].float().cpu()
    model.train(was_training)
    return src, out, weights


def cross_attention_png(model: EncoderDecoder, task: Task, src: torch.Tensor, path: Path | None) -> str:
    """Decode one source greedily, then draw where each output step looked: source tokens across,
    output steps down, one panel per head, cropped to MAX_TOKENS and MAX_HEADS. Returns a caption
    (source -> output). Without a path, it decodes and draws nothing (a sharded model's other ranks)."""
    src, out, weights = decoded_attention(model, src)
    if path is None:
        return ""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import font_manager

    installed = {font.name for font in font_manager.fontManager.ttflist}
    wanted = ["DejaVu Sans", "Noto Sans CJK SC", "WenQuanYi Zen Hei"]  # CJK fonts for toy_translation, if present
    plt.rcParams["font.family"] = [name for name in wanted if name in installed] + ["sans-serif"]

    weights = weights[:MAX_HEADS, :MAX_TOKENS, :MAX_TOKENS]
    src_labels = [task.src_vocab.piece(i) for i in src[0, :MAX_TOKENS].tolist()]
    out_labels = [task.tgt_vocab.piece(i) for i in out[0, 1 : MAX_TOKENS + 1].tolist()]
    heads = weights.size(0)
    cell = min(0.32, 36.0 / (len(src_labels) * heads))  # at most about 40 x 16 inches
    fig, axes = plt.subplots(1, heads, figsize=(2.2 + cell * len(src_labels) * heads, 1.5 + 0.3 * len(out_labels)),
                             squeeze=False)
    for h, ax in enumerate(axes[0]):
        ax.imshow(weights[h].numpy(), cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
        ax.set_title(f"head {h}")
        ax.set_xticks(range(len(src_labels)), src_labels, fontsize=7, rotation=90)
        ax.set_yticks(range(len(out_labels)), out_labels if h == 0 else [""] * len(out_labels), fontsize=7)
    axes[0][0].set_ylabel("output step")
    fig.supxlabel("source token")
    with warnings.catch_warnings():  # scripts without a glyph in the installed fonts draw as boxes
        warnings.filterwarnings("ignore", message="Glyph .* missing from font")
        fig.tight_layout()
        save_figure(fig, path, dpi=110)
    return f"{task.src_vocab.decode(src[0, 1:].tolist())} -> {task.tgt_vocab.decode(out[0, 1:].tolist())}"


def try_cross_attention_png(model: EncoderDecoder, task: Task, src: torch.Tensor, path: Path | None) -> str | None:
    """cross_attention_png, where a failure costs the picture (a warning), never the run; its caption or None.
    A model without cross-attention (one stack) has no picture to draw."""
    if not model.cross_attention:
        return None
    try:
        return cross_attention_png(model, task, src, path)
    except Exception as err:
        warnings.warn(f"the cross-attention picture was not drawn: {err!r}", RuntimeWarning, stacklevel=3)
        return None
