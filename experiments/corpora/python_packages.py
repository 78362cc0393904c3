"""A corpus of at least 50 MB that every machine with Python and the zoo installed holds: the
source files of the running interpreter's standard library, then of the installed packages (the
environment's site-packages: torch, transformers, numpy and the rest), a file a document, up to
--megabytes. Beside it, a downstream task for lm-evaluation-harness made from the corpus's test
documents only (the split `zoo data prepare` gives them with the shares below): the next line of
Python code, chosen among four.

Provenance and licences: CPython's standard library is distributed under the Python Software
Foundation License Version 2; every package keeps its own licence (its metadata's License field
is recorded per package). Nothing is redistributed: the folder is written on the machine that
holds the files, and PROVENANCE.json names the Python version, every package and version, and
every file's SHA-256. The files differ between environments, so a published ledger trained on it
carries its replay, and `zoo reproduce` needs none of it.

    python experiments/corpora/python_packages.py data/python-packages
    zoo data prepare data/python-packages --suffix .py --out data/python-packages-shards \
        --tokenizer-kind bytes --vocab-size 4096 --valid-share 0.01 --test-share 0.01
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

VALID_SHARE = TEST_SHARE = 0.01
"""The shares the corpus is prepared with (its header's command): the next-line task is made from
the documents that land in the test split."""
QUESTIONS, PER_DOCUMENT = 500, 25
CONTEXT_LINES, CONTEXT_CHARS, CHOICES = 6, 300, 4


def source_files(limit: int) -> list[tuple[Path, str]]:
    """(file, where it comes from) of the standard library's .py files, then each distribution's,
    in a fixed order, until `limit` bytes; files that are not UTF-8 are left out."""
    found, total = [], 0
    library = Path(sysconfig.get_paths()["stdlib"])
    candidates = [(path, "stdlib") for path in sorted(library.rglob("*.py")) if "site-packages" not in path.parts]
    for dist in sorted(metadata.distributions(), key=lambda d: (d.metadata["Name"] or "").lower()):
        name = dist.metadata["Name"] or "unknown"
        candidates += [(Path(dist.locate_file(f)), name) for f in sorted(dist.files or [], key=str) if str(f).endswith(".py")]
    seen = set()
    for path, origin in candidates:
        if total >= limit or not path.is_file() or path.resolve() in seen:
            continue
        seen.add(path.resolve())
        try:
            path.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            continue
        found.append((path, origin))
        total += path.stat().st_size
    return found


def write(out: Path, megabytes: float) -> dict:
    files = source_files(int(megabytes * 1e6))
    if out.exists():
        shutil.rmtree(out)
    (out / "documents").mkdir(parents=True)
    listed, packages = {}, {}
    for number, (path, origin) in enumerate(files):
        name = f"documents/{number:06d}.py"
        shutil.copyfile(path, out / name)
        listed[name] = {"from": origin, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
        if origin != "stdlib" and origin not in packages:
            meta = metadata.metadata(origin)
            packages[origin] = {"version": meta["Version"], "license": meta["License-Expression"] or meta["License"]}
    provenance = {"python": sys.version.split()[0], "bytes": sum((out / n).stat().st_size for n in listed),
                  "stdlib_licence": "Python Software Foundation License Version 2", "packages": packages,
                  "files": listed}
    (out / "PROVENANCE.json").write_text(json.dumps(provenance, indent=1) + "\n", encoding="utf-8")
    questions = next_line_questions(out / "documents")
    (out / "next_line.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions), encoding="utf-8")
    return provenance


def next_line_questions(folder: Path) -> list[dict]:
    """QUESTIONS questions from the test documents, PER_DOCUMENT at most from each: up to six
    lines of code (at most 300 characters), then the next line among four: it, and lines drawn from
    three other test documents. Where a question sits and which lines are its wrong choices is
    decided by SHA-256, so the task is a function of the corpus."""
    from zoo.tasks.shard_prepare import PrepareSettings, split_of
    from zoo.tasks.shard_sources import Reading
    from zoo.tasks.shard_sources import documents as read_documents
    from zoo.tasks.shard_sources import source_files as listed

    settings = PrepareSettings(valid_share=VALID_SHARE, test_share=TEST_SHARE)
    documents = []
    for document in read_documents(listed([str(folder)], ".py"), Reading(suffix=".py")):  # as zoo data prepare reads
        text = document.text
        if split_of(text, settings) == "test":
            lines = [line for line in text.split("\n") if line.strip()]
            if len(lines) > CONTEXT_LINES + 1:
                documents.append(lines)
    questions = []
    for number, lines in enumerate(documents):
        for k in range(PER_DOCUMENT):
            digest = hashlib.sha256(f"{number}/{k}".encode()).digest()
            draw = [int.from_bytes(digest[4 * i : 4 * i + 4], "little") for i in range(8)]
            at = CONTEXT_LINES + draw[0] % (len(lines) - CONTEXT_LINES)
            others = [documents[(number + 1 + draw[1 + i] % (len(documents) - 1)) % len(documents)]
                      for i in range(CHOICES - 1)]
            choices = [lines[at], *(doc[draw[4 + i] % len(doc)] for i, doc in enumerate(others))]
            if len(set(choices)) < CHOICES:
                continue
            order = sorted(range(CHOICES), key=lambda i: hashlib.sha256(digest + bytes([i])).digest())
            context = "\n".join(lines[at - CONTEXT_LINES : at])[-CONTEXT_CHARS:] + "\n"
            questions.append({"context": context, "choices": [choices[i] for i in order], "answer": order.index(0)})
    return questions[:QUESTIONS]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the folder to write (replaced if it exists)")
    parser.add_argument("--megabytes", type=float, default=50.0, help="the corpus's size (default 50)")
    provenance = write(parser.parse_args().out, parser.parse_args().megabytes)
    print(f"{len(provenance['files'])} files, {provenance['bytes']:,} bytes from the standard library of Python "
          f"{provenance['python']} and {len(provenance['packages'])} packages")


if __name__ == "__main__":
    main()
