"""What a user meant by a path that is not there: the close names beside it (a typo in a data
folder, a sweep folder, an experiment file), or what the nearest folder that exists holds."""

from __future__ import annotations

import difflib
from pathlib import Path

SHOWN = 8
"""Names of a folder listed where none is close."""


def visible_names(folder: Path) -> list[str]:
    try:
        return sorted(entry.name for entry in folder.iterdir() if not entry.name.startswith("."))
    except OSError:
        return []


def shown(folder: Path) -> str:
    return "the working directory" if str(folder) == "." else f"{folder}/"


def near_path(path: str | Path) -> str:
    """For a path that does not exist, a clause to add to its error: `; did you mean 'data/m'?`, or
    the nearest existing folder and what it holds; "" where the path exists."""
    path = Path(path)
    if path.exists():
        return ""
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if folder != path.parent:
        return f"; {shown(folder)} has no {path.relative_to(folder).parts[0]}/"
    names = visible_names(folder)
    close = difflib.get_close_matches(path.name, names, n=1, cutoff=0.6)
    if close:
        return f"; did you mean {str(folder / close[0])!r}?"
    if not names:
        return f"; {shown(folder)} is empty"
    return f"; {shown(folder)} holds {', '.join(names[:SHOWN])}{', ...' if len(names) > SHOWN else ''}"


def split_names(data_dir: Path) -> list[str]:
    """The splits a data folder holds, by the names of its files and folders (train of train.de)."""
    return sorted({name.split(".")[0] for name in visible_names(data_dir)})


def near_split(data_dir: str | Path, stem: str) -> str:
    """A clause for a split the folder lacks: the folder missing, or the splits it holds."""
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        return f" (no such folder{near_path(data_dir)})"
    splits = split_names(data_dir)
    close = [] if stem in splits else difflib.get_close_matches(stem, splits, n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f" (the folder holds the splits {', '.join(splits) or 'none'}{hint})"
