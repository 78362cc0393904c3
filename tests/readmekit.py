"""A page (the README, a page of docs/) as a test reads it: its fenced blocks, the shown outputs of
its Python, and its commands. `python readmekit.py PAGE` runs every Python block of the page in
order in one namespace (as a reader would, top to bottom) and prints a JSON list of what differs
from what the page shows."""

from __future__ import annotations

import ast
import io
import json
import re
import shlex
import sys
import tokenize
from pathlib import Path

FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)

TINY = {'spec = zoo.spec("pre-ln", vocab_size=8000, d_model=256)':
        'spec = zoo.spec("pre-ln", vocab_size=8000, d_model=32, d_ff=64, n_encoder_layers=1, n_decoder_layers=1)',
        'zoo.spec("t5", vocab_size=100, norm_type="layernorm")':
        'zoo.spec("t5", vocab_size=100, norm_type="layernorm", d_ff=64, n_encoder_layers=1, n_decoder_layers=1)',
        '"steps": 300, "batch_size": 64': '"steps": 3, "batch_size": 8',
        '"steps": 3000, "batch_size": 32': '"steps": 2, "batch_size": 8',
        '"eval_size": 200, "out_dir": "runs"': '"eval_size": 16, "out_dir": "runs"',
        '"translate German to English: "}': '"translate German to English: ", "test_size": 16}'}
"""Text of the pages' Python that runs at a tiny size in the test (each must occur exactly once over
all pages): the training examples train for minutes as written, and two models are built at full
size to be inspected or refused; their shown metrics and errors do not depend on the size."""
PRELUDE = "import torch\nimport zoo"


def blocks(text: str, language: str) -> list[str]:
    return [body for lang, body in FENCE.findall(text) if lang == language]


def comments(code: str) -> dict[int, str]:
    """The comment of each line (1-based), without its `#`."""
    found = {}
    for token in tokenize.generate_tokens(io.StringIO(code).readline):
        if token.type == tokenize.COMMENT:
            found[token.start[0]] = token.string[1:].strip()
    return found


def shown(comment: str | None):
    """The literal a comment shows (`# 500000.0`, `# ['gelu', 'relu']`), or None for prose."""
    if not comment:
        return None
    try:
        return (ast.literal_eval(comment),)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


RAISES = re.compile(r"^(?:[\w.]+\.)?(\w+(?:Error|Exception|Interrupted|Diverged|RunConflict)): (.*)$")
"""A comment on the line after a statement that shows what it raises: `# zoo.ConfigError: message`
(a message ending in `...` is a prefix)."""


def raised(code: str, statement: ast.stmt, namespace: dict, number: int, expected: re.Match) -> dict | None:
    """Run a statement that the README shows failing: a problem unless it raises the shown error."""
    source = ast.get_source_segment(code, statement)
    kind, message = expected.groups()
    try:
        exec(compile(ast.Module([statement], []), f"README python block {number}", "exec"), namespace)
    except Exception as err:
        text = str(err)
        same = text.startswith(message[:-3]) if message.endswith("...") else text == message
        if type(err).__name__ == kind and same:
            return None
        return {"block": number, "code": source, "shown": f"{kind}: {message}", "gives": f"{type(err).__name__}: {text}"}
    return {"block": number, "code": source, "shown": f"{kind}: {message}", "gives": "no error"}


def run_python(code_blocks: list[str], first: int = 1) -> list[dict]:
    """Run the blocks (numbered from `first`); every expression statement whose comment is a literal
    is compared with it, and one followed by a comment line showing an error must raise it."""
    namespace: dict = {"__name__": "__readme__"}
    exec(PRELUDE, namespace)  # what every page's reader has imported
    problems = []
    for number, code in enumerate(code_blocks, first):
        notes, lines = comments(code), code.splitlines()
        for statement in ast.parse(code).body:
            source = ast.get_source_segment(code, statement)
            after = lines[statement.end_lineno].strip() if statement.end_lineno < len(lines) else ""
            failing = RAISES.match(after[1:].strip()) if after.startswith("#") else None
            if failing:
                problem = raised(code, statement, namespace, number, failing)
                problems += [problem] if problem else []
                continue
            expected = shown(notes.get(statement.end_lineno)) if isinstance(statement, ast.Expr) else None
            try:
                if expected is None:
                    exec(compile(ast.Module([statement], []), f"README python block {number}", "exec"), namespace)
                    continue
                value = eval(compile(ast.Expression(statement.value), f"README python block {number}", "eval"), namespace)
            except Exception as err:
                problems.append({"block": number, "code": source, "error": f"{type(err).__name__}: {err}"})
                break
            if value != expected[0]:
                problems.append({"block": number, "code": source, "shown": repr(expected[0]), "gives": repr(value)})
    return problems


def tiny(code_blocks: list[str]) -> list[str]:
    """The blocks with each TINY text the page holds made tiny (tests/test_readme.py holds each to
    occurring once over all pages)."""
    out = []
    for code in code_blocks:
        for old, new in TINY.items():
            code = code.replace(old, new)
        out.append(code)
    return out


def commands(text: str, program: str) -> list[list[str]]:
    """Every command line of the README's bash blocks that starts with `program`, split like a shell
    would (continuations joined, comments dropped, `&&` chains split)."""
    out = []
    for body in blocks(text, "bash"):
        for line in body.replace("\\\n", " ").splitlines():
            for part in line.split("&&"):
                words = shlex.split(part, comments=True)
                if words and words[0] == program:
                    out.append(words)
    return out


if __name__ == "__main__":
    page = Path(sys.argv[1]).read_text(encoding="utf-8")
    print(json.dumps(run_python(tiny(blocks(page, "python")))))
