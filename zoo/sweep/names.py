"""How a sweep's cells are named: grid values as text safe in folder names, and W&B job types."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from typing import Any

import yaml

SAFE = re.compile(r"[A-Za-z0-9_.+-]+")


def safe_text(text: str) -> str:
    """`text` with `_` for every character that is not safe in a file name."""
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", text)


def value_text(value: Any) -> str:
    """A grid value as it appears in cell names and folders: its text where every character is
    safe in a file name (`pre`, `0.001`), else the text with `_` for the unsafe characters and a
    short hash of the exact value (`abcd_~1f0c2a`), so distinct values never share a name."""
    text = value if isinstance(value, str) else yaml.safe_dump(value, default_flow_style=True).strip()
    text = text.removesuffix("\n...").strip()
    if SAFE.fullmatch(text) and text not in (".", ".."):
        return text
    exact = json.dumps(value, sort_keys=True, default=repr) + type(value).__name__
    return safe_text(text)[:24] + "~" + hashlib.blake2b(exact.encode(), digest_size=3).hexdigest()


JOB_TYPE_LIMIT = 64
"""Job types are kept within 64 characters (W&B's limit on a tag), so W&B's tables stay readable."""


def job_type(cell) -> str:
    """The cell's variant as its W&B job type, so runs of one variant (its seeds) group together;
    a variant too long for W&B keeps its start and a hash of the whole."""
    if len(cell.variant) <= JOB_TYPE_LIMIT:
        return cell.variant
    digest = hashlib.blake2b(cell.variant.encode(), digest_size=4).hexdigest()
    return cell.variant[: JOB_TYPE_LIMIT - 9] + "~" + digest


def assignment_text(labels: dict[str, str], pairs: Iterable[tuple[str, Any]]) -> str:
    """`norm=pre,ffn=gelu`: (key, value) pairs as cell and variant names write them, by their labels."""
    return ",".join(f"{labels[key]}={value_text(value)}" for key, value in pairs)
