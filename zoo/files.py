"""Files handled safely: atomic, fsynced writes, locks that keep two processes off one folder, and
reads of regular files only, each with a bound."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from zoo.errors import ConfigError, RunConflict, ZooError

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: folders are not locked
    fcntl = None


class WriteError(ZooError, OSError):
    """A result could not be written; what was there before is untouched."""


def atomic_write(path: str | Path, content: bytes | str | Callable[[BinaryIO], None]) -> None:
    """Write a temporary file beside `path`, fsync it, then rename it over `path`: a crash or a
    full disk never leaves half a file, and a failed write removes its temporary file."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as err:
        raise WriteError(f"{path}: cannot write: {err.strerror or err}") from None
    try:
        os.fchmod(fd, 0o666 & ~process_umask())  # as open() would make it: mkstemp's 0600 hides results from the group
        with os.fdopen(fd, "wb") as handle:
            if callable(content):
                content(handle)
            else:
                handle.write(content.encode("utf-8") if isinstance(content, str) else content)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        Path(tmp).unlink(missing_ok=True)
        cause = io_error_in(err)
        if cause is not None:
            raise WriteError(f"{path}: could not be written ({cause.strerror or cause}); the previous file, if any, is "
                             "unchanged and the partial temporary file was removed") from None
        raise


def save_figure(fig, path: str | Path, **options) -> Path:
    """A matplotlib figure written as atomic_write writes: a failed write names the file and keeps
    the picture that was there. The figure is closed either way."""
    import matplotlib.pyplot as plt

    path = Path(path)
    try:
        atomic_write(path, lambda handle: fig.savefig(handle, format=path.suffix.lstrip(".") or "png", **options))
    finally:
        plt.close(fig)
    return path


def process_umask() -> int:
    """The process's umask, read without changing it where Linux tells it (/proc), else set and reset."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def io_error_in(err: BaseException | None) -> OSError | None:
    """The OSError behind an exception, if any: torch.save reports a full disk as a RuntimeError
    raised while it handles the OSError of the write."""
    seen = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, OSError):
            return err
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return None


class FolderLock:
    """An exclusive lock on a folder, held through `FOLDER/NAME` (which records the holder's pid).

    The operating system drops it when the process ends, however it ends, so a killed run never
    leaves a stale lock behind. Released, the file goes too (removed while still held; a process
    that locked the removed file sees so and locks the path afresh), so a finished run's folder
    holds no lock file.
    """

    def __init__(self, folder: str | Path, name: str = ".lock", what: str = "a run"):
        self.path, self.what, self._handle = Path(folder) / name, what, None

    def acquire(self) -> FolderLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            handle = open(self.path, "a+", encoding="utf-8")  # noqa: SIM115 - held open: the open file is the lock
            if fcntl is None:
                break
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                pid = handle.read().strip() or "unknown"
                handle.close()
                raise RunConflict(f"{self.path.parent} is in use: another zoo process (pid {pid}) holds {self.what} "
                                  "there; wait for it to end or stop it") from None
            if still_the_path(handle, self.path):
                break
            handle.close()  # its holder removed the file as we opened it: lock the path's file afresh
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        self._handle = handle
        return self

    def release(self) -> None:
        if self._handle is not None:
            with contextlib.suppress(OSError):
                self.path.unlink()  # while held: no one else holds a lock on the file that goes
            self._handle.close()  # closing the file releases the lock
            self._handle = None

    def __enter__(self) -> FolderLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def still_the_path(handle: Any, path: Path) -> bool:
    """Whether the open file is still the one at `path` (not removed or replaced since it was opened)."""
    try:
        return os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino
    except FileNotFoundError:
        return False


def lock_holder(folder: str | Path, name: str = ".lock") -> int | None:
    """The pid of the process that holds the folder's lock, or None when it is free."""
    path = Path(folder) / name
    if fcntl is None:
        return None
    try:
        handle = open(path, encoding="utf-8")  # noqa: SIM115 - read only: a free lock leaves no file behind
    except FileNotFoundError:
        return None
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            text = handle.read().strip()
            return int(text) if text.isdigit() else -1
    return None


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} TiB"


def check_writable_folder(folder: str | Path, field: str, need_bytes: int = 0) -> None:
    """Fail before any training if `folder` cannot take the run's files: a file in the way, no
    permission, a read-only file system, or less free space than `need_bytes`."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise ConfigError(f"{field} {str(folder)!r} is a file, not a folder") from None
    except OSError as err:
        raise ConfigError(f"{field} {str(folder)!r}: cannot create the folder: {err.strerror or err}") from None
    if not folder.is_dir():
        raise ConfigError(f"{field} {str(folder)!r} is a file, not a folder")
    try:
        with tempfile.TemporaryFile(dir=folder) as probe:
            probe.write(b"zoo")
    except OSError as err:
        raise ConfigError(f"{field} {str(folder)!r} is not writable: {err.strerror or err}") from None
    free = shutil.disk_usage(folder).free
    if need_bytes and free < need_bytes:
        raise ConfigError(f"{field} {str(folder)!r} has {human_bytes(free)} free, but the run's checkpoint needs "
                          f"about {human_bytes(need_bytes)}; free some space or choose another {field}")


METADATA_BYTES = 64 << 20
"""The most a metadata file (an experiment, a spec, config.json, a tokenizer's settings, a record)
may hold: far past any real one, far below what would fill memory."""


def inside_its_folder(path: str | Path, what: str, error: type[ZooError] = ConfigError) -> Path:
    """`path` itself, where it is no symbolic link and lies in its own folder: a sweep's ledger,
    sweep.yaml or report planted as a link would have the sweep append to (or read) whatever it
    points at, a shell script outside the sweep included. The folder may be a link; the file may not."""
    path = Path(path)
    if path.is_symlink():
        raise error(f"{path}: a symbolic link (to {os.readlink(path)}), so not used as {what}: a sweep writes and "
                    "reads its own files only, never through a link that could point anywhere; replace the link by "
                    "the file itself")
    if path.exists() and path.resolve().parent != path.parent.resolve():
        raise error(f"{path}: resolves to {path.resolve()}, outside its folder, so not used as {what}")
    return path


def regular_file(path: str | Path, what: str, error: type[ZooError] = ConfigError) -> os.stat_result:
    """The file's status, where it is a regular file (a link is followed): a device such as
    /dev/zero never ends and a FIFO blocks the reader, so neither is read. A missing file or a
    folder raises FileNotFoundError or IsADirectoryError, for the caller to say in its words."""
    status = os.stat(path)
    if stat.S_ISDIR(status.st_mode):
        raise IsADirectoryError(21, "Is a directory", str(path))
    if not stat.S_ISREG(status.st_mode):
        kind = ("a FIFO" if stat.S_ISFIFO(status.st_mode) else "a device" if stat.S_ISCHR(status.st_mode)
                or stat.S_ISBLK(status.st_mode) else "a socket" if stat.S_ISSOCK(status.st_mode) else "not a file")
        raise error(f"{path}: {kind}, not a regular file, so not read as {what}")
    return status


READ_CHUNK = 1 << 20
"""Past the size a file's status gave (it grew, or /proc tells none), it is read this much at a time."""


def read_bounded(path: str | Path, what: str, limit: int = METADATA_BYTES, error: type[ZooError] = ConfigError) -> bytes:
    """The bytes of a regular file of at most `limit` bytes; anything else raises `error` naming
    the file (missing and folder as in regular_file). It allocates what the file holds, not the
    bound: a bound of the available memory would otherwise fail under an address-space limit."""
    size = regular_file(path, what, error).st_size
    if size > limit:
        raise error(f"{path}: {human_bytes(size)}, more than the {human_bytes(limit)} {what} may hold")
    with open(path, "rb") as handle:
        data = handle.read(size)
        more = handle.read(1)
        if more:  # longer than its status said: the rest in chunks, up to one byte past the bound
            blocks, total = [data, more], len(data) + 1
            while total <= limit and (block := handle.read(min(READ_CHUNK, limit + 1 - total))):
                blocks.append(block)
                total += len(block)
            data = b"".join(blocks)
    if len(data) > limit:
        raise error(f"{path}: grew past the {human_bytes(limit)} {what} may hold while it was read")
    return data


def read_json(path: str | Path, what: str, error: type[ZooError] = ConfigError) -> object:
    """A JSON metadata file, bounded in size; bad text, JSON or nesting raises `error` naming it."""
    data = read_bounded(path, what, error=error)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise error(f"{path}: {what} is not UTF-8 text") from None
    try:
        return json.loads(text)
    except RecursionError:  # the parser recurses once a level
        raise error(f"{path}: {what} nests too deeply to read") from None
    except json.JSONDecodeError as err:
        raise error(f"{path}: {what} is not JSON ({err})") from None


DIGESTS: dict[tuple[str, int, int], str] = {}


def content_digest(path: str | Path, what: str, error: type[ZooError] = ConfigError) -> str:
    """A digest of a regular file's content, or of a folder's regular files (names and contents),
    remembered per process while size and modification time stay the same."""
    path = Path(path)
    if path.is_dir():
        digest = hashlib.blake2b(digest_size=16)
        for file in sorted(child for child in path.iterdir() if not child.is_dir()):
            digest.update(file.name.encode() + b"\0" + content_digest(file, what, error).encode())
        return digest.hexdigest()
    status = regular_file(path, what, error)
    key = (str(path.resolve()), status.st_size, status.st_mtime_ns)
    if key not in DIGESTS:
        digest = hashlib.blake2b(digest_size=16)
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        DIGESTS[key] = digest.hexdigest()
    return DIGESTS[key]
