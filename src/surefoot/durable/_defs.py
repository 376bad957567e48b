"""What a registered step is: its function, kind, key plan, retries and compensation.

Plain data, no I/O: the registry builds these, the step driver, the saga and ``describe``
read them.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ._retry import StepRetry

__all__ = ["CompDef", "StepDef", "accepts"]


def accepts(fn: Callable[..., Any], name: str) -> bool:
    """Whether ``fn`` takes a keyword argument ``name`` (or any keyword, ``**kwargs``)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


@dataclass(slots=True, eq=False)
class CompDef:
    """A compensation: what undoes an effect."""

    name: str
    fn: Callable[..., Any]
    is_async: bool
    takes_key: bool
    takes_result: bool
    retry: StepRetry


@dataclass(slots=True, eq=False)
class StepDef:
    """A registered step."""

    name: str
    fn: Callable[..., Any]
    kind: str  # pure | effect
    is_async: bool
    takes_key: bool
    idempotent: bool
    retry: StepRetry
    compensate: CompDef | None
    returns: Any = Any  # the return annotation: how its journalled result is read back
    json_values: bool = False
    """Its results are JSON's own types already (a framework's JSON codec made them, e.g.
    pydantic's ``dump_python(mode='json')``): encoded by the C encoder and checked by one
    decode and ``==``, not by the walks a value of any type needs (see ``_decide.encode``)."""
