"""What the published pages say of a comparison is what its tests show. A non-separation is never an
absence: a sentence that claims one ("holds", "agrees", "does not", "no effect", "costs little",
"survives") must say it is inconclusive, or rest on a level verdict (TOST against a declared
margin) that a published report prints; and every level claim must be one of those verdicts."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results"
PAGES = ["README.md", "docs/results.md", "experiments/results/README.md"]
"""Where the zoo states its findings in prose."""

ABSENCE = re.compile(r"\b(holds?|agrees?|agreed|does not|do not|did not|no effect|costs? little|survives?|"
                     r"no interaction|no difference|no higher|no lower|nor does)\b", re.I)
"""Words that claim an absence of a difference when they compare."""

NOT_A_COMPARISON = {
    "hold the device": "holds: a record contains fields",
    "learning curve holds": "holds: a curve contains a value",
    "a clone does not hold": "holds: a folder contains files",
    "a replay holds the ids": "holds: a file contains ids",
    "hold the same file": "holds: folders contain one file",
    "what one family holds": "holds: a family contains tests",
    "moe and switch hold 8 experts": "holds: a layer contains experts",
    "a median module holds": "holds: a file contains characters",
    "this machine holds": "holds: a disk contains a corpus",
    "the corpus does not ship": "what the repository contains",
    "can separate, whatever the data": "a design's limit, said before any data",
    "happened to agree": "two pairs of one sign, the reason an old verdict was wrong",
    "no difference is called level": "says that no verdict is level",
    "holds at 5% for the whole family": "the error rate Holm's method controls",
    "agreed under cpu capabilities": "a cell trained again within its tolerance: a reproduction",
    "the published claim": "what the paper claims, named as such",
    "no falling term fits": "a fit's outcome on one variant's curve",
    "the law does not pin e": "a fit's parameter left unidentified",
}
"""Sentences whose absence word does not compare variants, by a fragment of each, with the reason."""

LEVEL = re.compile(r"level within ±([0-9.]+)")
VERDICT = re.compile(r"level within ±([0-9.]+) \(TOST Holm p ([0-9.e+-]+)\)")


RETRACTED = "## Published -> now"
"""The section that quotes what was published before, beside what stands now."""


def blocks(text: str) -> list[str]:
    """The page's prose and table rows, one block each: a paragraph, a bullet with its continued
    lines, a heading or a table row; code, HTML comments and the quotes of RETRACTED left out."""
    text = re.sub(r"```.*?```", "", re.sub(r"<!--.*?-->", "", text, flags=re.S), flags=re.S)
    text = re.sub(rf"^{re.escape(RETRACTED)}$.*?(?=^## )", "", text, flags=re.S | re.M)
    out: list[str] = []
    for line in text.splitlines():
        if line.startswith(("- ", "#", "|")) or not line.strip() or not out:
            out.append(line)
        else:
            out[-1] += " " + line.strip()
    return [block.strip() for block in out if block.strip()]


def sentences(block: str) -> list[str]:
    return re.split(r"(?<=[.?!])\s+(?=[A-Z*`(\[])", block)


def papers_claim(block: str) -> bool:
    """A bullet that reports what the papers found, not what the zoo's tests show."""
    return block.lstrip("- *").startswith("Published")


def unbacked_absences(text: str) -> list[str]:
    """Each sentence that claims an absence without a verdict behind it."""
    found = []
    for block in blocks(text):
        if papers_claim(block):
            continue
        for sentence in sentences(block):
            if not ABSENCE.search(sentence) or sentence.rstrip("*").endswith("?"):
                continue
            if "inconclusive" in sentence or VERDICT.search(sentence):
                continue
            if any(fragment in sentence.lower() for fragment in NOT_A_COMPARISON):
                continue
            found.append(sentence)
    return found


def printed_verdicts() -> set[tuple[str, str]]:
    """(margin, TOST Holm p) of every level verdict the published reports print."""
    return {match.groups() for report in RESULTS.glob("*/report.md") for match in VERDICT.finditer(report.read_text())}


def level_claims(text: str) -> list[str]:
    """Each sentence that says two variants are level (not 'not level', 'neither level')."""
    claims = []
    for block in blocks(text):
        for sentence in sentences(block):
            for match in LEVEL.finditer(sentence):
                before = sentence[max(0, match.start() - 24) : match.start()].lower()
                if not re.search(r"\b(not|neither|nor|no|none)\b", before):
                    claims.append(sentence)
    return claims


@pytest.mark.parametrize("page", PAGES)
def test_no_published_sentence_claims_an_absence_without_a_level_verdict(page):
    said = unbacked_absences((ROOT / page).read_text())
    assert not said, "\n".join(said)


@pytest.mark.parametrize("page", PAGES)
def test_every_published_level_claim_is_a_verdict_a_report_prints(page):
    printed = printed_verdicts()
    assert printed, "no published report prints a level verdict"
    for claim in level_claims((ROOT / page).read_text()):
        stated = VERDICT.search(claim)
        assert stated and stated.groups() in printed, f"{page}: a level claim no report prints: {claim}"


def test_the_check_finds_an_absence_a_level_claim_and_lets_what_does_not_compare_pass():
    """The rule itself, on sentences written for it."""
    assert unbacked_absences("- Measured: GELU holds its lead at 10x.") == ["- Measured: GELU holds its lead at 10x."]
    assert unbacked_absences("The norm type does not separate. Warmup costs little.") == [
        "The norm type does not separate.", "Warmup costs little."]
    assert unbacked_absences("The norm type does not separate (inconclusive).") == []
    assert unbacked_absences("- Published: ALiBi extrapolates where sinusoidal positions do not.") == []
    assert unbacked_absences("## Does the best rate hold across widths?") == []
    assert unbacked_absences("A replay holds the ids.\n\n```\nit does not\n```") == []
    assert unbacked_absences(f"{RETRACTED}\n\n| x | it holds | not separated |\n\n## Next\n\nIt holds.") == ["It holds."]
    assert level_claims("pre and post are level within ±0.02 (+0.004, TOST Holm p 0.012).") != []
    assert level_claims("neither level within ±0.05; not level within ±0.01.") == []
    assert not VERDICT.search("level within ±0.02 (+0.004, TOST Holm p 0.012)")
