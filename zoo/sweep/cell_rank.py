"""One rank of a sweep cell that torchrun trains (zoo.sweep.torchrun_cell): what `zoo train FILE
--resume` does, with its exit code. A module of its own, which the package does not import, so
that `python -m` runs it cleanly."""

from __future__ import annotations

import sys


def main() -> None:
    from zoo.sweep.worker import train_cell_file
    from zoo.trainer.guards import die_with_parent

    die_with_parent()  # torchrun's death reaches this rank
    raise SystemExit(train_cell_file(sys.argv[1]))


if __name__ == "__main__":
    main()
