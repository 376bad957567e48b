"""Group commit: the step records of every run on one loop share one transaction.

Records submitted while the loop works through one iteration are committed together in
the next, in one transaction (one fsync), each still fenced by its own run's epoch. One
run alone pays one commit per step; a hundred runs stepping together share one. The
writer is given what it needs: the journal's ``commit`` and the collection of runs
executing here (to tell when a run is alone and may commit inline).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sized

from ..storage.base import RunWrite, StepWrite

__all__ = ["Writer"]


class Writer:
    """Group commit: records submitted in one loop iteration share one transaction."""

    def __init__(
        self, commit: Callable[[list[StepWrite | RunWrite]], list[bool]], active: Sized
    ) -> None:
        self._commit = commit
        self._active = active
        self.starting = 0  # runs handed to the loop whose execution has not begun yet
        self._pending: list[tuple[StepWrite | RunWrite, asyncio.Future[bool]]] = []
        self._scheduled = False
        self.batches = 0

    def alone(self) -> bool:
        """True when a single run executes here: it may commit at once, inline."""
        return len(self._active) <= 1 and not self.starting and not self._pending

    def submit(self, rec: StepWrite | RunWrite) -> asyncio.Future[bool]:
        """Queue ``rec`` for the next commit on the running loop; the future says if it held."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        self._pending.append((rec, fut))
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._flush)
        return fut

    def _flush(self) -> None:
        self._scheduled = False
        batch, self._pending = self._pending, []
        if not batch:
            return
        self.batches += 1
        try:
            oks = self._commit([r for r, _ in batch])
        except BaseException as exc:  # the whole transaction failed: tell every waiter
            for _, f in batch:
                if not f.done():
                    f.set_exception(exc)
            return
        for (_, f), ok in zip(batch, oks, strict=True):
            if not f.done():
                f.set_result(ok)
