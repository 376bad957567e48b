"""Durable token streams, the writing side: what a step emits while it runs (model tokens,
tool progress) goes to the run's stream, in batches.

Any code running inside a step calls :func:`emit` (a provider adapter's ``stream()`` does
it for every text piece; a framework hook can do it for its own events). Outside a step
``emit`` does nothing and returns False, so library code may call it unconditionally.

Where the events go: one ``StreamLog`` per run, named ``surefoot.run/<run_id>``, in the
journal's own database (``StreamBatches.append_many``: memory, SQLite, PostgreSQL). An
event's offset is its sequence number in that stream; every event carries the step's
position, its lease epoch and attempt number, so a stream is keyed by run and position.

The batching rule: events wait in memory until the pending batch of the run holds
``max_events`` events (default 64) or its oldest event is ``max_delay`` seconds old (default
0.05), whichever comes first; a background thread of the app then writes the batch as one
``append_many`` (one commit). The end of a step attempt that emitted anything writes what is
left, with an ``end`` event, before the step's result is journalled: a step costs at most one
commit per batch, and a journalled step's stream is complete. A crash loses at most the
unwritten batch of an attempt that never journalled a result: that attempt is run again.

Attempts: the first event of an attempt is written after a marker event, ``start`` for the
first attempt of a position and ``retry`` for any later one (a retry in this process, or a
run resumed after a crash whose earlier attempt had events): a reader drops the text it
holds for that position when it sees ``retry``, so it never shows duplicate text. Message
ids are ``<pos>/<epoch>.<attempt>/<n>``: a batch sent again after a lost reply appends
nothing twice.

Stored values: with an app's payload codec (``durable.ZlibCodec``, your encryption) every
event is stored through it, as journal values are, and readers decode it.

Retention: a run's stream is kept while the run lives and deleted when the run is pruned
(``app.prune``, ``surefoot runs prune``, ``Worker(retention=…)``).
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError
from ..storage.checks import check_size
from ..storage.streams import StreamBatches
from ._current import in_step
from ._payloads import PayloadCodec, StoredValues

__all__ = ["Batching", "TokenHub", "emit", "stream_name"]

KINDS = ("start", "retry", "token", "progress", "end")
_EMITTED = ("token", "progress")


def stream_name(run_id: str) -> str:
    """The name of run ``run_id``'s token stream."""
    return f"surefoot.run/{run_id}"


@dataclass(frozen=True, slots=True)
class Batching:
    """When a run's pending events are written: at ``max_events`` events or when the oldest
    is ``max_delay`` seconds old, whichever comes first (and at the end of every attempt).

    Raises:
        ConfigError: ``max_events`` not an int >= 1, or ``max_delay`` not a number >= 0.
    """

    max_events: int = 64
    max_delay: float = 0.05

    def __post_init__(self) -> None:
        n = self.max_events
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ConfigError(f"max_events must be an int >= 1, got {n!r}")
        d = self.max_delay
        if isinstance(d, bool) or not isinstance(d, int | float) or not 0 <= d < math.inf:
            raise ConfigError(f"max_delay must be a finite number of seconds >= 0, got {d!r}")


@dataclass(slots=True)
class _RunBuffer:
    """The pending events of one run, and what it knows of its attempts."""

    run_id: str
    log: Any
    items: list[tuple[str, str]] = field(default_factory=list)
    first_at: float = 0.0
    attempts: dict[str, tuple[int, int]] = field(default_factory=dict)  # pos -> (epoch, att)
    counts: dict[str, int] = field(default_factory=dict)  # pos -> events of its attempt
    seen: set[str] | None = None  # positions with events in the stream (read once, lazily)
    error: BaseException | None = None  # the last failed background write
    limit: int = 0  # the largest payload the stream accepts (0: no limit)


class TokenHub:
    """The app's token streams: buffers per run, one background writer thread.

    Args:
        open_log: opens the ``StreamLog`` of a stream name (the app's storage).
        batching: the batching rule.
        clock: real seconds (``time.monotonic``) for the batching delay.
        codec: the app's payload codec: events are stored through it, as journal values.
        url: the journal's URL, redacted (for errors).
    """

    def __init__(
        self,
        open_log: Any,
        batching: Batching,
        clock: Any = time.monotonic,
        codec: PayloadCodec | None = None,
        url: str = "",
    ) -> None:
        self._open = open_log
        self._url = url
        values = StoredValues(url, codec, None)
        self.encode, self.decode = values.enc, values.dec  # the app's payload codec, if any
        self.batching = batching
        self._clock = clock
        self._cond = threading.Condition()
        self._write_lock = threading.Lock()  # batches of one run are written in order
        self._runs: dict[str, _RunBuffer] = {}
        self._thread: threading.Thread | None = None
        self._closed = False
        self.commits = 0  # batches written (one commit each)

    # -- the step side -----------------------------------------------------------------

    def emit(self, run: Any, step: str, pos: str, attempt: int, kind: str, data: Any) -> None:
        """Buffer one event of ``run``'s step at ``pos`` (a marker first, on an attempt's
        first event)."""
        key = (run.epoch, attempt)
        buf = self._buffer(run.run_id)
        run.streaming = True  # its step attempts now end with a flush (see end)
        if buf.attempts.get(pos) != key:
            retry = attempt > 1 or pos in self._seen(buf, run.epoch)
            self._add(run, buf, step, pos, attempt, "retry" if retry else "start", None, key)
        self._add(run, buf, step, pos, attempt, kind, data, key)

    def _add(
        self,
        run: Any,
        buf: _RunBuffer,
        step: str,
        pos: str,
        attempt: int,
        kind: str,
        data: Any,
        key: tuple[int, int],
    ) -> None:
        event = {"step": step, "pos": pos, "epoch": run.epoch, "attempt": attempt}
        event.update(kind=kind, data=data, at=time.time())
        try:
            payload = self.encode(json.dumps(event, ensure_ascii=False, separators=(",", ":")))
        except (TypeError, ValueError) as exc:
            raise ConfigError(
                f"emit() in step {step!r} (position {pos}) got a {type(data).__name__} it "
                f"cannot store as JSON ({exc}); pass text, numbers, lists or dicts"
            ) from None
        # refused here, in the emitting step, not later by the batch it would poison
        check_size(self._url, f"an event of step {step!r} (position {pos})", payload, buf.limit)
        with self._cond:
            if buf.attempts.get(pos) != key:
                buf.attempts[pos] = key
                buf.counts[pos] = 0
            n = buf.counts[pos]
            buf.counts[pos] = n + 1
            if not buf.items:
                buf.first_at = self._clock()
            buf.items.append((f"{pos}/{key[0]}.{key[1]}/{n}", payload or ""))
            if len(buf.items) == 1 or len(buf.items) >= self.batching.max_events:
                self._cond.notify()
        self._start()

    def end(self, run: Any, step: str, pos: str, attempt: int, ok: bool) -> None:
        """The attempt at ``pos`` ended: if it emitted anything, write what is left with an
        ``end`` event now (one commit), before its result is journalled.

        Raises:
            StoreError: the batch could not be written (the attempt fails with it).
        """
        buf = self._runs.get(run.run_id)
        if buf is None or buf.attempts.get(pos) != (run.epoch, attempt):
            return
        self._add(run, buf, step, pos, attempt, "end", {"ok": ok}, (run.epoch, attempt))
        self.flush(run.run_id)

    def flush(self, run_id: str) -> None:
        """Write ``run_id``'s pending events now (in the calling thread)."""
        buf = self._runs.get(run_id)
        if buf is not None:
            self._write(buf, raise_errors=True)

    def close_run(self, run_id: str) -> None:
        """The run stopped executing here: write what is left and forget its buffer."""
        buf = self._runs.get(run_id)
        if buf is None:
            return
        try:
            self._write(buf, raise_errors=False)
        finally:
            with self._cond:
                self._runs.pop(run_id, None)

    # -- readers and retention ---------------------------------------------------------

    def log(self, run_id: str) -> Any:
        """Run ``run_id``'s stream (a ``StreamLog`` that is also ``StreamBatches``).

        Raises:
            ConfigError: the journal's backend keeps no token streams.
        """
        log = self._open(stream_name(run_id))
        if not isinstance(log, StreamBatches):
            raise ConfigError(
                f"token streams need a journal on memory://, sqlite:// or postgresql://; "
                f"{type(log).__name__} cannot append a batch in one transaction"
            )
        return log

    def drop_runs(self, run_ids: Iterable[str]) -> int:
        """Delete the streams of runs ``run_ids`` (pruned); how many events went."""
        return sum(self.log(r).delete() for r in run_ids)

    def close(self) -> None:
        """Write every pending batch and stop the writer thread."""
        for run_id in list(self._runs):
            self.close_run(run_id)
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout=5)
        with self._cond:  # an app used again after close starts a new writer thread
            self._thread = None
            self._closed = False

    # -- inside ------------------------------------------------------------------------

    def _buffer(self, run_id: str) -> _RunBuffer:
        buf = self._runs.get(run_id)
        if buf is None:
            log = self.log(run_id)
            fresh = _RunBuffer(run_id, log, limit=int(log.max_value_bytes or 0))
            with self._cond:
                buf = self._runs.setdefault(run_id, fresh)
        return buf

    def _seen(self, buf: _RunBuffer, epoch: int) -> set[str]:
        """Positions with events in the stream before this execution (a resumed run's
        earlier attempts): read once per run and execution, only after a crash or takeover."""
        if buf.seen is None:
            seen: set[str] = set()
            if epoch > 1:
                after = 0
                while True:
                    page = buf.log.range(after, 1000)
                    if not page:
                        break
                    seen.update(r.message_id.split("/", 1)[0] for r in page)
                    after = page[-1].seq
            buf.seen = seen
        return buf.seen

    def _start(self) -> None:
        if self._thread is None and not self._closed:
            with self._cond:
                if self._thread is None:
                    t = threading.Thread(target=self._loop, name="surefoot-tokens", daemon=True)
                    self._thread = t
                    t.start()

    def _loop(self) -> None:
        """Write each run's batch when it is full or old enough (the batching rule)."""
        rule = self.batching
        while True:
            with self._cond:
                due: list[_RunBuffer] = []
                wait: float | None = None
                while not self._closed:
                    now = self._clock()
                    for buf in self._runs.values():
                        if not buf.items:
                            continue
                        left = buf.first_at + rule.max_delay - now
                        if len(buf.items) >= rule.max_events or left <= 0:
                            due.append(buf)
                        else:
                            wait = left if wait is None else min(wait, left)
                    if due:
                        break
                    self._cond.wait(wait)
                    wait = None
                if self._closed:
                    return
            for buf in due:
                self._write(buf, raise_errors=False)

    def _write(self, buf: _RunBuffer, *, raise_errors: bool) -> None:
        with self._write_lock:
            with self._cond:
                items, buf.items = buf.items, []
            if not items:
                return
            try:
                buf.log.append_many(items, now=time.time())
            except BaseException as exc:
                with self._cond:  # kept, in order, for the next write (max_delay later)
                    buf.items[:0] = items
                    buf.first_at = self._clock()
                    buf.error = exc
                if raise_errors:
                    raise
                return
            self.commits += 1


def emit(data: Any, *, kind: str = "token") -> bool:
    """Publish ``data`` on the durable stream of the run whose step is executing here.

    ``kind`` is ``token`` (text of a model's reply; ``data`` a ``str``) or ``progress``
    (anything JSON can hold: a tool's progress, a framework's event). Readers follow the
    run with ``handle.stream()``, ``surefoot runs follow`` or the SSE endpoint.

    Returns:
        True if it was published; False outside a durable step (nothing is done).

    Raises:
        ConfigError: an unknown ``kind``, a token that is not text, or data JSON cannot hold.
    """
    if kind not in _EMITTED:
        raise ConfigError(f"emit() kind must be 'token' or 'progress', got {kind!r}")
    if kind == "token" and not isinstance(data, str):
        raise ConfigError(
            f"emit() of a token needs text (str), got {type(data).__name__}; "
            "use kind='progress' for other values"
        )
    got = in_step.get()
    if got is None:
        return False
    run, step, pos, attempt = got
    hub = getattr(run, "tokens", None)
    if hub is None:  # a run on another engine: it has no surefoot stream
        return False
    hub.emit(run, step, pos, attempt, kind, data)
    return True
