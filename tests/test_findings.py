"""One verdict per effect, the finding first: report.md and the console open with each primary
difference's verdict, test, pairs and detectable effect, then the caveats; the W&B effects table
carries the verdict, the TOST Holm p and the power; the effect plots shade the declared margin."""

import json
from pathlib import Path

import sweepkit

from trainkit import offline_run
from zoo.compare import compare


def value(a, seed):
    """pre adds 0.2 in every pair; gelu moves the metric by 0.01 (seed − 2): level within ±0.03."""
    return 0.4 + 0.1 * seed / 3 + (0.2 if a["model.norm"] == "pre" else 0.0) + (0.01 * (seed - 2) if a["model.ffn"] == "gelu"
                                                                               else 0.0)


def test_the_findings_come_first_and_the_wandb_table_carries_verdict_tost_and_power(tmp_path):
    sweep = sweepkit.write_sweep(tmp_path, "found", {"model.norm": ["post", "pre"], "model.ffn": ["relu", "gelu"]},
                                 [0, 1, 2, 3, 4], value, margins={"eval/exact_match": 0.03})
    said = []
    report = compare(sweep.directory(), echo=said.append)
    text = report.markdown.read_text()
    assert text.index("## Findings") < text.index("## Variants") < text.index("## Effect of each axis")
    findings = text[text.index("## Findings"):text.index("## Variants")]
    assert "- **norm: pre − post: 0.2 [0.2, 0.2], separated** (exact sign-flip test, p 0.002 over 10 pairs, Holm p " \
           "0.0039; detectable at 80% power: ±" in findings
    assert "- ffn: gelu − relu: 0 [" in findings and "level within ±0.03 (TOST Holm p 0.002)" in findings
    assert "norm × ffn" not in findings, "an interaction that does not separate is no finding"
    assert report.table_text.startswith("findings on eval/exact_match:\n  norm: pre − post: 0.2 [0.2, 0.2], separated")
    info, _ = offline_run(sweep.directory())
    table = info["summary"]["effects"]
    written = json.loads((Path(report.wandb_run) / "files" / table["path"]).read_text())
    assert written["columns"][-3:] == ["verdict", "tost_holm_p", "detectable_80"]
    rows = {(row[0], row[2]): row for row in written["data"]}
    norm, ffn = rows[("norm", "difference from post")], rows[("ffn", "difference from relu")]
    assert norm[9] == "separated" and ffn[9].startswith("level within ±0.03") and ffn[10] < 0.05
    assert ffn[11] > 0 and norm[11] >= 0, "the detectable difference at 80% power"
    crossed = next(row for row in written["data"] if row[2].startswith("interaction"))
    assert crossed[9].startswith("not separated (inconclusive: left the family") and crossed[8] is None, "no Holm p"


def test_the_effect_plot_shades_the_declared_margin(tmp_path):
    from zoo.compare.sections import analyse
    from zoo.compare.sections.effects import effect_figure

    sweep = sweepkit.write_sweep(tmp_path, "shaded", {"model.norm": ["post", "pre"]}, [0, 1, 2],
                                 lambda a, seed: value({**a, "model.ffn": "relu"}, seed), margins={"eval/exact_match": 0.03})
    analysis = analyse(sweep.directory())
    figure = effect_figure(analysis.comparison, analysis["effects"].effects[0])
    right = figure.axes[1]
    (band,) = [patch for patch in right.patches if patch.get_label() == "margin ±0.03"]
    corners = band.get_path().transformed(band.get_patch_transform()).vertices  # in data units along y
    assert min(y for _, y in corners) == -0.03 and max(y for _, y in corners) == 0.03
