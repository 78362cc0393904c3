"""Comparing a sweep's runs: ranked variants, axis effects with intervals, plots and a report; and
two sweeps of one grid on different tasks: whether the ranking transfers."""

from zoo.compare.comparison import Comparison
from zoo.compare.report import Report, compare
from zoo.compare.sections import Analysis, analyse
from zoo.compare.stats import AxisEffect, Estimate, VariantRow, axis_effects, variant_rows
from zoo.compare.transfer import TransferReport, transfer

__all__ = ["Analysis", "AxisEffect", "Comparison", "Estimate", "Report", "TransferReport", "VariantRow", "analyse",
           "axis_effects", "compare", "transfer", "variant_rows"]
