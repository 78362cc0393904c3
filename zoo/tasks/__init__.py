"""Training tasks, registered by name on the `task` registry."""

from zoo.tasks import parallel, synthetic, toy_translation  # noqa: F401  (registers the tasks)
from zoo.tasks.base import Task, Vocabulary

__all__ = ["Task", "Vocabulary", "build_task"]


def build_task(fields: dict, seed: int, state: dict | None = None) -> Task:
    """The task named by fields["name"], its other fields validated by the task's own Params;
    `state` (from a checkpoint) gives back vocabularies learned in an earlier run."""
    from zoo.registries import registry

    params = dict(fields)
    cls = registry("task").get(params.pop("name"))
    return cls(cls.Params.model_validate(params), seed, state)
