"""Where a text task's documents come from: a line each (`SPLIT.txt`, one sentence or caption a
document), a file whose documents end at a separator line (`<|endoftext|>`, say), or a folder
`SPLIT/` whose files are the documents (source files, articles). A document read from a separated
file or a folder keeps its line breaks (a line ending `\\r\\n` becomes `\\n`), loses the blank
space at its ends, and is left out when nothing else remains."""

from __future__ import annotations

import stat
import warnings
from functools import lru_cache
from pathlib import Path

from zoo.errors import DataError, MissingData
from zoo.near_paths import near_split
from zoo.tasks.corpus import find, read_lines, read_text


def text_of(path: Path) -> str:
    """A document file's text (corpus.read_text), its `\\r\\n` line ends as `\\n`."""
    return read_text(path).replace("\r\n", "\n")


def line_file(data_dir: str, stem: str, lang: str | None) -> Path:
    name = f"{stem}.{lang or 'txt'}"
    path = find(Path(data_dir), name)
    if path is None:
        raise MissingData(f"task.data_dir {data_dir!r}: no {name}[.gz] for split {stem!r}{near_split(data_dir, stem)}")
    return path


def document_files(data_dir: str, stem: str, suffix: str | None) -> list[Path]:
    """The files of the folder `data_dir/stem` (subfolders included, hidden ones not) whose names
    end in `suffix`, sorted by their path inside it: the order of the split's documents."""
    folder = Path(data_dir) / stem
    if not folder.is_dir():
        raise MissingData(f"task.data_dir {data_dir!r}: no folder {stem}/ for split {stem!r}{near_split(data_dir, stem)} "
                          "(task.folders reads a folder of documents a split)")
    entries = [path for path in folder.rglob("*") if not any(part.startswith(".") for part in path.relative_to(folder).parts)]
    files = sorted(path for path in entries if path.is_file() and (suffix is None or path.name.endswith(suffix)))
    left_out = [f"{path.relative_to(folder)} ({why})" for path in sorted(entries) if (why := not_read(path))]
    if left_out:
        warnings.warn(f"{folder}: {len(left_out)} entr{'y' if len(left_out) == 1 else 'ies'} left out of split {stem!r}: "
                      f"{', '.join(left_out[:5])}{', ...' if len(left_out) > 5 else ''}", stacklevel=2)
    if not files:
        raise DataError(f"{folder}: no file{'' if suffix is None else f' ending in {suffix!r}'} in split {stem!r}")
    return files


def not_read(path: Path) -> str | None:
    """Why an entry of a documents folder is not read as a document, where it is not a regular file
    or an ordinary folder: said, not skipped in silence."""
    if path.is_symlink() and path.is_dir():
        return "a link to a folder: its files are not read; copy them in, or name the folder itself"
    if path.is_symlink() and not path.exists():
        return "a broken link"
    if path.is_dir() or path.is_file():
        return None
    kind = stat.S_IFMT(path.stat().st_mode)
    return {stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a device", stat.S_IFBLK: "a device",
            stat.S_IFSOCK: "a socket"}.get(kind, "not a regular file")


def split_document_files(params, stem: str) -> list[Path]:
    """The files that hold split `stem` under the task's settings."""
    if params.folders:
        return document_files(params.data_dir, stem, params.suffix)
    return [line_file(params.data_dir, stem, params.lang)]


def separated(text: str, separator: str, path: Path | None = None) -> list[str]:
    """The documents of a text whose lines equal to `separator` end them. A line ends at `\\n`, as
    in every corpus format: a file whose lines end in a carriage return alone would be one document,
    so it is refused, naming the file."""
    if "\n" not in text and separator in text.split("\r"):
        raise DataError(f"{path or 'the text'}: its lines end in a carriage return alone (\\r, old Mac line ends), "
                        "and a line is what ends in \\n (as in every corpus format), so its separator lines would "
                        "never end a document; convert the line ends: tr '\\r' '\\n' < FILE")
    documents, current = [], []
    for line in text.split("\n"):
        if line == separator:
            documents.append("\n".join(current))
            current = []
        else:
            current.append(line)
    return [*documents, "\n".join(current)]


@lru_cache(maxsize=8)
def cached_documents(data_dir: str, stem: str, lang: str | None, separator: str | None, folders: bool,
                     suffix: str | None) -> tuple[str, ...]:
    """The split's documents with text, each read once per process; a split without one is an
    error here, not an empty max() or an empty evaluation later."""
    if folders:
        files = document_files(data_dir, stem, suffix)
        documents = [text_of(path).strip() for path in files]
    else:
        files = [line_file(data_dir, stem, lang)]
        documents = read_lines(files[0]) if separator is None else separated(text_of(files[0]), separator, files[0])
        documents = [document.strip() for document in documents]
    kept = tuple(document for document in documents if document)
    if not kept:
        where = files[0].parent if folders else files[0]
        raise DataError(f"{where}: split {stem!r} holds no {'line' if separator is None and not folders else 'document'} "
                        "with text")
    return kept
