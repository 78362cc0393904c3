"""A corpus of long documents that every machine with Python has: the top-level modules of the
running interpreter's standard library (`Lib/*.py`), a file a document, split into train, valid
and test folders by a stable hash of each file's name (a 20th each held out), for the lm task's
`folders: true, suffix: .py`.

Provenance and licence: the source files of CPython's standard library, distributed with the
interpreter under the Python Software Foundation License Version 2 (https://docs.python.org/3/license.html);
a few modules carry their authors' notices beside it, kept as they are. The files differ between
Python versions: the folder's PROVENANCE.json names the version and every file's SHA-256, and a
published ledger trained on it carries its replay, so that `zoo reproduce` needs none of it.

    python experiments/corpora/python_stdlib.py data/python-stdlib
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import shutil
import sys
import sysconfig
import zlib
from pathlib import Path

HELD_OUT = 20
"""One file in HELD_OUT goes to test, one to valid, by the CRC-32 of its name."""


def split_of(name: str) -> str:
    bucket = zlib.crc32(name.encode()) % HELD_OUT
    return "test" if bucket == 0 else "valid" if bucket == 1 else "train"


def readable(path: Path) -> bool:
    """Whether a module is UTF-8 text (the lm task refuses anything else, naming the file)."""
    try:
        path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def write(out: Path) -> dict:
    library = Path(sysconfig.get_paths()["stdlib"])
    modules = sorted(path for path in library.glob("*.py") if readable(path))
    if out.exists():
        shutil.rmtree(out)
    files = {}
    for path in modules:
        split = split_of(path.name)
        (out / split).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, out / split / path.name)
        files[f"{split}/{path.name}"] = hashlib.sha256(path.read_bytes()).hexdigest()
    provenance = {
        "source": str(library), "python": sys.version.split()[0], "implementation": platform.python_implementation(),
        "licence": "Python Software Foundation License Version 2 (https://docs.python.org/3/license.html)",
        "splits": {split: sum(1 for name in files if name.startswith(f"{split}/")) for split in ("train", "valid", "test")},
        "bytes": sum((out / name).stat().st_size for name in files), "files": files,
    }
    (out / "PROVENANCE.json").write_text(json.dumps(provenance, indent=1) + "\n", encoding="utf-8")
    return provenance


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the folder to write (replaced if it exists)")
    provenance = write(parser.parse_args().out)
    print(f"Python {provenance['python']} standard library: {provenance['splits']} files, {provenance['bytes']:,} bytes; "
          f"{provenance['licence']}")


if __name__ == "__main__":
    main()
