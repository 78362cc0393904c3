"""The README is executed, so it cannot go stale: its Python runs top to bottom (training at a tiny
size) and every shown output is what the code gives; every `zoo` command parses and the files it
names load; the test command is the one CI runs."""

import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from pretrainedkit import save_pretrained_folder
from readmekit import PARTS, blocks, commands, run_python

import zoo
from trainkit import MULTI30K
from zoo.cli import build_parser, main
from zoo.specs.experiment import load_experiment
from zoo.sweep import expand, load_sweep, shard

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
RESULTS_PAGE = (ROOT / "experiments" / "results" / "README.md").read_text(encoding="utf-8")
"""The full ablation results, which the README summarizes in one line each; its commands are held
to the code as the README's are."""
PAGES = README + "\n" + RESULTS_PAGE


def run_readme(text: str, tmp_path, part: str) -> list[dict]:
    """What differs when the README's Python runs in a fresh process, in a folder that has the
    project's experiments/ (so relative paths resolve as in a checkout), the Multi30k sample as
    data/multi30k and a tiny T5 folder as t5-small."""
    (tmp_path / "README.md").write_text(text, encoding="utf-8")
    (tmp_path / "experiments").symlink_to(ROOT / "experiments")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "multi30k").symlink_to(MULTI30K)
    save_pretrained_folder(tmp_path / "t5-small", "t5")  # what the fine-tuning example says the reader saved
    done = subprocess.run([sys.executable, str(Path(__file__).with_name("readmekit.py")), str(tmp_path / "README.md"), part],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "WANDB_MODE": "disabled"})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("part", PARTS)
def test_the_python_of_the_readme_runs_and_shows_what_it_gives(tmp_path, part):
    assert run_readme(README, tmp_path, part) == []


def test_the_parts_of_the_readme_run_every_python_block_once():
    count, bounds = len(blocks(README, "python")), sorted(PARTS.values())
    assert bounds[0][0] == 1 and bounds[-1][1] is None
    assert all(last + 1 == next_first for (_, last), (next_first, _) in itertools.pairwise(bounds)) and bounds[-1][0] <= count


def test_a_changed_shown_output_fails_the_readme_test():
    line = next(line for line in README.splitlines() if line.startswith("spec.position.base"))
    changed = README.replace(line, line.replace("500000.0", "400000.0"), 1)
    block = next(code for code in blocks(changed, "python") if line.split("#")[0] in code)
    assert run_python(["import zoo", block]) == [
        {"block": 2, "code": "spec.position.base", "shown": "400000.0", "gives": "500000.0"}]
    assert run_python(["import zoo", next(code for code in blocks(README, "python") if line in code)]) == []


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


@pytest.mark.parametrize("words", commands(README, "wandb"), ids=lambda w: " ".join(w))
def test_the_wandb_commands_exist(words):
    done = subprocess.run([str(Path(sys.executable).with_name("wandb")), words[1], "--help"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("axis", zoo.AXES)
def test_the_parts_table_names_every_registered_part(axis):
    """A part registered without a line in the README's table of axes fails here."""
    row = next(line for line in README.splitlines() if line.startswith(f"| `{axis}`"))
    missing = [name for name in zoo.registry(axis).names() if f"`{name}`" not in row]
    assert not missing, f"README.md's row for {axis} lacks {missing}"


def test_every_spec_field_is_in_the_readme():
    missing = [name for name in zoo.ModelSpec.model_fields if f"`{name}`" not in README and name not in zoo.AXES]
    assert not missing, f"README.md never names the spec fields {missing}"


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


def test_the_first_screen_is_a_quick_start_then_contents_whose_links_resolve():
    lines = README.splitlines()
    assert lines.index("## Quick start") < 10 and lines.index("## Contents") < 80
    anchors = {anchor(line.lstrip("#")) for line in lines if line.startswith("#")}
    linked = re.findall(r"\]\(#([\w-]+)\)", README)
    assert len(linked) >= 15 and set(linked) <= anchors, sorted(set(linked) - anchors)
    contents = README.split("## Contents", 1)[1].split("\n## ", 1)[0]
    sections = {anchor(line[3:]) for line in lines if line.startswith("## ")} - {"quick-start", "contents"}
    assert sections <= set(re.findall(r"\]\(#([\w-]+)\)", contents)), "every section is in the contents"


def test_a_shortened_experiment_file_shown_in_the_readme_agrees_with_the_file():
    """A YAML block that starts `# experiments/NAME.yaml, shortened` shows only what the file holds."""
    import yaml

    shown = [block for block in blocks(README, "yaml") if re.match(r"# (experiments/[\w./-]+\.yaml), shortened", block)]
    assert shown
    for block in shown:
        path = re.match(r"# (experiments/[\w./-]+\.yaml)", block).group(1)
        actual, excerpt = yaml.safe_load((ROOT / path).read_text()), yaml.safe_load(block)
        for key, value in excerpt.items():
            if isinstance(value, dict):
                assert all(actual[key][k] == v for k, v in value.items()), (path, key)
            else:
                assert actual[key] == value, (path, key)


@pytest.mark.parametrize("page", ["README.md", "experiments/results/README.md", "tests/README.md"])
def test_every_relative_link_of_a_page_resolves(page):
    """Files the README and the results page link to exist, and so do the README's anchors they name."""
    text = (ROOT / page).read_text(encoding="utf-8")
    readme_anchors = {anchor(line.lstrip("#")) for line in README.splitlines() if line.startswith("#")}
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    checked = 0
    for link in links:
        if link.startswith(("http://", "https://", "#")) or link.endswith(".png"):
            continue
        target, _, fragment = link.partition("#")
        assert (ROOT / page).parent.joinpath(target).resolve().exists(), f"{page}: {link}"
        if fragment and target.endswith("README.md") and "results" not in target:
            assert fragment in readme_anchors, f"{page}: {link}"
        checked += 1
    assert checked, "the page links to files"
