"""'Level' only through two one-sided tests against a margin the sweep declares; otherwise 'not
separated (inconclusive)' with the narrowest margin the pairs could have excluded; a margin that is
not a positive number is one `zoo:` line before anything runs."""

import pytest
import sweepkit
import yaml
from test_bad_input import cli_error

from zoo.compare import compare
from zoo.compare.exact import equivalence_p, smallest_margin
from zoo.compare.stats import holm

NOISE = [0.004, -0.003, 0.002, -0.001, 0.003, -0.004, 0.001, -0.002]
"""gelu − relu in each of 8 seeds: no effect, little noise."""


def write(tmp_path, margins=None):
    def value(a, seed):
        return 0.5 + 0.2 * (a["model.norm"] == "pre") + NOISE[seed] * (a["model.ffn"] == "gelu")

    sweep = sweepkit.write_sweep(tmp_path, "eq", {"model.norm": ["post", "pre"], "model.ffn": ["relu", "gelu"]},
                                 list(range(8)), value)
    if margins:
        file = sweep.directory() / "sweep.yaml"
        file.write_text(yaml.safe_dump({**yaml.safe_load(file.read_text()), "margins": margins}, sort_keys=False))
    return compare(sweep.directory(), wandb_mode="disabled", echo=lambda _: None)


def verdict_of(report, label: str) -> str:
    line = next(line for line in report.effects_text.splitlines() if line.startswith(label))
    return line.rstrip().split("  ")[-1].strip()


def test_without_a_margin_nothing_is_level_and_the_narrowest_margin_is_said(tmp_path):
    report = write(tmp_path)
    differences = NOISE * 2  # the 16 pairs: each seed's gelu − relu, at post and at pre
    could = smallest_margin(differences)
    assert verdict_of(report, "ffn") == f"not separated (inconclusive: its pairs exclude no margin narrower than ±{could:.3g})"
    assert verdict_of(report, "norm") == "separated"
    assert "| not separated (inconclusive: its pairs exclude no margin" in report.markdown.read_text()


def test_a_declared_margin_the_pairs_exclude_makes_it_level(tmp_path):
    report = write(tmp_path, {"eval/exact_match": 0.01})
    # the family: norm (+0.2 everywhere: TOST p 1), norm x ffn (0 in each of 8 seeds: 1 / 2^8) and ffn's 16 pairs
    family = holm([1.0, 1 / 2**8, equivalence_p(NOISE * 2, 0.01)])
    by_hand = family[2]
    assert by_hand == 3 * equivalence_p(NOISE * 2, 0.01) < 0.05, "the smallest of three: times 3"
    assert verdict_of(report, "ffn") == f"level within ±0.01 (TOST Holm p {by_hand:.2g})"


def test_a_margin_narrower_than_the_noise_stays_inconclusive(tmp_path):
    report = write(tmp_path, {"eval/exact_match": 0.001})
    assert verdict_of(report, "ffn").startswith("not separated (inconclusive: not level within ±0.001; its pairs exclude")


@pytest.mark.parametrize("margin", [0, -0.1, "wide", ".inf"])
def test_a_margin_that_is_not_a_positive_number_is_refused_before_anything_runs(tmp_path, capsys, margin):
    sweep = {"name": "bad", "base": {"task": {"name": "copy"}}, "grid": {"model.norm": ["post", "pre"]},
             "margins": {"eval/loss": margin}, "out_dir": str(tmp_path)}
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(sweep).replace("'.inf'", ".inf"))
    said = cli_error(["sweep", str(tmp_path / "sweep.yaml"), "--dry-run"], capsys)
    assert "margins.eval/loss" in said, said
    assert not (tmp_path / "bad").exists()
