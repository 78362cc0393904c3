"""The base of every settings model (specs, part settings, task parameters): unknown keys, coerced
types and non-finite numbers are errors, and so is a number float32 cannot hold.

The model computes in float32 (or narrower): a setting of 1e39 becomes infinity there and one of
1e-50 becomes 0, so a run would "diverge at step 1" or "finish" having learned nothing, and a sweep
would record that as a result. Every float anywhere in a setting (in tuples and mappings too) is
held to float32's range of normal numbers, or 0.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

FLOAT32_MAX = 3.4028234663852886e38
FLOAT32_TINY = 1.1754943508222875e-38
"""float32's largest finite and smallest normal magnitudes."""


def floats_in(value: Any) -> list[float]:
    """The floats of a setting's value, nested models aside (they check their own)."""
    if isinstance(value, float):
        return [value]
    if isinstance(value, (list, tuple, set, frozenset)):
        return [number for item in value for number in floats_in(item)]
    if isinstance(value, dict):
        return [number for item in value.values() for number in floats_in(item)]
    return []


class StrictSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    @field_validator("*", mode="after")
    @classmethod
    def _fits_float32(cls, value: Any, info: ValidationInfo) -> Any:
        for number in floats_in(value):
            if number != 0.0 and not FLOAT32_TINY <= abs(number) <= FLOAT32_MAX:
                raise ValueError(f"{number!r} cannot be held in float32, the precision the model computes in "
                                 f"(magnitudes from {FLOAT32_TINY:.4g} to {FLOAT32_MAX:.4g}, or 0)")
        return value
