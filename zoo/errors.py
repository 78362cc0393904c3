"""The zoo's own errors. The command line prints a ZooError (and the I/O and validation errors a
user can cause) as one line; anything else is a bug and keeps its traceback."""

from __future__ import annotations

from pydantic import ValidationError


class ZooError(Exception):
    """A user's mistake, or an operation the zoo refuses so that no result is lost or faked."""


class ConfigError(ZooError, ValueError):
    """A bad value in a spec, an experiment, a sweep, a file or a command line."""


class CheckpointError(ZooError, ValueError):
    """A file that is not a readable zoo checkpoint, or one that does not fit the experiment."""


class DataError(ZooError, ValueError):
    """A task's data file that cannot be read as the task needs it; the message names the file,
    and the line where there is one."""


class RunConflict(ZooError):
    """The run folder is held by another process, or holds another run."""


class Diverged(ZooError, RuntimeError):
    """The loss or the weights stopped being finite, or the loss exploded. `step` is the first
    step that was not finite, where known (the check runs at logs, not at every step)."""

    def __init__(self, message: str, step: int | None = None):
        super().__init__(message)
        self.step = step


class Interrupted(ZooError):
    """SIGTERM or SIGINT stopped training after a step; the checkpoint of that step was kept."""

    def __init__(self, message: str, signum: int | None = None):
        super().__init__(message)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        """The shell's convention: 128 + the signal's number (130 for SIGINT, 143 for SIGTERM)."""
        return 128 + (self.signum or 2)


def describe_validation(err: ValidationError) -> str:
    """Pydantic's errors as one line: `loc: message; loc: message`."""
    parts = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"])
        parts.append(f"{loc}: {e['msg']}" if loc else e["msg"])
    return "; ".join(parts)
