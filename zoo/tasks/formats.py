"""Corpus formats, registered by name as parts are: how one split's sentence pairs are stored.
`task.format: auto` takes the first registered format whose files the folder holds (in `order`).
Every file may be gzipped (`.gz`); every failure names the file, and the line where there is one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

from zoo.errors import DataError
from zoo.specs.registries import registry
from zoo.tasks.corpus import find, read_lines

register = registry("format").register


class CorpusFormat:
    """A registered way to store a split: where its files are, and the pairs they hold."""

    order: ClassVar[int] = 100
    """Where `auto` tries it."""

    @classmethod
    def names(cls, stem: str, src: str, tgt: str) -> list[str]:
        """The files' names (each may also end in .gz)."""
        raise NotImplementedError

    @classmethod
    def files(cls, data_dir: Path, stem: str, src: str, tgt: str) -> list[Path] | None:
        found = [find(data_dir, name) for name in cls.names(stem, src, tgt)]
        return found if all(found) else None

    @classmethod
    def pairs(cls, files: list[Path], src: str, tgt: str) -> list[tuple[str, str]]:
        raise NotImplementedError


@register("pair")
class AlignedFiles(CorpusFormat):
    """STEM.SRC and STEM.TGT, one sentence a line, line n of one the translation of line n of the other."""

    order = 0

    @classmethod
    def names(cls, stem, src, tgt):
        return [f"{stem}.{src}", f"{stem}.{tgt}"]

    @classmethod
    def pairs(cls, files, src, tgt):
        sources, targets = read_lines(files[0]), read_lines(files[1])
        if len(sources) != len(targets):
            raise DataError(f"{files[0]} has {len(sources)} lines but {files[1]} has {len(targets)}; "
                            "aligned files need one sentence a line on both sides")
        return list(zip(sources, targets))


@register("tsv")
class TabSeparated(CorpusFormat):
    """STEM.tsv: `source<TAB>target` a line."""

    order = 1

    @classmethod
    def names(cls, stem, src, tgt):
        return [f"{stem}.tsv"]

    @classmethod
    def pairs(cls, files, src, tgt):
        pairs = []
        for number, line in enumerate(read_lines(files[0]), 1):
            columns = line.split("\t")
            if len(columns) != 2:
                raise DataError(f"{files[0]}:{number}: expected 'source<TAB>target', found {len(columns)} column(s)")
            pairs.append((columns[0], columns[1]))
        return pairs


@register("jsonl")
class JsonLines(CorpusFormat):
    """STEM.jsonl: a JSON object a line, `{"translation": {"de": ..., "en": ...}}` as Hugging Face
    datasets write translation pairs (WMT, IWSLT, OPUS), or `{"de": ..., "en": ...}`, keyed by
    task.src_lang and task.tgt_lang."""

    order = 2

    @classmethod
    def names(cls, stem, src, tgt):
        return [f"{stem}.jsonl"]

    @classmethod
    def pairs(cls, files, src, tgt):
        pairs = []
        for number, line in enumerate(read_lines(files[0]), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise DataError(f"{files[0]}:{number}: not a JSON object ({err.msg})") from None
            sides = row.get("translation", row) if isinstance(row, dict) else None
            if not isinstance(sides, dict) or not all(isinstance(sides.get(lang), str) for lang in (src, tgt)):
                shown = sorted(sides) if isinstance(sides, dict) else type(row).__name__
                raise DataError(f"{files[0]}:{number}: expected text under {src!r} and {tgt!r} (task.src_lang, "
                                f"task.tgt_lang), alone or under 'translation'; found {shown}")
            pairs.append((sides[src], sides[tgt]))
        return pairs
