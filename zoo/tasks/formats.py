"""Corpus formats, registered by name as parts are: how one split's sentence pairs are stored.
`task.format: auto` takes the first registered format whose files the folder holds (in `order`).
Every file may be gzipped (`.gz`); every failure names the file, and the line where there is one."""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from zoo.errors import DataError
from zoo.specs.registries import registry
from zoo.tasks.corpus import find, read_lines

register = registry("format").register
LINE_BREAKS = {"\n": "line break", "\r": "carriage return"}


class CorpusFormat:
    """A registered way to store a split: where its files are, and the pairs they hold."""

    order: ClassVar[int] = 100
    """Where `auto` tries it."""
    cannot_store: ClassVar[dict[str, str]] = {}
    """Characters a sentence stored this way cannot hold (it would not read back), by name."""

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

    @classmethod
    def write(cls, folder: str | Path, stem: str, pairs: Sequence[tuple[str, str]], src: str = "de", tgt: str = "en",
              compress: bool = False) -> list[Path]:
        """Stores the pairs as split `stem` in this format (gzipped with `compress`), so that `pairs`
        reads them back: to convert a corpus, or to make one. Returns the files written; a pair it
        cannot store (or that is not two strings), and a folder that is not there, are refused before
        any file is written, and each file is replaced whole."""
        names = cls.names(stem, src, tgt)
        for pair in pairs:
            if not (isinstance(pair, tuple | list) and len(pair) == 2 and all(isinstance(side, str) for side in pair)):
                raise DataError(f"the pair {pair!r}: a pair is (source, target), two strings")
            for char, what in cls.cannot_store.items():
                if char in pair[0] or char in pair[1]:
                    raise DataError(f"a {what} inside the pair {pair!r}: {' and '.join(names)} cannot store it; "
                                    "write it as jsonl")
        if not Path(folder).is_dir():
            raise DataError(f"{folder}: no such folder to write split {stem!r} into")
        contents = []
        for name, text in zip(names, cls.texts(pairs, src, tgt), strict=True):
            try:
                data = text.encode("utf-8")
            except UnicodeEncodeError as err:
                raise DataError(f"{name}: {text[err.start:err.end]!r} (a lone surrogate, say) is not storable as UTF-8 "
                                "text; remove it from its pair") from None
            contents.append((Path(folder) / (f"{name}.gz" if compress else name), gzip.compress(data) if compress else data))
        for path, data in contents:  # each whole or not at all: a file written before stays until its new one is
            temporary = path.with_name(f".{path.name}.writing")
            temporary.write_bytes(data)
            os.replace(temporary, path)
        return [path for path, _ in contents]

    @classmethod
    def texts(cls, pairs: Sequence[tuple[str, str]], src: str, tgt: str) -> list[str]:
        """The text of each of `names`' files."""
        raise NotImplementedError


@register("pair")
class AlignedFiles(CorpusFormat):
    """STEM.SRC and STEM.TGT, one sentence a line, line n of one the translation of line n of the other."""

    order, cannot_store = 0, LINE_BREAKS

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

    @classmethod
    def texts(cls, pairs, src, tgt):
        return ["".join(pair[side] + "\n" for pair in pairs) for side in (0, 1)]


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

    @classmethod
    def texts(cls, pairs, src, tgt):
        return ["".join(cls.line(source, target, src, tgt) + "\n" for source, target in pairs)]

    @classmethod
    def line(cls, source: str, target: str, src: str, tgt: str) -> str:
        """The line that holds a pair."""
        raise NotImplementedError


@register("tsv")
class TabSeparated(LineFormat):
    """STEM.tsv: `source<TAB>target` a line."""

    order, suffix, cannot_store = 1, "tsv", {**LINE_BREAKS, "\t": "tab"}

    @classmethod
    def pair(cls, line, where, src, tgt):
        columns = line.split("\t")
        if len(columns) != 2:
            raise DataError(f"{where}: expected 'source<TAB>target', found {len(columns)} column(s)")
        return columns[0], columns[1]

    @classmethod
    def line(cls, source, target, src, tgt):
        return f"{source}\t{target}"


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
        except RecursionError:
            raise DataError(f"{where}: JSON nested too deeply to read; a line holds one object of two strings") from None
        sides = row.get("translation", row) if isinstance(row, dict) else None
        if not isinstance(sides, dict) or not all(isinstance(sides.get(lang), str) for lang in (src, tgt)):
            shown = sorted(sides) if isinstance(sides, dict) else type(row).__name__
            raise DataError(f"{where}: expected text under {src!r} and {tgt!r} (task.src_lang, task.tgt_lang), alone "
                            f"or under 'translation'; found {shown}")
        for side in (src, tgt):
            try:
                sides[side].encode("utf-8")
            except UnicodeEncodeError as err:
                raise DataError(f"{where}: the {side!r} text holds {sides[side][err.start:err.end]!r} (a lone surrogate "
                                "escaped in the JSON), which is no character of any text; remove it") from None
        return sides[src], sides[tgt]

    @classmethod
    def line(cls, source, target, src, tgt):
        return json.dumps({"translation": {src: source, tgt: target}}, ensure_ascii=False)
