"""Whether a task can train a model kind: the task names the kinds it trains, and a kind whose
one table reads source and target needs a task with one vocabulary. How each kind frames the
task's pairs is the kind's own (zoo.model.zoo_model: frame, continuations, sequence_lengths)."""

from __future__ import annotations

from pathlib import Path

from zoo.errors import ConfigError
from zoo.near_paths import near_path
from zoo.specs.registries import kinds, registry


def check_kind_trains_on(kind: str, task_class: type) -> str:
    """The task (its class: no data read) trains the kind; returns the task's registered name."""
    tasks = registry("task")
    name = next((n for n in tasks.names() if tasks.get(n) is task_class), task_class.__name__)
    fitting = [k for k, model in kinds().items()
               if model.trains_on == task_class.shape and (task_class.kinds is None or k in task_class.kinds)]
    if kind not in fitting:
        raise ConfigError(f"model.kind {kind}: task {name} trains model.kind {' or '.join(fitting)}")
    return name


def check_kind_fits_task(kind: str, task) -> None:
    """The task trains the kind, and a kind of one vocabulary gets one. Checked before the model's
    spec takes the task's vocabularies."""
    name = check_kind_trains_on(kind, type(task))
    if len(kinds()[kind].reads) == 1 and task.src_vocab is not task.tgt_vocab:
        from zoo.tasks.pretrained_tokenizer import PretrainedCodec

        if isinstance(task.tgt_vocab, PretrainedCodec):
            fix = "a pretrained tokenizer (task.tokenizer_dir) frames encoder-decoder models only; leave it out"
        elif "shared_vocab" in type(task.params).model_fields:
            fix = "set task.shared_vocab: true"
        else:
            fix = "use a task with one vocabulary"
        raise ConfigError(f"model.kind {kind} reads source and target in one vocabulary, but task "
                          f"{name} has a vocabulary per side; {fix}, or use kind encoder_decoder")


def check_before_data(experiment) -> None:
    """What `--print-config` can check of a run without reading its data: the task trains the
    model's kind, and the data folder the task names is there."""
    check_kind_trains_on(experiment.model.kind, registry("task").get(experiment.task["name"]))
    data_dir = experiment.task.get("data_dir")
    if data_dir is not None and not Path(data_dir).is_dir():
        raise ConfigError(f"task.data_dir {str(data_dir)!r}: no such folder{near_path(data_dir)}")
