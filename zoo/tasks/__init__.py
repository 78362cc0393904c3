"""Training tasks, registered by name on the `task` registry."""

from zoo.tasks import parallel, synthetic, toy_translation  # noqa: F401  (registers the tasks)
from zoo.tasks.base import Task, TaskParams, Vocabulary

__all__ = ["Task", "Vocabulary", "build_task", "task_params"]


def task_params(fields: dict) -> tuple[type[Task], TaskParams]:
    """The task class named by fields["name"] and its other fields validated by its own Params."""
    from zoo.registries import registry

    params = dict(fields)
    cls = registry("task").get(params.pop("name"))
    return cls, cls.Params.model_validate(params)


def build_task(fields: dict, seed: int, state: dict | None = None) -> Task:
    """The task of `fields`; `state` (from a checkpoint) gives back vocabularies learned in an
    earlier run."""
    cls, params = task_params(fields)
    return cls(params, seed, state)
