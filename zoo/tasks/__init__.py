"""Training tasks, registered by name on the `task` registry."""

from zoo.specs.registries import import_modules
from zoo.tasks.base import Task, TaskParams, Vocabulary

import_modules(__name__, __path__)  # every module: each registers its tasks

__all__ = ["Task", "Vocabulary", "build_task", "data_digests", "task_params"]


def task_params(fields: dict) -> tuple[type[Task], TaskParams]:
    """The task class named by fields["name"] and its other fields validated by its own Params."""
    from zoo.specs.registries import registry

    params = dict(fields)
    cls = registry("task").get(params.pop("name"))
    return cls, cls.Params.model_validate(params)


def build_task(fields: dict, seed: int, state: dict | None = None) -> Task:
    """The task of `fields`; `state` (from a checkpoint) gives back vocabularies learned in an
    earlier run."""
    cls, params = task_params(fields)
    return cls(params, seed, state)


def data_digests(fields: dict) -> dict[str, str]:
    """{file: content digest} of every file the task of `fields` reads: what makes two runs of one
    experiment runs on the same data."""
    from zoo.tasks.corpus import cached_digest

    cls, params = task_params(fields)
    return {str(path): cached_digest(path) for path in cls.data_files(params)} | cls.content_digests(params)
