"""Taking one run in flight from its holder: at once when the holder's process is gone
(its liveness lock is free, as a worker sees it: ``journal.liveness``), otherwise after its
lease; and saying how long that wait is.

Used by ``App.resume`` (``surefoot runs resume``) and by a handle that drives its run
(``start`` again, ``result()``), so they see a SIGKILLed holder as workers do. An app that
executes runs holds its own liveness lock while its journal is open (:func:`hold`), so a
run ``start()``ed in a process that dies is taken over at once too.
"""

from __future__ import annotations

import logging
from typing import Protocol

from ..clock import Clock
from ..storage.journal import Journal
from ..storage.runs import RunRow

__all__ = ["HolderHost", "hold", "lease_left", "take_from_dead_holder"]

log = logging.getLogger("surefoot.durable")


class HolderHost(Protocol):
    """What a takeover reads from its app."""

    @property
    def clock(self) -> Clock: ...
    @property
    def worker_id(self) -> str: ...
    @property
    def lease(self) -> float: ...
    @property
    def journal(self) -> Journal: ...


def hold(host: HolderHost) -> bool:
    """Hold this app's liveness lock (idempotent): its runs in flight are then seen as
    orphaned the moment its process dies. False when the journal has no liveness locks
    or the lock cannot be held (another live process uses this worker id)."""
    liveness = host.journal.liveness
    if liveness is None:
        return False
    try:
        return liveness.hold(host.worker_id, now=host.clock.now())
    except Exception:  # a busy or lost database: the lease still decides
        return False


def held_by_another(host: HolderHost, row: RunRow) -> bool:
    """``row`` is running under another worker's lease that has not run out."""
    return (
        row.status == "running"
        and row.owner is not None
        and row.owner != host.worker_id
        and (row.lease_until or 0) >= host.clock.now()
    )


def take_from_dead_holder(host: HolderHost, row: RunRow) -> int | None:
    """Claim ``row`` at once if it is held by another worker whose process is gone (its
    liveness lock is free); audited ``taken_over`` with reason ``holder_dead``, fenced by
    the epoch it had. The new epoch, or None (not held by another, holder alive or not
    known to be dead, or someone took it first)."""
    liveness = host.journal.liveness
    if liveness is None or not held_by_another(host, row):
        return None
    now = host.clock.now()
    got = liveness.claim_orphans(
        host.worker_id,
        now=now,
        lease_until=now + host.lease,
        workflows=[(row.workflow, row.version)],
        limit=1,
        run_id=row.run_id,
    )
    return got[0][1] if got else None


def lease_left(host: HolderHost, row: RunRow) -> float | None:
    """Seconds until another worker's unexpired lease on ``row`` runs out (None: not
    held by another worker)."""
    if not held_by_another(host, row):
        return None
    return max(0.0, float(row.lease_until or 0) - host.clock.now())
