"""The zoo's own errors, and what each means as an exit code. The command line (and a sweep's
worker, for each cell) prints a ZooError, and the I/O and validation errors a user can cause, as
one line: 2 a user's mistake or a refusal the zoo explained, 130 Ctrl-C, an interruption's own
code. Anything else is a bug and keeps its traceback (Python's exit 1)."""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError


class ZooError(Exception):
    """A user's mistake, or an operation the zoo refuses so that no result is lost or faked."""


class ConfigError(ZooError, ValueError):
    """A bad value in a spec, an experiment, a sweep, a file or a command line."""


class ConfigTypeError(ConfigError, TypeError):
    """A value of a kind the zoo cannot read as a spec (an int where a name or a mapping goes)."""


class InputError(ZooError, ValueError):
    """Inputs a model cannot take: ids outside its vocabulary, shapes that do not match, a
    sequence longer than its positions."""


class InputTypeError(InputError, TypeError):
    """Inputs of the wrong type: a list or float tensor where int64 token ids go."""


class InteropError(ConfigError):
    """A model of another library that no zoo spec describes, or a spec with no counterpart there
    (zoo.from_hf, zoo.to_hf, zoo.interop.from_torch): a ConfigError, as the model is what was given."""


class CheckpointError(ZooError, ValueError):
    """A file that is not a readable zoo checkpoint, or one that does not fit the experiment."""


class DataError(ZooError, ValueError):
    """A task's data file that cannot be read as the task needs it; the message names the file,
    and the line where there is one."""


class MissingData(DataError, FileNotFoundError):
    """A data file the task names is not there (a corpus split, a text file): a FileNotFoundError
    too, so code that catches that still does."""


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
    """Pydantic's errors as one line: `loc: message; loc: message` (a validator's own message
    without pydantic's "Value error, " before it)."""
    parts: dict[str, list[str]] = {}
    for e in err.errors():
        loc = e["loc"][:-1] if e["loc"] and UNION_MEMBER.match(str(e["loc"][-1])) else e["loc"]
        message = e["msg"].removeprefix("Value error, ") + quoted_number(e)
        parts.setdefault(".".join(str(p) for p in loc), []).append(message)
    return "; ".join(f"{loc}: {either(messages)}" if loc else either(messages) for loc, messages in parts.items())


def either(messages: list[str]) -> str:
    """A union's messages as one: `Input should be greater than 0 or 'auto'`."""
    shared = "Input should be "
    first, *rest = messages
    return " or ".join([first, *(m.removeprefix(shared) if first.startswith(shared) else m for m in rest)])


UNION_MEMBER = re.compile(r"^(constrained-\w+|literal\[.*\]|function-\w+\[.*\]|int|float|str|bool|none|"
                          r"(list|dict|tuple|set)\[.*\]|is-instance\[.*\]|tagged-union\[.*\])$")
"""The member tag pydantic adds to the location of each failed member of a union (`d_ff.constrained-int`,
`d_ff.literal['auto']`): the member's messages are said under the field's own name, joined by "or"."""


NUMBER_TYPES = {"float_type", "int_type", "float_parsing", "int_parsing"}


def quoted_number(error: Mapping[str, Any]) -> str:
    """Where a number was given as a string (quoted in YAML or in --set), say so: pydantic's
    "Input should be a valid number" beside a value that reads as a number says nothing."""
    given = error.get("input")
    if error.get("type") not in NUMBER_TYPES or not isinstance(given, str):
        return ""
    try:
        float(given)
    except ValueError:
        return ""
    return f", got the string {given!r}: a quoted number; write it without quotes"


RANK_GRACE_S = 5.0
"""How long a rank other than 0 waits before it ends on a refusal, so that rank 0, which meets the
same refusal, ends first and says it: torchrun stops every rank at the first end it sees, and a
rank 0 stopped by that signal would turn the refusal's exit 2 into 143."""


def say(message: str) -> None:
    """The zoo's one line on stderr, once: under torchrun every rank meets the same refusal, and
    rank 0 alone says it (the others end with the same code, in silence, after rank 0)."""
    if os.environ.get("RANK", "0") == "0":
        print(f"zoo: {message}", file=sys.stderr)
    else:
        time.sleep(RANK_GRACE_S)


def exit_code_of(command: Callable[[], None]) -> int:
    """Run `command`; the exit code its ending means, with the zoo's one-line message on stderr."""
    try:
        command()
    except Interrupted as err:
        say(str(err))
        return err.exit_code
    except ZooError as err:  # the zoo's own errors: a user's mistake or a refusal, never a bug
        say(str(err))
        return 2
    except ValidationError as err:
        say(describe_validation(err))
        return 2
    except KeyboardInterrupt:  # Ctrl-C outside training (which says what it kept): nothing half-written stays
        say("interrupted (SIGINT); every file the zoo writes is written whole or not at all")
        return 130
    except BrokenPipeError:  # `zoo list | head`: the reader has all it wanted
        sys.stderr.close()
        return 0
    except OSError as err:  # files and folders the user named: missing, unreadable, no space
        say(str(err))
        return 2
    return 0
