"""Option types that refuse a value which would spin, never end, or mean nothing."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import click

from .. import testing
from ..errors import ConfigError

__all__ = ["FaultSpec", "Seconds"]

if TYPE_CHECKING:  # click >= 8.2 makes ParamType generic; 8.1 (allowed) does not
    _FloatParam = click.ParamType[float]
    _AnyParam = click.ParamType[Any]
else:
    _FloatParam = _AnyParam = click.ParamType


class Seconds(_FloatParam):
    """A number of seconds: finite, >= 0 (or > 0 with ``positive``), else one clear line.

    Args:
        positive: refuse 0 too. why: what the refused value would do (said in the error).
    """

    name = "seconds"

    def __init__(self, *, positive: bool = False, why: str = "") -> None:
        self.positive = positive
        self.why = why

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, float):
            out = value
        else:
            try:
                out = float(value)
            except (TypeError, ValueError):
                out = math.nan
        if math.isfinite(out) and (out > 0 if self.positive else out >= 0):
            return out
        bound = "> 0" if self.positive else ">= 0"
        why = f" ({self.why})" if self.why else ""
        self.fail(f"{value!r} is not a number of seconds {bound}{why}", param, ctx)


class FaultSpec(_AnyParam):
    """A ``--fault`` spec for ``surefoot fake-provider``, parsed by ``testing.parse_fault``."""

    name = "spec"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value
        try:
            return testing.parse_fault(value)
        except ConfigError as exc:
            self.fail(str(exc), param, ctx)
