"""What stands between a sharded checkpoint's files and the model: every file's SHA-256, recorded
when the checkpoint is written and checked at every read, and DCP's `.metadata` unpickled with only
DCP's own metadata classes allowed. torch's reader calls pickle.load on it, so a planted
`.metadata` would run code at zoo.load, zoo eval, zoo consolidate or --resume; and DCP checks no
checksum, so a flipped byte in a shard would load as a wrong weight."""

from __future__ import annotations

import contextlib
import hashlib
import io
import pickle
from pathlib import Path
from typing import Any

from zoo.errors import CheckpointError
from zoo.files import human_bytes, read_bounded, regular_file

METADATA = ".metadata"
DIGESTS = "shards"
"""The key of the rest of a sharded checkpoint (zoo.pt) that holds {file: {"bytes", "sha256"}}."""

METADATA_LIMIT = 1 << 30
"""A `.metadata` larger than this is refused before it is read: it lists tensors, not their values."""


def file_digest(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def shard_digests(folder: Path, leave_out: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    """Every file DCP wrote into `folder`: its size and SHA-256."""
    return {path.name: {"bytes": path.stat().st_size, "sha256": file_digest(path)}
            for path in sorted(folder.iterdir()) if path.is_file() and path.name not in leave_out}


def verify_shards(folder: Path, recorded: dict[str, dict[str, Any]] | None, world: int | None) -> None:
    """Every file the checkpoint recorded is there, whole and unchanged; the first that is not is
    named. A checkpoint written before digests were recorded has its `.metadata` checked for
    presence only (and read with SafeReader's restricted unpickler all the same)."""
    wrote = f" (written by {world} ranks)" if world else ""
    if recorded is None:
        if not (folder / METADATA).is_file():
            raise CheckpointError(f"{folder}: missing {METADATA}, the index of its shards{wrote}")
        return
    for name, expected in recorded.items():
        path = folder / name
        what = "shard" if name.endswith(".distcp") else "file"
        try:
            size = regular_file(path, f"a shard of {folder}", CheckpointError).st_size
        except FileNotFoundError:
            raise CheckpointError(f"{folder}: missing {what} {name}{wrote}") from None
        except IsADirectoryError:
            raise CheckpointError(f"{folder}: {what} {name} is a folder{wrote}") from None
        if size != expected["bytes"]:
            change = "cut short" if size < expected["bytes"] else "grown"
            raise CheckpointError(f"{folder}: {what} {name} {change}: {human_bytes(size)} where "
                                  f"{human_bytes(expected['bytes'])} were written{wrote}; it was not used")
        if file_digest(path) != expected["sha256"]:
            raise CheckpointError(f"{folder}: {what} {name} damaged: its SHA-256 is not the one recorded when it "
                                  "was written (a disk or copy error, or an edit); it was not used. Restore it from a "
                                  "copy, or start the run again")


def allowed_globals() -> dict[tuple[str, str], Any]:
    """What a DCP `.metadata` may name: DCP's metadata classes, torch's dtypes, sizes and layouts,
    and a path (what torch writes). Nothing else is importable from it."""
    import pathlib

    import torch
    import torch.distributed.checkpoint.filesystem as filesystem
    import torch.distributed.checkpoint.metadata as metadata

    allowed = {("torch.distributed.checkpoint.metadata", name): getattr(metadata, name)
               for name in ("Metadata", "TensorStorageMetadata", "BytesStorageMetadata", "TensorProperties",
                            "ChunkStorageMetadata", "MetadataIndex", "StorageMeta", "_MEM_FORMAT_ENCODING")}
    allowed[("torch.distributed.checkpoint.filesystem", "_StorageInfo")] = filesystem._StorageInfo
    allowed[("torch", "Size")] = torch.Size
    allowed[("torch.serialization", "_get_layout")] = torch.serialization._get_layout
    allowed[("pathlib", "PosixPath")] = pathlib.PosixPath
    allowed[("pathlib", "PurePosixPath")] = pathlib.PurePosixPath
    for name in dir(torch):
        if isinstance(getattr(torch, name, None), torch.dtype):
            allowed[("torch", name)] = getattr(torch, name)
    return allowed


class MetadataUnpickler(pickle.Unpickler):
    """pickle.Unpickler that resolves only allowed_globals()."""

    def __init__(self, handle, where: Path):
        super().__init__(handle)
        self.allowed, self.where = allowed_globals(), where

    def find_class(self, module: str, name: str) -> Any:
        try:
            return self.allowed[(module, name)]
        except KeyError:
            raise CheckpointError(f"{self.where}: refused: it names {module}.{name}, which is not one of DCP's "
                                  "metadata classes (a sharded checkpoint's index holds nothing else; a file that "
                                  "does could run code when read), so it was not read") from None


def read_metadata(path: Path):
    """DCP's Metadata from `path`, through MetadataUnpickler; anything else it holds is refused by name."""
    from torch.distributed.checkpoint.metadata import Metadata

    data = read_bounded(path, "a sharded checkpoint's index", METADATA_LIMIT, CheckpointError)
    try:
        metadata = MetadataUnpickler(io.BytesIO(data), path).load()
    except CheckpointError:
        raise
    except Exception as err:  # a truncated or garbled pickle raises any of a dozen kinds
        raise CheckpointError(f"{path}: not a readable index of shards (corrupt or cut short: "
                              f"{type(err).__name__}: {err})") from None
    if not isinstance(metadata, Metadata) or not isinstance(getattr(metadata, "storage_data", None), dict):
        raise CheckpointError(f"{path}: not an index of shards: it holds a {type(metadata).__name__}")
    return metadata


def safe_reader(folder: Path):
    """torch's FileSystemReader for `folder`, with read_metadata replaced by the restricted one."""
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.metadata import StorageMeta

    class SafeReader(FileSystemReader):
        def read_metadata(self, *args: Any, **kwargs: Any):
            rank = kwargs.get("rank")
            metadata = read_metadata(Path(self._get_metadata_path(rank)))
            if getattr(metadata, "storage_meta", None) is None:
                metadata.storage_meta = StorageMeta()
            metadata.storage_meta.load_id = self.load_id
            return metadata

    return SafeReader(folder)


@contextlib.contextmanager
def loading(folder: Path):
    """Turn what DCP raises while reading shards into one CheckpointError naming the folder: its
    CheckpointException is a BaseException, which `except Exception` misses."""
    from torch.distributed.checkpoint.api import CheckpointException

    try:
        yield
    except CheckpointException as err:
        causes = [cause for _, (cause, _) in sorted(err.failures.items())]
        inner = next((cause for cause in causes if isinstance(cause, CheckpointError)), None)
        if inner is not None:
            raise inner from None
        raise CheckpointError(unreadable(folder, causes[0] if causes else err)) from None
    except (RuntimeError, AssertionError, OSError, ValueError, KeyError, EOFError, pickle.UnpicklingError) as err:
        if isinstance(err, CheckpointError):
            raise
        raise CheckpointError(unreadable(folder, err)) from None


def unreadable(folder: Path, cause: BaseException) -> str:
    detail = (str(cause).splitlines() or [""])[0]
    return f"{folder}: its shards could not be read ({type(cause).__name__}: {detail})"
