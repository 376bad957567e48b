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

from ._defs import StepDef
from ._types import StepSpec
from ._values import Params

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
        self.returns: Any = Any  # how its journalled result is read back (the registry sets)
        self.params: Params = Params(None, {})  # how its journalled arguments are read back

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


def _referenced(fn: Callable[..., Any]) -> Iterator[tuple[str, Any, str | None]]:
    """(name, object or None, signal) of every name ``fn``'s code loads, in code order.

    ``signal`` is the first argument of an attribute call when it is a string known
    without running the code: a literal (``app.wait_for("approve")``) or a module-level or
    closure constant (``app.wait_for(APPROVE)``); otherwise None.
    """
    glb: dict[str, Any] = getattr(fn, "__globals__", {})
    cells: dict[str, Any] = {}
    closure = getattr(fn, "__closure__", None) or ()
    for name, cell in zip(fn.__code__.co_freevars, closure, strict=False):
        try:
            cells[name] = cell.cell_contents
        except ValueError:  # an empty cell
            pass

    def value(ins: dis.Instruction) -> Any:
        if ins.opname == "LOAD_CONST":
            return ins.argval
        if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") and isinstance(ins.argval, str):
            return glb.get(ins.argval)
        if ins.opname == "LOAD_DEREF" and isinstance(ins.argval, str):
            return cells.get(ins.argval)
        return None

    for code in _codes(fn.__code__):
        ops = list(dis.get_instructions(code))
        for i, ins in enumerate(ops):
            if ins.opname in _LOADS and isinstance(ins.argval, str):
                name = ins.argval
                if ins.opname in ("LOAD_ATTR", "LOAD_METHOD"):
                    arg = value(ops[i + 1]) if i + 1 < len(ops) else None
                    yield name, None, arg if isinstance(arg, str) and arg else None
                else:
                    yield name, cells[name] if name in cells else glb.get(name), None


def describe(wf: Workflow) -> list[StepSpec]:
    """The steps and waits ``wf`` refers to, in code order, each with its kind and key plan.

    A wait for a signal is named after the signal when the name is a constant in the code
    (``app.wait_for("approve")`` or ``app.wait_for(APPROVE)`` -> ``approve``); a name
    computed at run time leaves it ``wait_for``. Timers are ``sleep`` / ``sleep_until``.
    """
    return [spec for spec, _ in _described(wf)]


def _described(wf: Workflow) -> list[tuple[StepSpec, str]]:
    """(spec, the name the structure hash uses) per step; see ``describe``."""
    fn = inspect.unwrap(wf.fn)
    out: list[tuple[StepSpec, str]] = []
    seen: set[str] = set()
    for name, obj, signal in _referenced(fn):
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
            spec = StepSpec(
                sd.name,
                sd.kind,
                comp.name if comp else None,
                sd.idempotent,
                sd.takes_key,
                plan,
                sd.retry.max_attempts,
            )
            out.append((spec, sd.name))
        elif obj is None and name in _WAITS:
            shown = signal if name == "wait_for" and signal is not None else name
            if shown in seen:
                continue
            seen.add(shown)
            plan = "none needed: journalled wait"
            out.append((StepSpec(shown, "wait", None, True, False, plan, 1), name))
    return out


def structure_hash(wf: Workflow) -> str:
    """A short hash of ``wf``'s version label and step structure."""
    # Waits enter under their function's name (``wait_for``), as before waits were named
    # after their signal, so runs begun on an older surefoot do not look "code changed".
    seen: set[str] = set()
    parts = [wf.name, wf.version]
    for s, key in _described(wf):
        if key in seen and s.kind == "wait":
            continue
        seen.add(key)
        parts.append(f"{key}:{s.kind}:{s.compensate}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
