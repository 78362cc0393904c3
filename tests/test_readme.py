"""The README and the pages of docs/ are executed, so they cannot go stale: each page's Python runs
top to bottom (training at a tiny size) and every shown output is what the code gives; every `zoo`
command parses and the files it names load; every link resolves; the test command is the one CI
runs."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from pretrainedkit import save_pretrained_folder
from readmekit import TINY, blocks, commands, run_python

import zoo
from trainkit import MULTI30K
from zoo.cli import build_parser, main
from zoo.specs.experiment import load_experiment
from zoo.sweep import expand, load_sweep, shard

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = {f"docs/{page.name}": page.read_text(encoding="utf-8") for page in sorted((ROOT / "docs").glob("*.md"))}
"""The reference, a page a subject, which the README links to."""
PAGE_TEXTS = {"README.md": README, **DOCS}
PARTS_PAGE = DOCS["docs/parts.md"]
RESULTS_PAGE = (ROOT / "experiments" / "results" / "README.md").read_text(encoding="utf-8")
"""The full ablation results, which docs/results.md summarizes in one line each; its commands are
held to the code as the README's are."""
PAGES = "\n".join([*PAGE_TEXTS.values(), RESULTS_PAGE])
RUN = [page for page, text in PAGE_TEXTS.items() if blocks(text, "python")]


def run_page(text: str, tmp_path) -> list[dict]:
    """What differs when a page's Python runs in a fresh process, in a folder that has the
    project's experiments/ (so relative paths resolve as in a checkout), the Multi30k sample as
    data/multi30k and a tiny T5 folder as t5-small."""
    (tmp_path / "page.md").write_text(text, encoding="utf-8")
    (tmp_path / "experiments").symlink_to(ROOT / "experiments")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "multi30k").symlink_to(MULTI30K)
    save_pretrained_folder(tmp_path / "t5-small", "t5")  # what the fine-tuning example says the reader saved
    done = subprocess.run([sys.executable, str(Path(__file__).with_name("readmekit.py")), str(tmp_path / "page.md")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "WANDB_MODE": "disabled"})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("page", RUN)
def test_the_python_of_each_page_runs_and_shows_what_it_gives(tmp_path, page):
    assert run_page(PAGE_TEXTS[page], tmp_path) == []


def test_each_tiny_size_names_text_of_one_page_once():
    """A training example made tiny for the test (readmekit.TINY) is on exactly one page, once."""
    python = ["\n\n".join(blocks(text, "python")) for text in PAGE_TEXTS.values()]
    assert {old: sum(text.count(old) for text in python) for old in TINY} == dict.fromkeys(TINY, 1)


def test_a_changed_shown_output_fails_the_readme_test():
    line = next(line for line in PARTS_PAGE.splitlines() if line.startswith("spec.position.base"))
    changed = PARTS_PAGE.replace(line, line.replace("500000.0", "400000.0"), 1)
    block = next(code for code in blocks(changed, "python") if line.split("#")[0] in code)
    assert run_python(["import zoo", block]) == [
        {"block": 2, "code": "spec.position.base", "shown": "400000.0", "gives": "500000.0"}]
    assert run_python(["import zoo", next(code for code in blocks(PARTS_PAGE, "python") if line in code)]) == []


def test_a_failing_snippet_and_a_prose_comment_are_told_apart():
    problems = run_python(["x = 2\nx + 1  # 3\nx * 2  # four, in prose\nx - 1  # 2", "y = undefined_name"])
    assert problems == [{"block": 1, "code": "x - 1", "shown": "2", "gives": "1"},
                        {"block": 2, "code": "y = undefined_name", "error": "NameError: name 'undefined_name' is not defined"}]


ZOO_COMMANDS = commands(PAGES, "zoo")


def test_the_readme_shows_the_main_commands():
    verbs = {words[1] for words in ZOO_COMMANDS}
    assert {"train", "sweep", "compare", "eval"} <= verbs and len(ZOO_COMMANDS) > 15


@pytest.mark.parametrize("words", ZOO_COMMANDS, ids=[" ".join(w)[:80] for w in ZOO_COMMANDS])
def test_every_zoo_command_of_the_readme_parses_and_its_files_load(words, capsys):
    words = [word.replace("$SLURM_ARRAY_TASK_ID", "0") for word in words]  # the sbatch recipe's array index
    args = build_parser().parse_args(words[1:])
    if args.command == "train":
        load_experiment(args.file, args.set)
    elif args.command == "sweep":
        sweep, _ = load_sweep(args.file, args.set)
        index, count = map(int, args.shard.split("/"))
        assert shard(expand(sweep), index, count)
    elif args.command in ("show", "list"):
        main(words[1:])
        assert capsys.readouterr().out


def test_every_experiment_file_the_readme_runs_inline_loads():
    """Inline commands in the prose (`zoo sweep experiments/ffn.yaml --workers 2`) name real files."""
    named = set(re.findall(r"`zoo (sweep|train) (experiments/[\w./-]+\.yaml)", PAGES))
    assert len(named) >= 5
    for verb, file in named:
        (load_sweep if verb == "sweep" else load_experiment)(ROOT / file)


def test_benchmark_commands_name_real_scripts_and_flags():
    for script, flags in re.findall(r"`python (experiments/benchmarks/\w+\.py)((?: --[\w-]+(?: [^`\s-][^`\s]*)?)*)`", PAGES):
        source = (ROOT / script).read_text()
        for flag in re.findall(r"--[\w-]+", flags):
            assert f'"{flag}"' in source, f"{script} has no {flag}"


def test_ci_runs_exactly_the_readme_test_command():
    """The section for a fresh machine holds the two commands: the main job, then the tests (CI's)."""
    fresh = README.split("## Fresh machine: the two commands", 1)[1]
    (setup, tests) = blocks(fresh, "bash")[:2]
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert ci == tests.strip() and tests.strip().endswith("ruff check . && python -m pytest -q")
    assert setup.strip().endswith("zoo sweep experiments/seed_axes.yaml --workers 2 && zoo compare sweeps/seed-axes")


@pytest.mark.parametrize("words", commands(PAGES, "wandb"), ids=lambda w: " ".join(w))
def test_the_wandb_commands_exist(words):
    done = subprocess.run([str(Path(sys.executable).with_name("wandb")), words[1], "--help"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("axis", zoo.AXES)
def test_the_parts_table_names_every_registered_part(axis):
    """A part registered without a line in the table of axes (docs/parts.md) fails here."""
    row = next(line for line in PARTS_PAGE.splitlines() if line.startswith(f"| `{axis}`"))
    missing = [name for name in zoo.registry(axis).names() if f"`{name}`" not in row]
    assert not missing, f"docs/parts.md's row for {axis} lacks {missing}"


def test_every_spec_field_is_in_the_parts_page():
    missing = [name for name in zoo.ModelSpec.model_fields if f"`{name}`" not in PARTS_PAGE and name not in zoo.AXES]
    assert not missing, f"docs/parts.md never names the spec fields {missing}"


def test_an_error_the_readme_shows_must_be_the_one_raised():
    code = ('import zoo\nzoo.spec("pre-ln", vocab_size=8, d_modle=2)\n'
            "# zoo.ConfigError: unknown field 'd_modle' (did you mean 'd_model'?); fields: activation_dropout, ...\n")
    assert run_python([code]) == []
    wrong = code.replace("'d_model'?", "'d_mode'?")
    (problem,) = run_python([wrong])
    assert problem["shown"].startswith("ConfigError: unknown field 'd_modle' (did you mean 'd_mode'?)")
    assert problem["gives"].startswith("ConfigError: unknown field 'd_modle' (did you mean 'd_model'?)")
    (problem,) = run_python([code.replace("d_modle=2", "d_model=16")])
    assert problem["gives"] == "no error"


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors_of(text: str) -> set[str]:
    """The anchors of a page's headings (outside code blocks)."""
    found, fence = set(), False
    for line in text.splitlines():
        fence = fence != line.startswith("```")
        if not fence and line.startswith("#"):
            found.add(anchor(line.lstrip("#")))
    return found


def test_the_first_screen_is_a_quick_start_then_a_short_guide_to_the_docs():
    lines = README.splitlines()
    assert lines.index("## Quick start") < 10 and lines.index("## Documentation") < 80
    assert len(lines) <= 400, f"the README is a quick start ({len(lines)} lines); its reference goes to docs/"
    guide = README.split("## Documentation", 1)[1].split("\n## ", 1)[0]
    assert set(re.findall(r"\]\((docs/[\w-]+\.md)", guide)) == set(DOCS), "every page of docs/ is in the guide"


def test_a_shortened_experiment_file_shown_in_the_readme_agrees_with_the_file():
    """A YAML block that starts `# experiments/NAME.yaml, shortened` shows only what the file holds."""
    import yaml

    shown = [block for block in blocks(PAGES, "yaml") if re.match(r"# (experiments/[\w./-]+\.yaml), shortened", block)]
    assert shown
    for block in shown:
        path = re.match(r"# (experiments/[\w./-]+\.yaml)", block).group(1)
        actual, excerpt = yaml.safe_load((ROOT / path).read_text()), yaml.safe_load(block)
        for key, value in excerpt.items():
            if isinstance(value, dict):
                assert all(actual[key][k] == v for k, v in value.items()), (path, key)
            else:
                assert actual[key] == value, (path, key)


@pytest.mark.parametrize("page", [*PAGE_TEXTS, "experiments/results/README.md", "tests/README.md"])
def test_every_relative_link_of_a_page_resolves(page):
    """Files a page links to exist, and so do the headings its anchors name, on the page or on the
    Markdown page linked (a link's text may run over lines)."""
    text = (ROOT / page).read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    checked = 0
    for link in links:
        if link.startswith(("http://", "https://")) or link.endswith(".png"):
            continue
        target, _, fragment = link.partition("#")
        path = (ROOT / page).parent.joinpath(target).resolve() if target else ROOT / page
        assert path.exists(), f"{page}: {link}"
        if fragment and path.suffix == ".md":
            assert fragment in anchors_of(path.read_text(encoding="utf-8")), f"{page}: {link}"
        checked += 1
    assert checked or page.startswith("docs/"), "the page links to files (a page of docs/ may link to none)"


@pytest.mark.parametrize("words", commands(PAGES, "torchrun"), ids=lambda w: " ".join(w)[:80])
def test_every_torchrun_command_starts_a_zoo_command_that_parses(words):
    """torchrun's own flags, then `-m zoo.cli` and a `zoo` command whose experiment loads."""
    at = words.index("-m")
    assert words[at + 1] == "zoo.cli" and all(word.startswith("--nproc_per_node") for word in words[1:at])
    args = build_parser().parse_args(words[at + 2 :])
    assert args.command == "train"
    assert load_experiment(args.file, args.set).train.parallel == "fsdp"


@pytest.mark.slow
def test_the_token_store_commands_of_the_training_page_run(tmp_path):
    """The training page's block that prepares a store, verifies it and trains from it runs as
    written, in a folder that holds the Multi30k sample as data/multi30k."""
    import shlex

    (block,) = [body for body in blocks(DOCS["docs/training.md"], "bash") if "zoo data prepare" in body]
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "multi30k").symlink_to(MULTI30K)
    (tmp_path / "experiments").symlink_to(ROOT / "experiments")
    for line in block.strip().splitlines():
        words = shlex.split(line)
        done = subprocess.run([sys.executable, "-m", "zoo.cli", *words[1:]], cwd=tmp_path, capture_output=True, text=True,
                              timeout=300, env={**os.environ, "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"})
        assert done.returncode == 0, f"{line}: {done.stderr[-2000:]}"
    (result,) = tmp_path.glob("runs/*/result.json")
    assert json.loads(result.read_text())["metrics"]["test/bits_per_byte"] > 0
