"""Checks for the numbers resilience objects are configured with: one rule, one message.

A number given to a breaker, a budget, a policy or a fault injector must be a real number:
not a bool (``True`` is an ``int`` in Python, never a count or a rate here), not NaN, and
finite unless the parameter documents that infinity means "no limit". Each check names the
parameter, shows the value and says what to pass instead.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

from ..errors import ConfigError

__all__ = ["count", "duration", "fraction", "real"]


def real(value: Any, name: str, what: str = "a number") -> float:
    """``value`` as a float; refuses bools, non-numbers, NaN and infinities."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{name} must be {what}, got {value!r} ({type(value).__name__})")
    out = float(value)
    if not math.isfinite(out):
        raise ConfigError(
            f"{name} must be {what} (a finite number), got {value!r}; pass a finite value"
        )
    return out


def duration(
    value: Any, name: str, *, positive: bool = False, none_means: str | None = None
) -> float | None:
    """``value`` (seconds or a ``timedelta``) as finite float seconds, or None if allowed.

    Args:
        value: the number of seconds, a ``timedelta``, or None.
        name: the parameter, named in the error.
        positive: refuse 0 as well as negatives.
        none_means: what None means for this parameter ("no limit"); None: None is refused.
    """
    hint = f" (or None for {none_means})" if none_means else ""
    if value is None:
        if none_means:
            return None
        raise ConfigError(f"{name} must be seconds (a number) or a timedelta, got None")
    if isinstance(value, timedelta):
        out = value.total_seconds()
    elif isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(
            f"{name} must be seconds (a number) or a timedelta{hint}, got {value!r} "
            f"({type(value).__name__})"
        )
    else:
        out = float(value)
    if math.isnan(out):
        raise ConfigError(f"{name} must be a number of seconds{hint}, got NaN")
    if math.isinf(out):
        fix = f"pass None for {none_means}" if none_means else "pass a finite number of seconds"
        raise ConfigError(f"{name} must be a finite number of seconds, got {value!r}; {fix}")
    if out < 0 or (positive and out == 0):
        bound = "> 0" if positive else ">= 0"
        raise ConfigError(f"{name} must be {bound} seconds{hint}, got {value!r}")
    return out


def fraction(value: Any, name: str, *, zero: bool = True) -> float:
    """``value`` as a float in [0, 1] (or (0, 1] when ``zero`` is False)."""
    lo = "0 <=" if zero else "0 <"
    out = real(value, name, f"a fraction with {lo} {name} <= 1")
    if out < 0 or out > 1 or (not zero and out == 0):
        raise ConfigError(f"{name} must be a fraction with {lo} {name} <= 1, got {value!r}")
    return out


def count(value: Any, name: str, *, minimum: int = 1) -> int:
    """``value`` as an int >= ``minimum``; refuses bools, floats and smaller ints."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value
