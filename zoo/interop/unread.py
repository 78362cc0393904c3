"""The refusal of a transformers configuration that no zoo spec computes: it names each field
that does not fit, with its value and what the zoo reads, and never a field that does, so the
user sees which setting to change (a list of every field that could have failed hid it)."""

from __future__ import annotations

from typing import Any

from zoo.errors import InteropError

Check = tuple[bool, str, Any, str]
"""(whether the field fits, its name, its value, what the zoo reads)."""


def refuse_unfit(family: str, *checks: Check) -> None:
    """Raise an InteropError naming the fields among `checks` that do not fit; nothing where all do."""
    unfit = [f"{field} {value!r} (the zoo reads {reads})" for fits, field, value, reads in checks if not fits]
    if unfit:
        raise InteropError(f"{family} with {'; '.join(unfit)} has no zoo spec")
