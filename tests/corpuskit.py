"""Parallel corpora written in each registered format, for the tests that read or train on them."""

from __future__ import annotations

import gzip
import json


def write_pair(folder, split, pairs, open_):
    for side, lang in enumerate(("de", "en")):
        with open_(folder / f"{split}.{lang}") as handle:
            handle.write("".join(pair[side] + "\n" for pair in pairs))


def write_tsv(folder, split, pairs, open_):
    with open_(folder / f"{split}.tsv") as handle:
        handle.write("".join(f"{s}\t{t}\n" for s, t in pairs))


def write_jsonl(folder, split, pairs, open_):
    with open_(folder / f"{split}.jsonl") as handle:
        handle.write("".join(json.dumps({"translation": {"de": s, "en": t}}, ensure_ascii=False) + "\n"
                             for s, t in pairs))


WRITERS = {"pair": write_pair, "tsv": write_tsv, "jsonl": write_jsonl}
"""How the tests write each registered format (a new format needs its writer here)."""


def opener(gz: bool):
    def open_(path):
        return gzip.open(f"{path}.gz", "wt", encoding="utf-8") if gz else open(path, "w", encoding="utf-8")

    return open_
