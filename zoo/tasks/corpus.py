"""Reading a parallel corpus from disk: aligned `STEM.SRC` / `STEM.TGT` files, or one `STEM.tsv`
of `source<TAB>target` lines; each may be gzipped (`.gz`)."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Literal

CorpusFormat = Literal["auto", "pair", "tsv"]


def read_lines(path: Path) -> list[str]:
    """The file's lines without their line endings; `.gz` files are decompressed."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return handle.read().splitlines()


def find(data_dir: Path, name: str) -> Path | None:
    for candidate in (data_dir / name, data_dir / f"{name}.gz"):
        if candidate.is_file():
            return candidate
    return None


def read_split(data_dir: str | Path, stem: str, src: str, tgt: str, fmt: CorpusFormat = "auto") -> list[tuple[str, str]]:
    """The (source, target) sentence pairs of one split; pairs with an empty side are dropped."""
    data_dir = Path(data_dir)
    pair = (find(data_dir, f"{stem}.{src}"), find(data_dir, f"{stem}.{tgt}"))
    tsv = find(data_dir, f"{stem}.tsv")
    if fmt in ("auto", "pair") and all(pair):
        sources, targets = read_lines(pair[0]), read_lines(pair[1])
        if len(sources) != len(targets):
            raise ValueError(f"{pair[0]} has {len(sources)} lines but {pair[1]} has {len(targets)}; "
                             "aligned files need one sentence a line on both sides")
        pairs = list(zip(sources, targets))
    elif fmt in ("auto", "tsv") and tsv is not None:
        pairs = []
        for number, line in enumerate(read_lines(tsv), 1):
            columns = line.split("\t")
            if len(columns) != 2:
                raise ValueError(f"{tsv}:{number}: expected 'source<TAB>target', found {len(columns)} column(s)")
            pairs.append((columns[0], columns[1]))
    else:
        tried = {"pair": [f"{stem}.{src}[.gz] and {stem}.{tgt}[.gz]"], "tsv": [f"{stem}.tsv[.gz]"]}
        looked = tried.get(fmt, tried["pair"] + tried["tsv"])
        raise FileNotFoundError(f"task.data_dir {str(data_dir)!r}: no {' or '.join(looked)} for split {stem!r}")
    return [(s.strip(), t.strip()) for s, t in pairs if s.strip() and t.strip()]
