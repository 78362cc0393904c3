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


class LineFormat(CorpusFormat):
    """A format of one file a split, `STEM.SUFFIX`, whose lines each hold a pair (or none)."""

    suffix: ClassVar[str] = ""

    @classmethod
    def names(cls, stem, src, tgt):
        return [f"{stem}.{cls.suffix}"]

    @classmethod
    def pairs(cls, files, src, tgt):
        found = (cls.pair(line, f"{files[0]}:{number}", src, tgt) for number, line in enumerate(read_lines(files[0]), 1))
        return [pair for pair in found if pair is not None]

    @classmethod
    def pair(cls, line: str, where: str, src: str, tgt: str) -> tuple[str, str] | None:
        """The pair a line holds; `where` (file:line) names it in an error."""
        raise NotImplementedError


@register("tsv")
class TabSeparated(LineFormat):
    """STEM.tsv: `source<TAB>target` a line."""

    order, suffix = 1, "tsv"

    @classmethod
    def pair(cls, line, where, src, tgt):
        columns = line.split("\t")
        if len(columns) != 2:
            raise DataError(f"{where}: expected 'source<TAB>target', found {len(columns)} column(s)")
        return columns[0], columns[1]


@register("jsonl")
class JsonLines(LineFormat):
    """STEM.jsonl: a JSON object a line, `{"translation": {"de": ..., "en": ...}}` as Hugging Face
    datasets write translation pairs (WMT, IWSLT, OPUS), or `{"de": ..., "en": ...}`, keyed by
    task.src_lang and task.tgt_lang; blank lines are skipped."""

    order, suffix = 2, "jsonl"

    @classmethod
    def pair(cls, line, where, src, tgt):
        if not line.strip():
            return None
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise DataError(f"{where}: not a JSON object ({err.msg})") from None
        sides = row.get("translation", row) if isinstance(row, dict) else None
        if not isinstance(sides, dict) or not all(isinstance(sides.get(lang), str) for lang in (src, tgt)):
            shown = sorted(sides) if isinstance(sides, dict) else type(row).__name__
            raise DataError(f"{where}: expected text under {src!r} and {tgt!r} (task.src_lang, task.tgt_lang), alone "
                            f"or under 'translation'; found {shown}")
        return sides[src], sides[tgt]
