"""The determinism guard: a workflow function whose clock, random and I/O calls raise.

Temporal replays a workflow function from its history on every worker that picks the run
up, so the function must take the same path each time. Temporal's own sandbox would catch
``time.time()`` by re-importing the workflow's module for every run, which runs a user's
module-level code again (``app.start`` in a script) and fails the workflow *task*, retried
forever. surefoot instead runs a copy of the workflow function whose globals see guarded
stand-ins for the usual culprits (``time``, ``random``, ``datetime.now``, ``uuid4``,
``open``, ``os``/``socket``/``subprocess`` I/O); using one raises
:class:`~surefoot.errors.NondeterminismError` at the call, and the run fails with it.

The guard covers the function's own code (and functions defined inside it). Helpers it
calls that live elsewhere keep their globals; Temporal's replay check still catches a path
that changed (the run then fails, see ``_workflow``), with Temporal's message.
"""

from __future__ import annotations

import builtins
import datetime as _dt
import os
import random
import secrets
import socket
import subprocess
import time
import types
import uuid
from collections.abc import Callable
from typing import Any

from ...errors import NondeterminismError

__all__ = ["guarded"]

_CLOCK = "read the time with app.clock-free code: pass it in, or do it in a step"
_HINTS = {
    "time": "use app.sleep() for waits and do clock reads in a step",
    "random": "draw random numbers in a step (its result is recorded), or seed random.Random",
    "datetime": "pass the time in as an argument or read it in a step",
    "uuid": "make ids in a step, or derive them from the run id (durable.current_run())",
    "secrets": "make secrets in a step",
    "io": "do I/O (files, sockets, processes) in a step",
}
_BANNED: dict[str, tuple[set[str], str]] = {
    "time": (
        {
            "time",
            "time_ns",
            "monotonic",
            "monotonic_ns",
            "perf_counter",
            "perf_counter_ns",
            "process_time",
            "process_time_ns",
            "sleep",
            "localtime",
            "gmtime",
            "ctime",
            "asctime",
        },
        "time",
    ),
    "random": (
        {n for n in dir(random) if not n.startswith("_") and callable(getattr(random, n))}
        - {"Random"},
        "random",
    ),
    "uuid": ({"uuid1", "uuid4"}, "uuid"),
    "secrets": ({n for n in dir(secrets) if not n.startswith("_")} - {"compare_digest"}, "secrets"),
    "os": (
        {
            "urandom",
            "getrandom",
            "system",
            "popen",
            "listdir",
            "scandir",
            "remove",
            "unlink",
            "rename",
            "replace",
            "mkdir",
            "makedirs",
            "rmdir",
            "getpid",
            "times",
            "walk",
        },
        "io",
    ),
    "socket": ({"socket", "create_connection", "getaddrinfo", "gethostbyname"}, "io"),
    "subprocess": ({"run", "Popen", "call", "check_call", "check_output"}, "io"),
}
_MODULES = {
    "time": time,
    "random": random,
    "uuid": uuid,
    "secrets": secrets,
    "os": os,
    "socket": socket,
    "subprocess": subprocess,
}


Report = Callable[[str, str], NondeterminismError]


class _GuardedModule:
    """A module whose non-deterministic members raise; the rest pass through."""

    def __init__(self, module: types.ModuleType, banned: set[str], hint: str, report: Report):
        self._module, self._banned, self._hint, self._report = module, banned, hint, report

    def __getattr__(self, name: str) -> Any:
        if name in self._banned:
            raise self._report(f"{self._module.__name__}.{name}()", self._hint)
        return getattr(self._module, name)

    def __repr__(self) -> str:
        return f"<guarded module {self._module.__name__!r}>"


def _guarded_datetime(report: Report) -> tuple[type[_dt.datetime], type[_dt.date]]:
    hint = _HINTS["datetime"]

    class datetime(_dt.datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Any:
            raise report("datetime.now()", hint)

        @classmethod
        def utcnow(cls) -> Any:
            raise report("datetime.utcnow()", hint)

        @classmethod
        def today(cls) -> Any:
            raise report("datetime.today()", hint)

    class date(_dt.date):
        @classmethod
        def today(cls) -> Any:
            raise report("date.today()", hint)

    return datetime, date


def _banned_function(fn: Any, call: str, hint: str, report: Report) -> Callable[..., Any]:
    def guard(*args: Any, **kwargs: Any) -> Any:
        raise report(call, hint)

    guard.__name__ = getattr(fn, "__name__", "guard")
    return guard


def _stand_ins(report: Report) -> tuple[dict[int, Any], dict[str, Any]]:
    """(id of an original object -> its guarded stand-in, guarded builtins)."""
    out: dict[int, Any] = {}
    for modname, module in _MODULES.items():
        banned, hint_key = _BANNED[modname]
        hint = _HINTS[hint_key]
        out[id(module)] = _GuardedModule(module, banned, hint, report)
        for name in banned:
            obj = getattr(module, name, None)
            if callable(obj) and not isinstance(obj, type):
                out[id(obj)] = _banned_function(obj, f"{modname}.{name}()", hint, report)
    gdt, gdate = _guarded_datetime(report)
    out[id(_dt.datetime)] = gdt
    out[id(_dt.date)] = gdate
    dt_module = types.ModuleType("datetime")
    dt_module.__dict__.update(vars(_dt))
    dt_module.datetime = gdt  # type: ignore[attr-defined]
    dt_module.date = gdate  # type: ignore[attr-defined]
    out[id(_dt)] = dt_module
    b = dict(vars(builtins))
    for name in ("open", "input"):
        b[name] = _banned_function(b[name], f"{name}()", _HINTS["io"], report)
    real_import = builtins.__import__

    def guarded_import(name: str, *args: Any, **kwargs: Any) -> Any:
        """``import time`` inside the workflow function gets the guarded module too."""
        module = real_import(name, *args, **kwargs)
        return out.get(id(module), module)

    b["__import__"] = guarded_import
    return out, b


def guarded(fn: Callable[..., Any], report: Report) -> Callable[..., Any]:
    """A copy of ``fn`` (same code, defaults, closure) whose globals are guarded.

    ``report(call, hint)`` builds the error to raise (and may note it on the run).
    """
    stand_ins, b = _stand_ins(report)
    glb = {k: stand_ins.get(id(v), v) for k, v in fn.__globals__.items()}
    glb["__builtins__"] = b
    copy = types.FunctionType(fn.__code__, glb, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    copy.__qualname__ = fn.__qualname__
    copy.__module__ = fn.__module__
    return copy
