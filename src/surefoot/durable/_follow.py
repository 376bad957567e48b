"""Durable token streams, the reading side: follow a run's events live, resume by offset.

``handle.stream(after=…)`` returns a :class:`RunStream`, iterated with ``for`` or ``async
for``. Each :class:`StreamEvent` has an ``offset`` (its sequence number in the run's stream,
from 1); a reader that lost its connection, or crashed, passes the last offset it handled
as ``after`` and gets every later event once. ``surefoot runs follow`` and the SSE endpoint
(``id:`` is the offset, ``Last-Event-ID`` is honoured) use the same offsets.

A stream ends when the run has ended (succeeded, failed, cancelled or needs_attention) and
every event written before its end was read; ``follow=False`` ends at the events there now.

Attempts: a ``retry`` event for a position means the text held for that position is void
(its next ``token`` events are the new attempt's). Events of an older attempt of a position
that come after a newer attempt's marker (a worker that lost its lease and still wrote) are
dropped, by a reader resumed from an offset too: it first learns each position's newest
attempt from the events up to its offset, so every reader of a stream hands out the same
events whatever offsets it resumed from. :func:`step_texts` folds events into each
position's text of its last attempt.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError, UnknownRunError
from ..storage.runs import ENDED

__all__ = ["RunStream", "StreamEvent", "step_texts"]

_PAGE = 500
_RECALL = 1000  # events read per page when a resumed reader learns the attempts before it


def _attempt_of(message_id: str) -> tuple[str, int, int] | None:
    """(pos, epoch, attempt) from a token writer's message id ``<pos>/<epoch>.<attempt>/<n>``,
    or None for an id of another form."""
    parts = message_id.rsplit("/", 2)
    if len(parts) != 3 or not parts[2].isdigit():
        return None
    epoch, _, attempt = parts[1].partition(".")
    if not (epoch.isdigit() and attempt.isdigit()):
        return None
    return parts[0], int(epoch), int(attempt)


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One event of a run's token stream.

    Attributes:
        offset: its place in the run's stream (resume with ``after=offset``).
        step: the step's name. pos: its position (``"3"``, ``"2.1"``).
        epoch: the lease epoch of the execution that emitted it. attempt: the attempt.
        kind: ``start`` (first attempt's first event), ``retry`` (a later attempt: drop the
            position's text so far), ``token`` (``data`` is text), ``progress`` (any JSON
            value), ``end`` (the attempt ended; ``data`` is ``{"ok": bool}``).
        data: the payload. at: wall-clock seconds when it was emitted.
    """

    offset: int
    step: str
    pos: str
    epoch: int
    attempt: int
    kind: str
    data: Any
    at: float

    def to_json(self) -> str:
        """The event as one line of JSON (what the SSE endpoint sends as ``data:``)."""
        fields = {"offset": self.offset, "step": self.step, "pos": self.pos}
        fields.update(epoch=self.epoch, attempt=self.attempt, kind=self.kind)
        fields.update(data=self.data, at=self.at)
        return json.dumps(fields, ensure_ascii=False, separators=(",", ":"))


def _event(seq: int, payload: str) -> StreamEvent:
    e = json.loads(payload)
    return StreamEvent(
        seq, e["step"], e["pos"], e["epoch"], e["attempt"], e["kind"], e["data"], e["at"]
    )


def check_after(after: Any) -> int:
    """An offset to read after, as an int (a ``Last-Event-ID`` header is text).

    Raises:
        ConfigError: naming the value, when it is not a whole number >= 0.
    """
    try:
        n = int(after) if isinstance(after, str) and after.strip().isdigit() else after
    except ValueError:  # pragma: no cover - isdigit said it was digits
        n = after
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ConfigError(
            f"after must be an offset >= 0 (the last event offset you read, 0 for the "
            f"start), got {after!r}"
        )
    return n


class RunStream:
    """The events of one run after an offset; iterate it with ``for`` or ``async for``.

    Args:
        log: the run's ``StreamLog``. status: reads the run's status (None: no such run).
        run_id: the run. after: the offset to read after (0: from the start).
        follow: wait for new events until the run ends (False: stop at the current end).
        poll: seconds between looks at the run's status while no event comes.
        timeout: seconds after which a followed stream stops even if the run goes on.
        decode: turns a stored payload back into the event's JSON (the app's payload codec).

    Attributes:
        after: the offset of the last event handed out (resume from it).
        executor: where ``async for`` runs its blocking waits (None: the event loop's
            default executor, a few threads; a server with many followers gives its own).
    """

    def __init__(
        self,
        log: Any,
        status: Callable[[], str | None],
        run_id: str,
        *,
        after: int = 0,
        follow: bool = True,
        poll: float = 0.2,
        timeout: float | None = None,
        decode: Callable[[str], str | None] | None = None,
    ) -> None:
        self._log = log
        self._decode = decode
        self.executor: Executor | None = None  # where ``async for`` waits (None: the default)
        self._status = status
        self.run_id = run_id
        self.after = check_after(after)
        self.follow = follow
        self.poll = poll
        self.timeout = timeout
        self._latest: dict[str, tuple[int, int]] = {}  # pos -> newest (epoch, attempt) seen
        self._recalled = self.after == 0  # the events up to ``after`` were taken into account
        self._quiet = True  # no event came in the last wait (or none was made yet)

    def _keep(self, ev: StreamEvent) -> bool:
        """False for an event of an attempt older than one already announced for its
        position (a zombie's late write)."""
        key = (ev.epoch, ev.attempt)
        newest = self._latest.get(ev.pos)
        if newest is not None and key < newest:
            return False
        if newest is None or key > newest:
            self._latest[ev.pos] = key
        return True

    def _decoded(self, rec: Any) -> StreamEvent:
        payload = rec.payload if self._decode is None else self._decode(rec.payload)
        return _event(rec.seq, payload or "")

    def _recall(self) -> None:
        """Learn the newest attempt of each position from the events up to ``after``, as
        a reader that read them all would have: a reader resumed after a newer attempt's
        marker drops a zombie's late write as an unbroken one does. The writer's message
        ids (``<pos>/<epoch>.<attempt>/<n>``) say it without decoding; other ids are read."""
        end, seen = self.after, 0
        while seen < end:
            page = self._log.range(seen, min(_RECALL, end - seen))
            if not page:
                break
            for rec in page:
                if rec.seq > end:
                    return
                key = _attempt_of(rec.message_id)
                if key is None:
                    ev = self._decoded(rec)
                    key = (ev.pos, ev.epoch, ev.attempt)
                pos, epoch, attempt = key
                newest = self._latest.get(pos)
                if newest is None or (epoch, attempt) > newest:
                    self._latest[pos] = (epoch, attempt)
            seen = page[-1].seq

    def _page(self) -> list[StreamEvent]:
        if not self._recalled:
            self._recalled = True
            self._recall()
        out = []
        for rec in self._log.range(self.after, _PAGE):
            self.after = rec.seq
            ev = self._decoded(rec)
            if self._keep(ev):
                out.append(ev)
        return out

    def _ended(self) -> bool:
        status = self._status()
        if status is None:
            raise UnknownRunError(self.run_id, "")
        return status in ENDED

    def _step(self, deadline: float | None) -> tuple[list[StreamEvent], bool]:
        """(the next events, whether the stream is over) — one blocking step."""
        page = self._page()
        if page:
            return page, False
        if not self.follow:
            return [], True
        # the run's status is read when nothing came for a while (first, or after a wait
        # that timed out), not at every wake-up: events wake the reader, its end does not
        if self._quiet and self._ended():  # its events were written before it ended
            rest: list[StreamEvent] = []
            while page := self._page():
                rest += page
            return rest, True
        if deadline is not None and time.monotonic() >= deadline:
            return [], True
        wait = self.poll if deadline is None else min(self.poll, deadline - time.monotonic())
        self._quiet = not self._log.wait(self.after, max(0.0, wait))
        return [], False

    def __iter__(self) -> Iterator[StreamEvent]:
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        while True:
            events, done = self._step(deadline)
            yield from events
            if done:
                return

    async def _aiter(self) -> AsyncIterator[StreamEvent]:
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        loop = asyncio.get_running_loop()
        while True:  # the blocking waits run in threads (``executor``, or the loop's default)
            events, done = await loop.run_in_executor(self.executor, self._step, deadline)
            for ev in events:
                yield ev
            if done:
                return

    def __aiter__(self) -> AsyncIterator[StreamEvent]:
        return self._aiter()


def step_texts(events: Iterable[StreamEvent]) -> dict[str, str]:
    """Each position's text of its last attempt: ``token`` data joined, restarted at every
    ``retry`` (and ``start``) of the position."""
    texts: dict[str, list[str]] = {}
    for ev in events:
        if ev.kind in ("start", "retry"):
            texts[ev.pos] = []
        elif ev.kind == "token":
            texts.setdefault(ev.pos, []).append(ev.data)
    return {pos: "".join(parts) for pos, parts in texts.items()}
