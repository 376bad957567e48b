"""Group commit: the step records of every run on one loop share one transaction.

Records submitted while a commit is in flight (or while the loop works through one
iteration) are committed together in the next transaction (one fsync), each still fenced by
its own run's epoch. While several runs execute, the commit runs on the writer's own thread,
one at a time, so the loop keeps running the other runs while the disk (or the server)
works: a hundred runs stepping together share one commit, and runs waiting on a model call
are not held up by another run's commit. One run alone commits inline, with no thread hop.
The thread is started the first time several runs execute at once and kept until the app
closes (one per app, whatever the number of runs: a sleeping run holds no thread; starting
a thread per burst would also open a database connection per burst). The writer
is given what it needs: the journal's ``commit`` and the collection of runs executing here
(to tell when a run is alone and may commit inline).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable, Sized

from ..storage.runs import Record

__all__ = ["Writer"]

Batch = list[tuple[Record, asyncio.Future[bool]]]


class Writer:
    """Group commit: records submitted while a commit is in flight share the next one."""

    def __init__(self, commit: Callable[[list[Record]], list[bool]], active: Sized) -> None:
        self._commit = commit
        self._active = active
        self.starting = 0  # runs handed to the loop whose execution has not begun yet
        self._pending: Batch = []
        self._scheduled = False
        self._inflight = False
        self._thread: concurrent.futures.ThreadPoolExecutor | None = None
        self._done: concurrent.futures.Future[list[bool]] | None = None  # the last commit sent
        self.batches = 0

    def alone(self) -> bool:
        """True when a single run executes here: it may commit at once, inline."""
        return (
            len(self._active) <= 1
            and not self.starting
            and not self._pending
            and not self._inflight
        )

    def submit(self, rec: Record) -> asyncio.Future[bool]:
        """Queue ``rec`` for the next commit on the running loop; the future says if it held."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        self._pending.append((rec, fut))
        if not self._scheduled and not self._inflight:
            self._scheduled = True
            loop.call_soon(self._flush)
        return fut

    def close(self, wait: float = 10.0) -> None:
        """Stop the commit thread: nothing new starts, and a commit in flight is waited
        for (up to ``wait`` seconds), since the journal's connections are closed next and
        a commit still using one would use a closed SQLite handle (a segfault, seen in
        tests when the thread was left to finish on its own)."""
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.shutdown(wait=False)
        done = self._done
        if done is not None:
            concurrent.futures.wait([done], timeout=wait)

    def _flush(self) -> None:
        self._scheduled = False
        if self._inflight:
            return  # the batch in flight's end flushes what gathered meanwhile
        batch, self._pending = self._pending, []
        if not batch:
            return
        self.batches += 1
        if len(self._active) <= 1:  # one run (a wait and its sleep): nobody else to run
            try:
                oks = self._commit([r for r, _ in batch])
            except BaseException as exc:
                _settle(batch, None, exc)
                return
            _settle(batch, oks, None)
            return
        if self._thread is None:
            self._thread = concurrent.futures.ThreadPoolExecutor(
                1, thread_name_prefix="surefoot-writer"
            )
        loop = asyncio.get_running_loop()
        self._inflight = True
        try:
            done = self._done = self._thread.submit(self._commit, [r for r, _ in batch])
        except RuntimeError as exc:  # the writer was closed: the app is stopping
            self._inflight = False
            _settle(batch, None, exc)
            return

        def back(f: concurrent.futures.Future[list[bool]]) -> None:
            try:
                loop.call_soon_threadsafe(self._landed, batch, f)
            except RuntimeError:  # the loop is closed: nobody waits for these any more
                pass

        done.add_done_callback(back)

    def _landed(self, batch: Batch, f: concurrent.futures.Future[list[bool]]) -> None:
        self._inflight = False
        exc = f.exception()
        _settle(batch, None if exc is not None else f.result(), exc)
        if self._pending and not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)


def _settle(batch: Batch, oks: list[bool] | None, exc: BaseException | None) -> None:
    """Tell every waiter of ``batch`` whether its record held (or the batch's error)."""
    if oks is None:  # the whole transaction failed: tell every waiter
        for _, fut in batch:
            if not fut.done():
                fut.set_exception(exc if exc is not None else RuntimeError("commit failed"))
        return
    for (_, fut), ok in zip(batch, oks, strict=True):
        if not fut.done():
            fut.set_result(ok)
