"""Store locks on SQLite judged by observation as well as by the wall clock.

A Store lock is a versioned key whose value says until when its holder has it, written by
the holder's wall clock; SQLite has no server clock, so a process whose clock runs ahead
would take a live holder's lock. Each state store writes a token of its own into the
leases it takes (``process``) and holds a liveness lock file for that token (``._liveness``)
from its first lease on. A lease that expired by the claimer's clock is then taken

* at once if the token's lock is free (the process that took it died) or there is none
  (a lease written before, or by a store that could not hold a lock): the wall clock
  decides, as before;
* if that process is alive (maybe paused), only once this process has seen the lease's
  record unchanged (its version) for the lease's whole time to live (``expires_at`` minus
  the record's ``written_at``, both on the holder's clock) on its own monotonic clock.
"""

from __future__ import annotations

import os
import threading
import uuid
import weakref

from ..sql.observed import Sightings
from ..state import StateRecord
from ._liveness import FileLiveness

__all__ = ["ObservedLocks"]


class ObservedLocks:
    """The :class:`~surefoot.storage.state.LeaseWatch` of a SQLite state store.

    Attributes:
        token: written into the leases this store takes (``process``).
    """

    def __init__(self, locks: FileLiveness) -> None:
        self._locks = locks
        self.token = f"{os.getpid()}:{uuid.uuid4().hex[:12]}"
        self._sightings = Sightings()
        self._mutex = threading.Lock()
        self._finalizer = weakref.finalize(self, locks.close)  # at exit: remove the file

    def hold(self) -> None:
        """Hold this store's liveness lock (idempotent; if it cannot, the wall clock
        judges its leases)."""
        with self._mutex:
            self._locks.hold(self.token)

    def may_take(self, key: str, rec: StateRecord, process: str | None, until: float) -> bool:
        """Whether the lease ``rec`` of ``key``, expired by the claimer's clock (``until``:
        its ``expires_at``), taken by the store whose token is ``process``, may be taken
        over now (module docs)."""
        if process is None or process not in self._locks.alive({process}):
            self._sightings.forget(key)
            return True
        seen = self._sightings.unchanged_for(key, rec.version)
        return seen >= until - rec.written_at
