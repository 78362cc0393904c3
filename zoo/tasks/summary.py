"""What a run's data is, said at its start (log, result.json, W&B config): examples per split,
vocabulary sizes, the share of tokens that are <unk>, the lines a run left out, mean lengths. A
corpus that is mostly <unk> is then seen before it trains to nothing."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

UNKNOWN_WARNING = 0.1
"""A share of <unk> tokens past this is warned about at the start of a run."""


def vocabulary_sizes(src_vocab, tgt_vocab) -> dict[str, int]:
    """The source vocabulary's size, and the target's where it is another vocabulary."""
    one = src_vocab is tgt_vocab
    return {"source_vocabulary": len(src_vocab), **({} if one else {"target_vocabulary": len(tgt_vocab)})}


def unknown_share(rows: Sequence[Sequence[int]], unk_id: int | None, specials: int = 2) -> float | None:
    """The share of a side's tokens (bos and eos not counted) that are <unk>; None without an <unk>."""
    if unk_id is None:
        return None
    tokens = sum(max(len(row) - specials, 0) for row in rows)
    return sum(row.count(unk_id) for row in rows) / max(tokens, 1)


def mean_length(rows: Sequence[Sequence[int]]) -> float:
    """Mean tokens per row, bos and eos counted."""
    return sum(map(len, rows)) / max(len(rows), 1)


def summary_line(summary: dict[str, float | int]) -> str:
    """`data: 29000 training examples (3 longer than max_tokens 128 left out, ...), valid 1014, ...`."""
    parts = []
    if "train_examples" in summary:
        left = [f"{summary['train_too_long']} longer than max_tokens {summary['max_tokens']} left out"] \
            if summary.get("train_too_long") else []
        left += [f"{summary['train_empty']} with an empty side dropped"] if summary.get("train_empty") else []
        parts.append(f"{summary['train_examples']} training examples" + (f" ({'; '.join(left)})" if left else ""))
    parts += [f"{key.removesuffix('_examples')} {value}" for key, value in summary.items()
              if key.endswith("_examples") and key != "train_examples"]
    parts.append(f"vocabulary {summary['source_vocabulary']}" + (
        f"/{summary['target_vocabulary']} (source/target)" if "target_vocabulary" in summary else ""))
    unknown = {key: value for key, value in summary.items() if key.endswith("unknown_share")}
    if unknown:
        parts.append("<unk> " + ", ".join(f"{value:.1%} of {key.removesuffix('_unknown_share').replace('_', ' ')}"
                                          for key, value in unknown.items()))
    lengths = {key: value for key, value in summary.items() if key.startswith("mean_")}
    if lengths:
        parts.append("mean length " + "/".join(f"{value:.1f}" for value in lengths.values()) + " tokens")
    return "data: " + "; ".join(parts)


def warn_unknown(summary: dict[str, float | int]) -> None:
    """One warning naming each side and split whose tokens are <unk> past UNKNOWN_WARNING."""
    high = [f"{share:.0%} of {key.removesuffix('_unknown_share').replace('_', ' ')}" for key, share in summary.items()
            if key.endswith("unknown_share") and share > UNKNOWN_WARNING]
    if high:
        warnings.warn(f"<unk> makes up {', '.join(high)} tokens: the vocabulary does not cover this text "
                      "(task.vocab_size, min_frequency, tokenizer, or the files' language)", RuntimeWarning, stacklevel=2)
