"""Comparing a sweep's runs: ranked variants, axis effects with intervals, plots and a report."""

from zoo.compare.report import Report, compare
from zoo.compare.stats import AxisEffect, Estimate, VariantRow, axis_effects, variant_rows

__all__ = ["AxisEffect", "Estimate", "Report", "VariantRow", "axis_effects", "compare", "variant_rows"]
