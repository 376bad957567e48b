"""Operations and histories in Jepsen's shape, read from and written to JSON lines.

A history is the operations clients performed, in real-time order: each operation is an
``invoke`` followed, on the same process, by its completion: ``ok`` (it happened, with its
result), ``fail`` (it certainly did not happen) or ``info`` (unknown: it may or may not have
happened, now or later). A process has at most one operation outstanding; after an ``info``
it issues nothing more (a fresh process id takes its place), so an unknown operation never
hides behind a later one of the same client. An invoke with no completion at the end of a
history counts as ``info``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import ConfigError

__all__ = ["COMPLETIONS", "TYPES", "History", "Op", "Pair"]

TYPES = ("invoke", "ok", "fail", "info")
"""The four types of an operation record, as Jepsen names them."""
COMPLETIONS = ("ok", "fail", "info")
"""The types that complete an invocation."""


@dataclass(frozen=True, slots=True)
class Op:
    """One record of a history.

    Attributes:
        type: ``invoke``, ``ok``, ``fail`` or ``info``.
        process: the logical client (an int or a string), one operation at a time.
        f: what the operation does (``read``, ``write``, ``txn``, ``append`` …).
        value: its argument on ``invoke``, its result on a completion (JSON data).
        time: a monotonic timestamp in nanoseconds; across files, comparable only between
            processes of one host (``time.monotonic_ns()``).
        index: the record's position in its history.
        error: on a ``fail`` or ``info``, what the client saw (an exception's type and text).
    """

    type: str
    process: int | str
    f: str
    value: Any = None
    time: int = 0
    index: int = -1
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The record as one JSON object (``error`` only when there is one)."""
        d: dict[str, Any] = {
            "index": self.index,
            "time": self.time,
            "type": self.type,
            "process": self.process,
            "f": self.f,
            "value": self.value,
        }
        if self.error is not None:
            d["error"] = self.error
        return d

    @classmethod
    def from_json(cls, d: Any, *, where: str, default_time: int) -> Op:
        """Read one record; ``where`` names it in errors (``file.jsonl line 3``)."""
        if not isinstance(d, dict):
            raise ConfigError(f"{where}: an operation is a JSON object, got {d!r}")
        kind, process, f = d.get("type"), d.get("process"), d.get("f")
        if kind not in TYPES:
            raise ConfigError(f"{where}: type must be one of {', '.join(TYPES)}, got {kind!r}")
        if isinstance(process, bool) or not isinstance(process, int | str):
            raise ConfigError(f"{where}: process must be an int or a string, got {process!r}")
        if not isinstance(f, str) or not f:
            raise ConfigError(f"{where}: f must be a non-empty string, got {f!r}")
        t = d.get("time", default_time)
        if isinstance(t, bool) or not isinstance(t, int):
            raise ConfigError(f"{where}: time must be integer nanoseconds, got {t!r}")
        error = d.get("error")
        if error is not None and not isinstance(error, str):
            raise ConfigError(f"{where}: error must be a string, got {error!r}")
        return cls(kind, process, f, d.get("value"), t, -1, error)


@dataclass(frozen=True, slots=True)
class Pair:
    """An invocation and its completion (None: never completed, so unknown).

    ``type`` is the completion's type (``info`` when there is none); ``value`` the
    completion's value for ``ok``, else the invocation's (what was attempted).
    """

    invoke: Op
    end: Op | None

    @property
    def type(self) -> str:
        """``ok``, ``fail`` or ``info``."""
        return self.end.type if self.end is not None else "info"

    @property
    def process(self) -> int | str:
        """The process that ran it."""
        return self.invoke.process

    @property
    def f(self) -> str:
        """The operation's function."""
        return self.invoke.f

    @property
    def value(self) -> Any:
        """The result of an ``ok`` operation, else what was invoked."""
        if self.end is not None and self.end.type == "ok":
            return self.end.value
        return self.invoke.value

    @property
    def start(self) -> int:
        """When it was invoked."""
        return self.invoke.time

    @property
    def stop(self) -> float:
        """When it completed; infinity for an unknown outcome (it may take effect later)."""
        if self.end is None or self.end.type == "info":
            return float("inf")
        return self.end.time

    def describe(self) -> str:
        """A short reference for explanations: ``ok write by process 3 (index 12)``."""
        last = self.end if self.end is not None else self.invoke
        return f"{self.type} {self.f} by process {self.process!r} (index {last.index})"


@dataclass
class History:
    """Operations in real-time order, indexed by position.

    Build one from a ``Recorder`` (``recorder.history()``), from files
    (``History.load(*paths)``, merged by time) or from text (``History.loads(lines)``).
    """

    ops: list[Op] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.ops = [o if o.index == i else _reindex(o, i) for i, o in enumerate(self.ops)]

    def __iter__(self) -> Iterator[Op]:
        return iter(self.ops)

    def __len__(self) -> int:
        return len(self.ops)

    def __getitem__(self, i: int) -> Op:
        return self.ops[i]

    @classmethod
    def merge(cls, *histories: Iterable[Op]) -> History:
        """One history of several (say one per OS process), ordered by ``time``; equal
        times keep the order of the arguments, then of each history."""
        tagged = [(o.time, n, i, o) for n, h in enumerate(histories) for i, o in enumerate(h)]
        tagged.sort(key=lambda t: t[:3])
        return cls([t[3] for t in tagged])

    @classmethod
    def loads(cls, text: str, *, name: str = "history") -> History:
        """Parse JSON lines (blank lines skipped). A record without ``time`` gets its line
        number, so hand-written histories can rely on line order alone."""
        ops = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            where = f"{name} line {n}"
            try:
                d = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{where} is not JSON ({exc.msg}): {line[:80]!r}") from exc
            ops.append(Op.from_json(d, where=where, default_time=n))
        return cls.merge(ops)

    @classmethod
    def load(cls, *paths: str | os.PathLike[str]) -> History:
        """Read one or more JSON-lines files (one per recording OS process) and merge them
        by time. A last line cut short by a kill is dropped; any other bad line is an error.
        """
        if not paths:
            raise ConfigError("History.load needs at least one path")
        parts = []
        for p in paths:
            text = Path(p).read_text(encoding="utf-8")
            if text and not text.endswith("\n"):  # the writer died mid-line
                text = text[: text.rfind("\n") + 1]
            parts.append(cls.loads(text, name=str(p)).ops)
        return cls.merge(*parts)

    def dumps(self) -> str:
        """The history as JSON lines."""
        return "".join(json.dumps(o.to_json(), separators=(",", ":")) + "\n" for o in self.ops)

    def dump(self, path: str | os.PathLike[str]) -> None:
        """Write the history to ``path`` as JSON lines."""
        Path(path).write_text(self.dumps(), encoding="utf-8")

    def pairs(self) -> list[Pair]:
        """Every invocation with its completion, in invocation order.

        Raises:
            ConfigError: the history breaks the discipline: a completion with nothing
                outstanding on its process, a second invocation before the first completed,
                an invocation after an ``info`` on the same process, or a completion whose
                ``f`` differs from its invocation's.
        """
        invokes: list[Op] = []
        ends: list[Op | None] = []
        open_: dict[int | str, int] = {}  # process -> position in invokes
        dead: set[int | str] = set()
        for o in self.ops:
            p = o.process
            if o.type == "invoke":
                if p in dead:
                    raise ConfigError(
                        f"process {p!r} invoked {o.f!r} (index {o.index}) after an info: an "
                        "unknown outcome ends a process; record later operations under a "
                        "fresh process id"
                    )
                if p in open_:
                    raise ConfigError(
                        f"process {p!r} invoked {o.f!r} (index {o.index}) while its "
                        f"operation at index {invokes[open_[p]].index} was outstanding"
                    )
                open_[p] = len(invokes)
                invokes.append(o)
                ends.append(None)
                continue
            at = open_.pop(p, None)
            if at is None:
                raise ConfigError(
                    f"{o.type} {o.f!r} of process {p!r} (index {o.index}) completes nothing: "
                    "no invocation of that process is outstanding"
                )
            inv = invokes[at]
            if inv.f != o.f:
                raise ConfigError(
                    f"{o.type} of process {p!r} (index {o.index}) is for {o.f!r} but the "
                    f"outstanding invocation (index {inv.index}) is {inv.f!r}"
                )
            ends[at] = o
            if o.type == "info":
                dead.add(p)
        return [Pair(i, e) for i, e in zip(invokes, ends, strict=True)]


def _reindex(o: Op, i: int) -> Op:
    return Op(o.type, o.process, o.f, o.value, o.time, i, o.error)
