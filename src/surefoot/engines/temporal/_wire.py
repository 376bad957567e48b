"""What travels between surefoot's client, its workflow and its activities on Temporal.

Standard library and surefoot only. Values travel as surefoot codec text inside plain
JSON dicts (Temporal's default converter), so dataclasses, datetimes and bytes keep
surefoot's encoding; failures carry surefoot's error data and, for a run, its audit.
"""

from __future__ import annotations

import inspect
import typing
from dataclasses import dataclass
from typing import Any

from ... import codec
from ...durable.engine import StepDef
from ...errors import ConfigError
from ._url import TemporalConfig

__all__ = [
    "ENCODE_ERROR",
    "SERVED",
    "STEP_ERROR",
    "UNKNOWN_STEP",
    "Served",
    "decode_args",
    "decode_result",
    "failure_type",
    "parse_type",
    "type_name",
]

STEP_ERROR = "surefoot.step_error"
"""An activity's failure type: the step raised; details[0] is the error as data."""
ENCODE_ERROR = "surefoot.encode_error"
"""The step's result cannot be stored (not retried)."""
UNKNOWN_STEP = "surefoot.unknown_step"
"""The worker has no step of that name (not retried)."""


def failure_type(status: str) -> str:
    """The workflow failure type of a run that ended ``status`` (failed, needs_attention)."""
    return f"surefoot.{status}"


def type_name(name: str, version: str) -> str:
    """The Temporal workflow type of ``name`` at ``version``: one type per version."""
    return f"{name}@{version}"


def parse_type(workflow_type: str) -> tuple[str, str]:
    """``(name, version)`` from a workflow type made by :func:`type_name`."""
    name, sep, version = workflow_type.rpartition("@")
    if not sep:
        raise ConfigError(f"workflow type {workflow_type!r} is not a surefoot one (NAME@VERSION)")
    return name, version


@dataclass(slots=True)
class Served:
    """What a worker process serves on one task queue: its app's registry and settings."""

    registry: Any  # durable's Registry
    config: TemporalConfig
    max_lost: int  # attempts of one step lost to dead workers before needs_attention
    timeouts: Any = None  # (workflow, version) -> its own timeout= (seconds), for children


SERVED: dict[str, Served] = {}
"""Task queue -> what this process serves there (set by ``make_worker``)."""


def _hints(fn: Any) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn)
    except Exception:  # an unresolvable annotation: values stay as codec.loads gives them
        return {}


def decode_args(fn: Any, text: str) -> tuple[list[Any], dict[str, Any]]:
    """A step's arguments from codec text, rebuilt by ``fn``'s parameter annotations."""
    args, kwargs = codec.loads(text)
    hints = _hints(fn)
    if not hints:
        return list(args), dict(kwargs)
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return list(args), dict(kwargs)
    out = list(args)
    for i, p in enumerate(params[: len(out)]):
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name in hints:
            out[i] = codec.decode_as(out[i], hints[p.name], where=f"argument {p.name!r}")
    kw = {
        k: codec.decode_as(v, hints[k], where=f"argument {k!r}") if k in hints else v
        for k, v in dict(kwargs).items()
    }
    return out, kw


def decode_result(sd: StepDef, text: str) -> Any:
    """A step's result from codec text, rebuilt by its return annotation when it has one."""
    hint = _hints(sd.fn).get("return")
    if hint is None:
        return codec.loads(text)
    return codec.loads_as(text, hint, where=f"the result of step {sd.name!r}")
