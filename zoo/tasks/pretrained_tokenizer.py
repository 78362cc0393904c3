"""A tokenizer that came with a pretrained model (`task.tokenizer_dir`): the folder that a
transformers tokenizer's save_pretrained writes (tokenizer.json, tokenizer_config.json), read
with the `tokenizers` library, so fine-tuning an imported model feeds it the ids it was trained
on. Its special ids are the model's, not the zoo's 0-3: pad and eos from the tokenizer's
configuration, the decoder's start token from the model's config.json beside it when there is one
(T5 starts from pad, BART from eos), else bos, else pad."""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from zoo.errors import ConfigError
from zoo.files import read_bounded, read_json
from zoo.tasks.base import text_stays_text

TOKENIZER_BYTES = 512 << 20
"""The most a tokenizer.json may hold (the largest of the field's are tens of MB)."""
FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "config.json")
"""What the folder may hold that decides how text becomes ids: each one present is data of the run."""


def folder_files(folder: str) -> list[Path]:
    return [path for name in FILES if (path := Path(folder) / name).is_file()]


def _read_json(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = read_json(path, "a tokenizer's settings")
    except OSError as err:
        raise ConfigError(f"task.tokenizer_dir: {path} is not readable ({err.strerror or err})") from None
    return data if isinstance(data, dict) else {}


def _token_text(value: Any, where: str) -> str | None:
    """A special token as the configuration writes it: a string, or {"content": ...} (older files)."""
    text = value.get("content") if isinstance(value, dict) else value
    if text is not None and not isinstance(text, str):
        raise ConfigError(f"task.tokenizer_dir: {where} is {json.dumps(value)}, not a token: a string, or "
                          '{"content": "<string>"}')
    return text


def _start_id(folder: str, ids: dict[str, int | None], vocab_size: int) -> int:
    """The decoder's start token: config.json's decoder_start_token_id, else bos, else pad."""
    start = _read_json(Path(folder) / "config.json").get("decoder_start_token_id")
    if start is None:
        return ids["bos"] if ids["bos"] is not None else ids["pad"]
    if isinstance(start, bool) or not isinstance(start, int) or not 0 <= start < vocab_size:
        raise ConfigError(f"task.tokenizer_dir: {Path(folder) / 'config.json'}: decoder_start_token_id is "
                          f"{json.dumps(start)}, not a token id of the tokenizer (an integer from 0 to {vocab_size - 1})")
    return start


def named_id(tokenizer, folder: str, role: str) -> int | None:
    """The id of the token the folder's configuration names for `role` (pad, eos, bos, mask), None
    where it names none; a named token that tokenizer.json lacks is an error."""
    settings = {**_read_json(Path(folder) / "special_tokens_map.json"), **_read_json(Path(folder) / "tokenizer_config.json")}
    token = _token_text(settings.get(f"{role}_token"), f"{role}_token in {folder}")
    found = tokenizer.token_to_id(token) if token else None
    if token and found is None:
        raise ConfigError(f"task.tokenizer_dir {folder!r}: its {role}_token {token!r} is not in tokenizer.json")
    return found


@lru_cache(maxsize=8)
def _load(folder: str, stamp: tuple[float, ...]):
    """(tokenizer, {"pad_id", "bos_id", "eos_id"}) of a folder, read again when a file changes (`stamp`)."""
    from tokenizers import Tokenizer

    path = Path(folder) / "tokenizer.json"
    if not path.is_file():
        raise ConfigError(f"task.tokenizer_dir {folder!r}: no tokenizer.json there (save the tokenizer with "
                          "save_pretrained, or a `tokenizers` Tokenizer with .save)")
    text = read_bounded(path, "a tokenizer", limit=TOKENIZER_BYTES).decode("utf-8", errors="replace")
    try:
        tokenizer = Tokenizer.from_str(text)
    except Exception as err:  # the library raises its own Exception subclass for a damaged file
        raise ConfigError(f"task.tokenizer_dir: {path} is not a tokenizers file ({err})") from None
    ids = {role: named_id(tokenizer, folder, role) for role in ("pad", "eos", "bos")}
    for role in ("pad", "eos"):
        if ids[role] is None:
            raise ConfigError(f"task.tokenizer_dir {folder!r}: tokenizer_config.json names no {role}_token; "
                              "the model needs one to pad and to stop decoding")
    start = _start_id(folder, ids, tokenizer.get_vocab_size())
    return tokenizer, {"pad_id": ids["pad"], "bos_id": start, "eos_id": ids["eos"]}


def read_folder(folder: str):
    stamp = tuple(path.stat().st_mtime_ns for path in folder_files(folder))
    return _load(str(folder), stamp)


def tokenizer_special_ids(folder: str) -> dict[str, int]:
    return read_folder(folder)[1]


def tokenizer_mask_id(folder: str) -> int:
    """The id of the folder's mask_token, which masked-token prediction writes where it hides one."""
    found = named_id(read_folder(folder)[0], folder, "mask")
    if found is None:
        raise ConfigError(f"task.tokenizer_dir {folder!r}: tokenizer_config.json names no mask_token, which mlm writes "
                          "where it hides a token; give a masked language model's tokenizer (RoBERTa's, BERT's)")
    return found


class PretrainedCodec:
    """Text <-> ids with a pretrained tokenizer. The source side is the tokenizer's own output
    (its post-processor adds eos, and bos where the model had one); the target side starts with
    the decoder's start token, so the trainer's shift gives the decoder what the model was trained
    on; a document (the text tasks lm and mlm) is bos, its ids, eos, as a token store keeps it."""

    def __init__(self, tokenizer, ids: dict[str, int], target: bool, documents: bool = False):
        self.tokenizer, self.ids, self.target = text_stays_text(tokenizer), dict(ids), target
        self.documents = documents

    @classmethod
    def from_folder(cls, folder: str, target: bool, documents: bool = False) -> PretrainedCodec:
        tokenizer, ids = read_folder(folder)
        return cls(tokenizer, ids, target, documents)

    def __len__(self) -> int:
        return self.tokenizer.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        if self.documents:
            return [self.ids["bos_id"], *self.tokenizer.encode(text, add_special_tokens=False).ids, self.ids["eos_id"]]
        ids = self.tokenizer.encode(text).ids
        return [self.ids["bos_id"], *ids] if self.target else ids

    def special(self) -> list[int]:
        """The ids of the tokenizer's special tokens and of its pad, bos and eos: never ordinary text."""
        added = self.tokenizer.get_added_tokens_decoder()
        return sorted({*self.ids.values(), *(i for i, token in added.items() if token.special)})

    def decode(self, ids: Sequence[int]) -> str:
        ids = [int(i) for i in ids]
        if self.ids["eos_id"] in ids:
            ids = ids[: ids.index(self.ids["eos_id"])]
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def piece(self, i: int) -> str:
        return self.tokenizer.id_to_token(i)

    def state(self) -> dict[str, Any]:
        state = {"kind": "pretrained", "tokenizer": self.tokenizer.to_str(), "ids": self.ids, "target": self.target}
        return {**state, "documents": True} if self.documents else state

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> PretrainedCodec:
        from tokenizers import Tokenizer

        return cls(Tokenizer.from_str(state["tokenizer"]), state["ids"], state["target"], state.get("documents", False))
