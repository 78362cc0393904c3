"""The zoo's models as a model of EleutherAI's lm-evaluation-harness (`lm-eval`), registered as
`zoo`: loglikelihood of a continuation, rolling loglikelihood of a text, and greedy generation
until a stop string, each through the model's own framing (zoo.model.kinds), so a decoder-only
model and an encoder-decoder answer alike.

A request (context, continuation) becomes the pair a task would make: the source is the context
(a language model's: its bos, then the context's ids; a translation model's: the context encoded
as its sources are), the target the continuation after the start token. The model's framing then
scores exactly the continuation's ids. Text is cut into ids as the harness's own models do: the
context's trailing spaces move to the continuation, the whole is encoded, and the context's ids
are its first ones.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import torch

from zoo.model.kinds import ZooModel
from zoo.tasks.base import pad_rows
from zoo.tasks.text import SplitCodec


def text_ids(codec, text: str) -> list[int]:
    """The ids of a text without any special token."""
    if isinstance(codec, SplitCodec):
        return codec.encode(text)[1:-1]
    return codec.tokenizer.encode(text, add_special_tokens=False).ids


class Scorer:
    """Loglikelihoods and generations of one model, in batches of `batch_size` requests, the
    longest first (the harness restores its order)."""

    def __init__(self, model: ZooModel, codec, source: Callable[[str], list[int]] | None, batch_size: int = 16):
        """`source`: how a translation model encodes a context as a source; None for a language
        model, whose source is its bos and the context's ids."""
        self.model, self.codec, self.source, self.batch_size = model, codec, source, batch_size
        spec = model.spec
        self.pad, self.bos, self.eos, self.max_len = spec.pad_id, spec.bos_id, spec.eos_id, spec.max_len
        self.device = next(model.parameters()).device

    def split(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        """(context ids, continuation ids), the context's trailing spaces moved to the continuation."""
        spaces = len(context) - len(context.rstrip())
        if spaces:
            context, continuation = context[:-spaces], context[-spaces:] + continuation
        whole, head = text_ids(self.codec, context + continuation), text_ids(self.codec, context)
        while whole[: len(head)] != head:  # a piece across the boundary: the context's ids stop before it
            head = head[:-1]
        return whole[: len(head)], whole[len(head) :]

    def request(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        """(source, target) whose framing scores the continuation given the context, cut from the
        left to what the model can place."""
        if self.source is not None:
            return self.source(context)[-self.max_len :], [self.bos, *text_ids(self.codec, continuation)][: self.max_len]
        head, tail = self.split(context, continuation)
        return self.document_pair([self.bos, *head], tail)

    def document_pair(self, context: list[int], continuation: list[int]) -> tuple[list[int], list[int]]:
        """A language model's (source, target): the context (its bos first), the continuation."""
        continuation = continuation[-self.max_len :]
        return context[-(self.max_len + 1 - len(continuation)) :], [self.bos, *continuation]

    @torch.no_grad()
    def score(self, pairs: Sequence[tuple[list[int], list[int]]]) -> list[tuple[float, bool]]:
        """(sum of the target's log-probabilities after its start, whether greedy decoding gives
        it) per (source, target)."""
        kind = type(self.model)
        order = sorted(range(len(pairs)), key=lambda i: -(len(pairs[i][0]) + len(pairs[i][1])))
        out: list[tuple[float, bool]] = [(0.0, True)] * len(pairs)
        for start in range(0, len(order), self.batch_size):
            chosen = order[start : start + self.batch_size]
            src = pad_rows([pairs[i][0] for i in chosen], self.pad).to(self.device)
            tgt = pad_rows([pairs[i][1] for i in chosen], self.pad).to(self.device)
            inputs, labels = kind.frame(self.model.spec, src, tgt)
            logits = self.model(*inputs).float().log_softmax(-1)
            scored = labels != self.pad
            picked = logits.gather(-1, labels[..., None])[..., 0]
            greedy = logits.argmax(-1) == labels
            for row, i in enumerate(chosen):
                where = scored[row]
                out[i] = (float(picked[row][where].sum()), bool(greedy[row][where].all()))
        return out

    def rolling(self, text: str) -> float:
        """The log-likelihood of a whole text, in windows of the model's length, each id predicted
        once with as much context as fits (the harness's rolling windows); a translation model
        scores each window as a target of an empty source."""
        from lm_eval.utils import get_rolling_token_windows, make_disjoint_window

        ids = text_ids(self.codec, text)
        windows = [make_disjoint_window(w) for w in get_rolling_token_windows(ids, self.bos, self.max_len, 1)]
        if self.source is None:
            pairs = [self.document_pair(context, predicted) for context, predicted in windows]
        else:
            pairs = [(self.source(""), [self.bos, *predicted]) for _, predicted in windows]
        return sum(logprob for logprob, _ in self.score(pairs))

    @torch.no_grad()
    def generate(self, context: str, until: Sequence[str], max_new_tokens: int) -> str:
        """Greedy decoding from the context, cut at the first stop string."""
        kind = type(self.model)
        if self.source is None:
            source = [self.bos, *text_ids(self.codec, context)][-max(self.max_len - max_new_tokens, 1) :]
            room = self.max_len - len(source)
        else:
            source, room = self.source(context)[-self.max_len :], self.max_len - 1
        src = torch.tensor([source], device=self.device)
        decoded = self.model.generate(kind.prompts(self.model.spec, src), max_new_tokens=max(1, min(max_new_tokens, room)))
        text = self.codec.decode(kind.continuations(self.model.spec, src, decoded)[0])
        cuts = [text.find(stop) for stop in until if stop and stop in text]
        return text[: min(cuts)] if cuts else text


def harness_model_class():
    """The lm-eval model class `zoo`, registered on first use (lm-eval is imported only here)."""
    from lm_eval.api.model import LM
    from lm_eval.api.registry import MODEL_REGISTRY, register_model

    if "zoo" in MODEL_REGISTRY:
        return MODEL_REGISTRY.get("zoo")

    @register_model("zoo")
    class ZooHarnessModel(LM):
        """`--model zoo --model_args checkpoint=RUN/checkpoint.pt[,device=cpu,batch_size=16]`."""

        def __init__(self, checkpoint: str | None = None, device: str = "cpu", batch_size: int | str = 16,
                     scorer: Scorer | None = None, **_: Any):
            super().__init__()
            if scorer is None and str(device).startswith("cuda") and not torch.cuda.is_available():
                import warnings

                warnings.warn(f"device {device} (the harness's default): no CUDA here; the zoo model runs on the cpu",
                              stacklevel=2)
                device = "cpu"
            self.scorer = scorer or scorer_of_checkpoint(checkpoint, device, int(batch_size))

        def loglikelihood(self, requests) -> list[tuple[float, bool]]:
            return self.scorer.score([self.scorer.request(*request.args) for request in requests])

        def loglikelihood_rolling(self, requests) -> list[float]:
            return [self.scorer.rolling(request.args[0]) for request in requests]

        def generate_until(self, requests) -> list[str]:
            out = []
            for request in requests:
                context, settings = request.args
                until = settings.get("until") or []
                until = [until] if isinstance(until, str) else list(until)
                out.append(self.scorer.generate(context, until, int(settings.get("max_gen_toks", 256))))
            return out

    return ZooHarnessModel


def scorer_of_checkpoint(path: str, device: str = "cpu", batch_size: int = 16, sets: tuple[str, ...] = ()) -> Scorer:
    """The scorer of a trained checkpoint: its model, and its task's tokenizer (the target side's)."""
    from zoo.trainer.evaluate import saved_run

    _, model, task = saved_run(path, sets, device)
    return scorer_of_task(model, task, batch_size)


def scorer_of_task(model: ZooModel, task, batch_size: int = 16) -> Scorer:
    """A language model's task scores text as documents; any other encodes a context as a source."""
    if task.next_token:
        return Scorer(model, task.tgt_vocab, None, batch_size)
    encode = getattr(task, "encode_source", None) or task.src_vocab.encode
    return Scorer(model, task.tgt_vocab, encode, batch_size)


def run_harness(scorer: Scorer, tasks: Sequence[str], include_path: str | None = None, limit: int | None = None,
                num_fewshot: int | None = None, seed: int = 0) -> dict[str, Any]:
    """lm-eval's simple_evaluate of the scorer's model on `tasks`: its results by task."""
    from lm_eval import simple_evaluate

    manager = task_manager(tasks, include_path)
    model = harness_model_class()(scorer=scorer)
    results = simple_evaluate(model=model, tasks=list(tasks), task_manager=manager, limit=limit, num_fewshot=num_fewshot,
                              log_samples=False, bootstrap_iters=0, random_seed=seed, numpy_random_seed=seed,
                              torch_random_seed=seed, fewshot_random_seed=seed, verbosity="ERROR")
    return results["results"]


def task_manager(tasks: Sequence[str], include_path: str | None = None):
    """The harness's task index holding every task named: those of `include_path` alone where they
    serve, else the harness's own too (12 s to index here). A name it lacks is refused."""
    from zoo.errors import ConfigError

    manager = indexed(include_path, defaults=False) if include_path else None
    if manager is None or not set(tasks) <= set(manager.all_tasks):
        manager = indexed(include_path, defaults=True)
    known = set(manager.all_tasks)
    missing = [name for name in tasks if name not in known]
    if missing:
        hint = "" if include_path else "; a task of your own: --include-path DIR of its YAML"
        raise ConfigError(f"downstream task {', '.join(map(repr, missing))}: not a task of lm-eval "
                          f"{harness_version()}{hint} (lm-eval --tasks list names them)")
    return manager


@lru_cache(maxsize=8)
def indexed(include_path: str | None, defaults: bool):
    """The harness's TaskManager, made once per process for each folder of tasks."""
    from lm_eval.tasks import TaskManager

    return TaskManager(include_path=include_path, include_defaults=defaults, verbosity="ERROR")


def harness_version() -> str:
    from importlib.metadata import version

    return version("lm-eval")


def downstream_metrics(results: dict[str, Any]) -> dict[str, float]:
    """`downstream/TASK/METRIC` (`downstream/TASK/FILTER/METRIC` for a filter other than none) of
    every number the harness reported, its standard errors aside."""
    out = {}
    for task, values in results.items():
        for key, value in values.items():
            if "," not in key or "_stderr" in key or not isinstance(value, int | float) or isinstance(value, bool):
                continue
            metric, where = key.split(",", 1)
            out["/".join(["downstream", task, *([] if where == "none" else [where]), metric])] = float(value)
    return out


def score_downstream(model: ZooModel, task, downstream, seed: int) -> tuple[dict[str, float], dict[str, Any]]:
    """train.downstream on a run's model: (its registered metrics, the record's `downstream`: the
    harness's results by task and its version). A number the harness reports under a name the zoo
    has not registered (so no direction to rank it by) stays in the record alone, and is named."""
    import warnings

    from zoo.specs.registries import registry

    was_training = model.training
    model.eval()
    try:
        results = run_harness(scorer_of_task(model, task, downstream.batch_size), downstream.tasks,
                              downstream.include_path, downstream.limit, downstream.num_fewshot, seed)
    finally:
        model.train(was_training)
    metrics = downstream_metrics(results)
    unknown = sorted(name for name in metrics if name.rsplit("/", 1)[1] not in registry("metric"))
    if unknown:
        warnings.warn(f"train.downstream: {', '.join(unknown)}: no registered metric of that name, so no direction to "
                      "rank by; kept in result.json's downstream, not among the run's metrics", stacklevel=2)
    kept = {name: value for name, value in metrics.items() if name not in unknown}
    return kept, {"harness": harness_version(), "results": results}


if __name__ == "__main__":  # the harness's own CLI, the zoo's models registered: --model zoo --model_args checkpoint=...
    harness_model_class()
    from lm_eval.__main__ import cli_evaluate

    cli_evaluate()
