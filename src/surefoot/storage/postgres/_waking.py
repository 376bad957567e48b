"""Wake-ups on PostgreSQL: ``LISTEN`` on the journal's channels instead of polling (the
``Waking`` of :class:`~._journal.PostgresJournal`).

New pending runs, signals and operator resumes ``NOTIFY`` the wake-up channel with the run
they made claimable (``[run_id, workflow, version, queue]``, see ``Dialect.notify_run``); a
run's end ``NOTIFY``s :data:`END_CHANNEL` with its id (migration 8), so a handle waiting for
its result wakes then. Each listener is a connection of its own, outside the pool.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable

from ..sql.schema import CHANNEL
from ..waking import Wake
from ._db import Listener, PostgresDB

__all__ = ["END_CHANNEL", "PostgresWaking", "wake_of"]

END_CHANNEL = "run_end"
"""The channel a run's end is announced on (migration 8), its payload the run id."""


def wake_of(payload: str) -> Wake:
    """The run a wake-up's payload names (``[run_id, workflow, version, queue]``, as
    ``Dialect.notify_run`` sends it); a bare run id (an older surefoot) names only the run.
    A payload is read as data only (anyone allowed to ``NOTIFY`` can send one)."""
    try:
        got = json.loads(payload)
    except ValueError:
        got = None
    if isinstance(got, list) and len(got) == 4 and all(isinstance(x, str) for x in got[:3]):
        queue = got[3] if isinstance(got[3], str) else None
        return got[0], (got[1], got[2]), queue
    return payload, None, None


class PostgresWaking:
    """The ``Waking`` of one PostgreSQL journal: two listeners, opened on first use."""

    def __init__(self, db: PostgresDB) -> None:
        self.db = db
        self._listener: Listener | None = None
        self._end: Listener | None = None  # run ends (wait_until)
        self._end_lock = threading.Lock()

    def wait_for_work(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds until a run may have become claimable.

        Woken by ``NOTIFY`` when a pending run is created, forked or resumed, or a signal
        wakes a sleeping run. Returns False on timeout; timers and expired leases are found
        by the caller's next poll. A worker calls this instead of sleeping its poll interval.
        """
        if self._listener is None:
            self._listener = self.db.listener(CHANNEL)
        return self._listener.wait(timeout)

    def woken_for(self) -> list[Wake]:
        """The runs the notifications of the last ``wait_for_work`` named: each ``NOTIFY``
        of the journal carries the run it made claimable, with its workflow, version and
        queue (``[run_id, workflow, version, queue]``; a bare run id from an older
        surefoot gives ``(run_id, None, None)``)."""
        return [] if self._listener is None else [wake_of(p) for p in self._listener.payloads]

    def wait_until(self, ready: Callable[[], bool], timeout: float) -> bool:
        """Until ``ready()`` is true (asked now, then after each run's end is announced:
        migration 8) or ``timeout`` seconds; whether it became true. One thread at a time
        listens (one connection per journal); another waits out ``timeout`` and asks once
        more, as a poll would."""
        if not self._end_lock.acquire(blocking=False):
            if ready():
                return True
            time.sleep(timeout)
            return ready()
        try:
            if self._end is None:
                self._end = self.db.listener(END_CHANNEL)
            listener = self._end
            listener.wait(0.0)  # LISTEN before the first look: no end falls in between
            deadline = time.monotonic() + timeout
            while True:
                if ready():
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                listener.wait(left)
        finally:
            self._end_lock.release()

    def close(self) -> None:
        """Close the wake-up and run-end listeners' connections (the pool belongs to the
        storage)."""
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        with self._end_lock:
            if self._end is not None:
                self._end.close()
                self._end = None
