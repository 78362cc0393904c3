"""Whether the question was declared before the cells ran: `zoo sweep` records the sweep file's
question (metric, margins, family, target, fit, choose_on) and its hash with every cell, and a
study whose question changed after cells ran is exploratory, whatever its p-values say."""

from __future__ import annotations

import json
from dataclasses import dataclass

from zoo.compare.sections import Analysis, Section, register
from zoo.sweep.question import declaration, declaration_changes


@dataclass
class Declared:
    now: dict
    """The sweep file's declaration as it reads now."""
    recorded: dict[str, int]
    """Each distinct recorded declaration (as JSON) and how many of the compared runs carry it."""
    undeclared: int
    """Runs recorded before `zoo sweep` recorded declarations (or written by hand)."""
    changes: list[str]
    """Each question field some run was trained under with another value than now."""

    @property
    def exploratory(self) -> bool:
        return bool(self.changes)


@register("declaration")
class DeclarationSection(Section):
    order = 88

    @classmethod
    def compute(cls, analysis: Analysis) -> Declared:
        # the sweep file's question as read, not the tuned comparison's copy (whose tuned keys, and the
        # best rate's slope asked of them, are chosen away)
        now, recorded, undeclared = declaration(analysis.read.comparison.design), {}, 0
        for record in analysis.records:
            if record.declared is None:
                undeclared += 1
            else:
                key = json.dumps(record.declared, sort_keys=True)
                recorded[key] = recorded.get(key, 0) + 1
        changes = sorted({change for key in recorded for change in declaration_changes(json.loads(key), now)})
        return Declared(now, recorded, undeclared, changes)

    @classmethod
    def warnings(cls, result: Declared, analysis: Analysis) -> list[str]:
        if not result.exploratory:
            return []
        runs = sum(count for key, count in result.recorded.items() if declaration_changes(json.loads(key), result.now))
        return [f"exploratory: the sweep's question changed after {runs} of the runs were trained "
                f"({'; '.join(result.changes)}), so no verdict of this report is confirmatory"]

    @classmethod
    def notes(cls, result: Declared, analysis: Analysis) -> list[str]:
        if not result.undeclared:
            return []
        return [f"{result.undeclared} of {len(analysis.records)} runs record no declared question (trained before "
                "zoo sweep recorded one): whether the question was set before they ran is not on record"]

    @classmethod
    def markdown(cls, result: Declared, analysis: Analysis) -> list[str]:
        now = result.now
        said = ("changed after cells ran: exploratory" if result.exploratory else
                "as every run recorded it" if not result.undeclared else
                "as the runs that record one recorded it" if result.recorded else "not recorded by any run")
        return ["## Declaration", "", f"The question, {said}: metric `{now['metric']}`, margins {now['margins'] or 'none'}, "
                f"family of the differences and two-way interactions of {', '.join(now['family'])}, target "
                f"{now['target']}, choose_on {now['choose_on']}"
                f"{'; reuses ' + ', '.join(now['reuses']) if now.get('reuses') else ''}; sweep file SHA-256 "
                f"{now['sweep_sha256'][:12]}.",
                *([""] + [f"- {change}" for change in result.changes] if result.changes else []), ""]
