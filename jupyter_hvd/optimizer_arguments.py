"""Checks of the arguments the frontends' distributed optimizers and trainers share, made where they are made.

Each failure is one this rank can name at once; the frontends tell it to the other ranks
(``agreement.require_same_making``), whose optimizers then fail too.
"""
import math
import numbers
from typing import Any


def check_predivide_factor(what: str, factor: Any) -> None:
    """``gradient_predivide_factor``: a finite number other than 0 (Horovod's fails only at the step, or gives
    NaNs)."""
    if isinstance(factor, bool) or not isinstance(factor, numbers.Real):
        raise TypeError(f"{what}: gradient_predivide_factor must be a number, got {factor!r}")
    if not math.isfinite(factor) or factor == 0:
        raise ValueError(f"{what}: gradient_predivide_factor must be finite and not 0, got {factor!r}")


def check_count(what: str, argument: str, value: Any, least: int) -> None:
    """An int argument (``backward_passes_per_step``, ``num_groups``) of at least ``least``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{what}: {argument} must be an int, got {value!r}")
    if value < least:
        raise ValueError(f"{what}: {argument} must be an int >= {least}, got {value!r}")
