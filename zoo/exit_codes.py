"""What a command's ending means as an exit code, for `zoo` and for each cell a sweep's worker
trains: 0 done, 2 a user's mistake or a refusal the zoo explained (never a bug), 130 Ctrl-C, an
interruption's own code. A bug is not caught here: its traceback is Python's, exit 1."""

from __future__ import annotations

import sys
from collections.abc import Callable

from pydantic import ValidationError

from zoo.errors import Interrupted, ZooError, describe_validation


def exit_code_of(command: Callable[[], None]) -> int:
    """Run `command`; the exit code its ending means, with the zoo's one-line message on stderr."""
    try:
        command()
    except Interrupted as err:
        print(f"zoo: {err}", file=sys.stderr)
        return err.exit_code
    except ZooError as err:  # the zoo's own errors: a user's mistake or a refusal, never a bug
        print(f"zoo: {err}", file=sys.stderr)
        return 2
    except ValidationError as err:
        print(f"zoo: {describe_validation(err)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C outside training (which says what it kept): nothing half-written stays
        print("zoo: interrupted (SIGINT); every file the zoo writes is written whole or not at all", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `zoo list | head`: the reader has all it wanted
        sys.stderr.close()
        return 0
    except OSError as err:  # files and folders the user named: missing, unreadable, no space
        print(f"zoo: {err}", file=sys.stderr)
        return 2
    return 0
