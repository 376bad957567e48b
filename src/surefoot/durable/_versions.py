"""Workflow versions: an explicit label, and a hash of the step structure read from the code.

``describe`` reads which steps and waits a workflow function refers to, in the order they
appear in its code (nested functions included), without running it. The structure hash is
a hash of that list and the label; the run header stores both, so ``runs show`` can tell
that the code registered under a run's version is no longer the code it began with.
"""

from __future__ import annotations

import dis
import hashlib
import inspect
import types
from collections.abc import Callable, Iterator
from typing import Any

from ._step import StepDef
from ._types import StepSpec

__all__ = ["Workflow", "describe", "structure_hash"]

_WAITS = {"sleep": "sleep", "sleep_until": "sleep", "wait_for": "signal"}


class Workflow:
    """A registered workflow: a function, a name and a version label.

    Calling it runs the function directly, without journal (handy in unit tests); run it
    durably with ``app.start`` or ``app.enqueue``.
    """

    def __init__(self, fn: Callable[..., Any], name: str, version: str) -> None:
        self.fn = fn
        self.name = name
        self.version = version
        self.is_async = inspect.iscoroutinefunction(fn)
        self.__doc__ = fn.__doc__
        self.__name__ = getattr(fn, "__name__", name)
        self.__wrapped__ = fn
        self._hash: str | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    @property
    def structure_hash(self) -> str:
        if self._hash is None:
            self._hash = structure_hash(self)
        return self._hash

    def __repr__(self) -> str:
        return f"<workflow {self.name!r} version {self.version!r}>"


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


_LOADS = {"LOAD_GLOBAL", "LOAD_DEREF", "LOAD_NAME", "LOAD_ATTR", "LOAD_METHOD", "LOAD_CLOSURE"}


def _referenced(fn: Callable[..., Any]) -> Iterator[tuple[str, Any]]:
    """(name, object or None) of every name ``fn``'s code loads, in code order."""
    glb: dict[str, Any] = getattr(fn, "__globals__", {})
    cells: dict[str, Any] = {}
    closure = getattr(fn, "__closure__", None) or ()
    for name, cell in zip(fn.__code__.co_freevars, closure, strict=False):
        try:
            cells[name] = cell.cell_contents
        except ValueError:  # an empty cell
            pass
    for code in _codes(fn.__code__):
        for ins in dis.get_instructions(code):
            if ins.opname in _LOADS and isinstance(ins.argval, str):
                name = ins.argval
                if ins.opname in ("LOAD_ATTR", "LOAD_METHOD"):
                    yield name, None
                else:
                    yield name, cells[name] if name in cells else glb.get(name)


def describe(wf: Workflow) -> list[StepSpec]:
    """The steps and waits ``wf`` refers to, in code order, each with its kind and key plan."""
    fn = inspect.unwrap(wf.fn)
    out: list[StepSpec] = []
    seen: set[str] = set()
    for name, obj in _referenced(fn):
        sd: StepDef | None = getattr(obj, "__surefoot_step__", None)
        if sd is not None and sd.name not in seen:
            seen.add(sd.name)
            comp = sd.compensate
            if sd.kind == "effect":
                plan = (
                    "key f'{run_id}:{step}' passed as key=; reused on resume"
                    if sd.takes_key
                    else "idempotent: reruns safely"
                    if sd.idempotent
                    else "no key: outcome unknown after a crash -> needs_attention"
                )
            else:
                plan = "none needed: result journalled, never recomputed"
            out.append(
                StepSpec(
                    sd.name,
                    sd.kind,
                    comp.name if comp else None,
                    sd.idempotent,
                    sd.takes_key,
                    plan,
                    sd.retry.max_attempts,
                )
            )
        elif obj is None and name in _WAITS and name not in seen:
            seen.add(name)
            out.append(StepSpec(name, "wait", None, True, False, "none needed: journalled wait", 1))
    return out


def structure_hash(wf: Workflow) -> str:
    """A short hash of ``wf``'s version label and step structure."""
    parts = [wf.name, wf.version] + [f"{s.name}:{s.kind}:{s.compensate}" for s in describe(wf)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
