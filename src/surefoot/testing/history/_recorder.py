"""``Recorder``: a thread-safe history writer, one JSON-lines file per OS process.

Timestamps are ``time.monotonic_ns()``, made strictly increasing within a recorder. On Linux
that clock is one clock for every process of a host, so files written by several processes
on one host merge into one real-time order (``History.load(*paths)``). Wall clocks are never
used: an NTP step or a skewed clock cannot reorder a history. What this assumes:

- every recording process runs on the same host, in the same time namespace;
- nothing fakes the monotonic clock: under ``faketime`` set
  ``FAKETIME_DONT_FAKE_MONOTONIC=1`` so a skewed process still records true order;
- a recorder is made in the process that uses it (after a ``fork``, make a new one).

The invoke timestamp is taken before the client's call starts and the completion timestamp
after it returns, so a recorded interval contains the real one: when one operation's
completion precedes another's invocation in the history, it really finished first.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from ...errors import ConfigError
from ._ops import History, Op

__all__ = ["Client", "Recorder"]


class Recorder:
    """Records operations from any number of threads, in memory and (optionally) to a file.

    Args:
        path: a JSON-lines file to append every record to, flushed line by line (a
            SIGKILL loses at most the line being written); None keeps them in memory only.
        name: the prefix of the process ids this recorder hands out (``"<name>/<n>"``);
            the OS process id by default, so several processes never share an id.
        clock: nanoseconds, monotonic (``time.monotonic_ns`` by default; tests pass a fake).

    Use ``client()`` for each logical client (a thread, an agent, a worker) and record with
    its ``invoke`` and ``ok`` / ``fail`` / ``info``, or with the helpers in this package.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        name: str | None = None,
        clock: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        if name is not None and (not isinstance(name, str) or not name or "/" in name):
            raise ConfigError(f"a recorder name is a non-empty string without '/', got {name!r}")
        self.name = name if name is not None else str(os.getpid())
        self.path = Path(path) if path is not None else None
        self._clock = clock
        self._lock = threading.Lock()
        self._ops: list[Op] = []
        self._last = -1
        self._next_process = 0
        self._file: IO[str] | None = (
            open(self.path, "a", encoding="utf-8") if self.path is not None else None  # noqa: SIM115
        )

    def client(self) -> Client:
        """A new logical client with its own process id."""
        return Client(self)

    def new_process(self) -> str:
        """A process id no client of this recorder used before."""
        with self._lock:
            n = self._next_process
            self._next_process += 1
        return f"{self.name}/{n}"

    def record(
        self, kind: str, process: int | str, f: str, value: Any, error: str | None = None
    ) -> Op:
        """Append one record now (the clients call this; use it directly for events that
        are not a client's, keeping Jepsen's discipline yourself)."""
        with self._lock:
            t = max(self._clock(), self._last + 1)
            self._last = t
            op = Op(kind, process, f, value, t, len(self._ops), error)
            # Encoded first: a value that is not JSON is refused before anything is kept.
            line = json.dumps(op.to_json(), separators=(",", ":"), default=_unencodable)
            self._ops.append(op)
            if self._file is not None:
                self._file.write(line + "\n")
                self._file.flush()
        return op

    def history(self) -> History:
        """What this recorder has recorded so far."""
        with self._lock:
            return History(list(self._ops))

    def close(self) -> None:
        """Close the file (records stay in memory)."""
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = str(self.path) if self.path is not None else "memory"
        return f"Recorder({where!r}, name={self.name!r}, ops={len(self._ops)})"


class Client:
    """One logical client: one operation at a time, a fresh process id after an ``info``.

    ``invoke(f, value)`` starts an operation; ``ok(value)``, ``fail(value)`` or
    ``info(value)`` completes it (``value`` None keeps the invoked value). Use one client
    per thread: a client is not shared.
    """

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.process: str = recorder.new_process()
        self._pending: Op | None = None

    @property
    def pending(self) -> Op | None:
        """The invocation not completed yet, if any."""
        return self._pending

    def invoke(self, f: str, value: Any = None) -> Op:
        """Record the start of an operation.

        Raises:
            ConfigError: an operation of this client is still outstanding.
        """
        if self._pending is not None:
            raise ConfigError(
                f"client {self.process!r} invoked {f!r} while {self._pending.f!r} (index "
                f"{self._pending.index}) is outstanding: complete it with ok, fail or info first"
            )
        self._pending = self.recorder.record("invoke", self.process, f, value)
        return self._pending

    def ok(self, value: Any = None) -> Op:
        """It happened; ``value`` is its result."""
        return self._complete("ok", value, None)

    def fail(self, value: Any = None, *, error: str | None = None) -> Op:
        """It certainly did not happen."""
        return self._complete("fail", value, error)

    def info(self, value: Any = None, *, error: str | None = None) -> Op:
        """Its outcome is unknown; the client continues under a fresh process id."""
        op = self._complete("info", value, error)
        self.process = self.recorder.new_process()
        return op

    def _complete(self, kind: str, value: Any, error: str | None) -> Op:
        inv = self._pending
        if inv is None:
            raise ConfigError(f"client {self.process!r} has no operation outstanding to {kind}")
        op = self.recorder.record(
            kind, inv.process, inv.f, inv.value if value is None else value, error
        )
        self._pending = None
        return op

    def __repr__(self) -> str:
        return f"Client({self.process!r})"


def _unencodable(obj: object) -> Any:
    raise ConfigError(
        f"a history value must be JSON data (dict, list, str, int, float, bool, None), got "
        f"{type(obj).__name__}: record a plain form of it (its id, a digest)"
    )
