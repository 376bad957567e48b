"""Wake-ups on SQLite: a worker or a handle waits for a commit to the file instead of
sleeping its poll interval (the ``Waking`` of :class:`~._journal.SQLiteJournal`).

Every connection's commit writes the file's ``-wal``; the file watch of ``._changes`` wakes
a waiter on it, in any process. A waiter then looks at what it waits for (a few index
lookups) and waits again if that has not moved.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..waking import Wake
from ._db import SQLiteDB

__all__ = ["SQLiteWaking"]

# What moves when a run may have become claimable (see SQLiteWaking.wait_for_work).
_WORK_MARKS = (
    "SELECT (SELECT MAX(rowid) FROM durable_runs), (SELECT MAX(id) FROM durable_signals), "
    "(SELECT MAX(updated_at) FROM durable_runs WHERE status = 'pending')"
)


class SQLiteWaking:
    """The ``Waking`` of one SQLite journal."""

    def __init__(self, db: SQLiteDB) -> None:
        self.db = db
        self._work_marks: tuple[Any, ...] | None = None

    def wait_for_work(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds until a run may have become claimable: since the
        last call returned, a run was created, one was made pending again (a retry, a fork,
        a resume) or a signal was sent, by any connection (woken through the file watch,
        see ``_changes``). Returns False on timeout; timers and expired leases are found by
        the caller's next poll. A worker calls this instead of sleeping its poll interval,
        as on PostgreSQL (``LISTEN``); the first call only takes the marks to compare with.
        """
        last = self._work_marks
        if last is None:
            self._work_marks = self._marks()
            return False
        now = [last]

        def moved() -> bool:
            now[0] = self._marks()
            return now[0] != last

        got = self.wait_until(moved, timeout)
        self._work_marks = now[0]
        return got

    def woken_for(self) -> list[Wake]:
        """Nothing: a commit to the file does not say which run it made claimable."""
        return []

    def _marks(self) -> tuple[Any, ...]:
        """The newest run, the newest signal and the last time a run was made pending
        (three index lookups)."""
        return tuple(self.db.read(_WORK_MARKS)[0])

    def wait_until(self, ready: Callable[[], bool], timeout: float) -> bool:
        """Until ``ready()`` is true (asked now, then after each commit another connection
        makes to the file) or ``timeout`` seconds; whether it became true. A waiter wakes
        on the commit, not at its next poll (see ``_changes``)."""
        return self.db.wait_for_commit(ready, timeout)

    def close(self) -> None:
        """Nothing to release: the file watch belongs to the database."""
