"""`train.init_from`: a run that starts from trained weights (another run's checkpoint, or a model
folder that save_pretrained wrote, the zoo's or transformers') instead of an initialization, so a
model imported with from_hf, or trained by an earlier run, trains on with the zoo's trainer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from zoo.dropout.rates import FIELDS as DROPOUT_FIELDS
from zoo.errors import ConfigError
from zoo.files import regular_file
from zoo.specs.identity import flatten
from zoo.specs.model_spec import ModelSpec
from zoo.tasks.base import Task


def initial_weights(source: str, spec: ModelSpec, task: Task) -> dict[str, Any]:
    """The state dict to start from, once its model is found to be the experiment's (a difference
    in any field, the vocabulary sizes the task gives included, is an error naming each) and its
    ids to mean the task's tokens."""
    from zoo.interop.folders import from_pretrained
    from zoo.trainer.checkpoint import load

    path = Path(source)
    if not path.exists():
        raise ConfigError(f"train.init_from {source!r}: no such file or folder (a run's checkpoint.pt, or a folder "
                          "that save_pretrained wrote)")
    if not path.is_dir():
        regular_file(path, "train.init_from")
    check_same_tokens(path, task)
    model = from_pretrained(path) if path.is_dir() else load(path)[0]
    check_vocabulary_sizes(source, model.spec, task)
    differences = spec_differences(model.spec, spec)
    if differences:
        raise ConfigError(f"train.init_from {source!r}: its model is not the experiment's ({'; '.join(differences[:6])}"
                          f"{'; ...' if len(differences) > 6 else ''}); set the experiment's model to it "
                          f"(its spec: zoo show, or the folder's config.json)")
    state = model.state_dict()
    broken = next((name for name, tensor in state.items() if tensor.is_floating_point() and not tensor.isfinite().all()),
                  None)
    if broken is not None:
        raise ConfigError(f"train.init_from {source!r}: its weight {broken} holds a NaN or an infinity; a run cannot "
                          "start from it (it would be recorded as diverged)")
    return state


def check_same_tokens(path: Path, task: Task) -> None:
    """Trained weights read ids as the tokens they were trained on: a checkpoint's task vocabularies
    (learned from its data) must be this task's, and a model folder with a tokenizer must be read
    with that tokenizer's vocabulary (task.tokenizer_dir). Same sizes alone would train silently on
    ids that mean other tokens."""
    from zoo.trainer.checkpoint import read_checkpoint

    if path.is_file():
        if read_checkpoint(path, need=("task",))["task"] != task.state():
            raise ConfigError(f"train.init_from {str(path)!r}: its run learned other vocabularies than this task's "
                              "(other data or tokenizer settings), so the same ids would mean other tokens; give the "
                              "task the source run's data and tokenizer settings")
        return
    if not (path / "tokenizer.json").is_file():
        return  # a zoo model folder holds no vocabulary: the ids are the caller's to match
    from zoo.tasks.pretrained_tokenizer import read_folder

    theirs = read_folder(str(path))[0].get_vocab()
    if not all((codec := pretrained_codec(vocab)) is not None and codec.tokenizer.get_vocab() == theirs
               for vocab in (task.src_vocab, task.tgt_vocab)):
        raise ConfigError(f"train.init_from {str(path)!r}: the folder's model reads ids of its own tokenizer, and the "
                          f"task does not use it; set task.tokenizer_dir: {str(path)!r} (or leave the task's "
                          "tokenizer settings out: a folder's tokenizer is then the task's)")


def pretrained_codec(vocab):
    """The pretrained tokenizer's codec a task vocabulary reads with (itself, or the codec mlm's
    mask vocabulary wraps); None for a vocabulary the task learned."""
    from zoo.tasks.pretrained_tokenizer import PretrainedCodec

    codec = getattr(vocab, "codec", vocab)
    return codec if isinstance(codec, PretrainedCodec) else None


def check_vocabulary_sizes(source: str, spec: ModelSpec, task: Task) -> None:
    """A vocabulary the task learned from its data, of another size than the model's, cannot be
    the tokens the model was trained on (its ids would fit a larger model silently)."""
    sides = [("", task.src_vocab, spec.src_vocab_size)] if task.src_vocab is task.tgt_vocab else \
        [("source ", task.src_vocab, spec.src_vocab_size), ("target ", task.tgt_vocab, spec.tgt_vocab_size)]
    for side, vocab, size in sides:
        if pretrained_codec(vocab) is None and len(vocab) != size:
            tokenizer = getattr(task.params, "tokenizer", None)
            learned = f" (task.tokenizer {tokenizer})" if tokenizer is not None else ""
            raise ConfigError(f"train.init_from {source!r}: its model reads a {side}vocabulary of {size} ids, and the "
                              f"task's holds {len(vocab)}{learned}, so the same ids would mean other tokens; give the "
                              "task the tokenizer the model was trained with (task.tokenizer_dir, a folder that a "
                              "tokenizer's save_pretrained wrote)")


def as_built(spec: ModelSpec) -> dict[str, Any]:
    """The spec as the model is built (ModelSpec.as_built), less its dropout rates: settings of
    training that no weight depends on, which a run may change."""
    fields = flatten(spec.as_built())
    for key in DROPOUT_FIELDS:
        fields.pop(key, None)
    return fields


def spec_differences(there: ModelSpec, here: ModelSpec) -> list[str]:
    old, new = as_built(there), as_built(here)
    return [f"model.{key}: {old.get(key)!r} there, {new.get(key)!r} here" for key in sorted(old.keys() | new.keys())
            if old.get(key) != new.get(key)]
