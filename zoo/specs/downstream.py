"""train.downstream: tasks of EleutherAI's lm-evaluation-harness that a run scores its last model
on at its end (zoo.trainer.harness), whose scores are metrics of the run like any other."""

from __future__ import annotations

from pydantic import Field, NonNegativeInt, PositiveInt

from zoo.specs.strict import Strict


class DownstreamSpec(Strict):
    tasks: list[str] = Field(min_length=1, description="the harness's task names (hellaswag, arc_easy), or those of "
                                                       "YAML files in include_path")
    include_path: str | None = Field(None, description="a folder of the harness's task YAML files of your own (local "
                                                       "data files: nothing is downloaded)")
    limit: PositiveInt | None = Field(None, description="score only the first N examples of each task (null: all)")
    num_fewshot: NonNegativeInt | None = Field(None, description="examples shown before each question (null: the "
                                                                "task's own default)")
    batch_size: PositiveInt = Field(16, description="requests scored at once")
