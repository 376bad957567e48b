"""Liveness in the SQL journal: which workers' processes are gone, and taking their runs.

The :class:`~surefoot.storage.liveness.Liveness` part of :class:`~.journal.SQLJournal`,
written once for SQLite and PostgreSQL. The backend gives it its :class:`LivenessLocks`
(lock files on SQLite, advisory locks on PostgreSQL; None when it has none: then a worker's
lock is never held and only leases decide).

* A serving worker holds its lock for the life of its app and says so in its
  ``durable_workers`` row (``liveness``), before its first claim.
* An idle worker looks for running runs whose lease has not expired and whose holder's
  lock is free (its process is gone), and takes them over at once, each fenced by the
  epoch it had when it was looked at. Runs in a named queue are taken over by the queue's
  own claim, which counts them as executing nowhere, so the queue's limits still hold
  (:mod:`.queues`).
* What a killed worker leaves behind (a lock file on SQLite) is swept once no run of
  the dead worker is left running (:meth:`SQLLiveness.sweep`).
* Wake-ups (PostgreSQL) rank the live workers serving a run's workflow, and for a queued
  run those taking part in its queue (:meth:`SQLLiveness.serving`): a worker
  whose lock is free is not live.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from ..liveness import Serving
from ..queues import Orphan
from .claims import claim_update, orphan_audit
from .dialect import Dialect
from .queues import SQLQueues
from .schema import workflow_pairs

__all__ = ["SWEEP_EVERY", "LivenessLocks", "SQLLiveness"]

SWEEP_EVERY = 60.0
"""Seconds between a journal's sweeps of what dead workers left (on top of the sweep when
a worker starts and when it took a dead holder's last runs over)."""

# Running runs with an unexpired lease whose holder said it holds a liveness lock
# (``durable_workers.liveness``): the candidates of ``claim_orphans``.
_ORPHANS_SQL = (
    "SELECT r.run_id, r.epoch, r.owner, r.workflow, r.version, r.lease_until, r.queue "
    "FROM durable_runs r JOIN durable_workers w ON w.worker_id = r.owner "
    "WHERE r.status = 'running' AND r.lease_until >= ? AND r.owner <> ? "
    "AND w.liveness IS NOT NULL ORDER BY r.lease_until LIMIT 1000"
)
# The same, for one run by id (resume): the run is in any queue or none.
_ORPHAN_SQL = (
    "SELECT r.run_id, r.epoch, r.owner, r.workflow, r.version, r.lease_until, NULL "
    "FROM durable_runs r JOIN durable_workers w ON w.worker_id = r.owner "
    "WHERE r.status = 'running' AND r.lease_until >= ? AND r.owner <> ? "
    "AND w.liveness IS NOT NULL AND r.run_id = ?"
)


def _queues(text: str | None) -> frozenset[str] | None:
    """The queue names of a ``durable_workers.queues`` JSON array (None when absent)."""
    if text is None:
        return None
    try:
        names = json.loads(text)
    except ValueError:
        return None
    return frozenset(str(n) for n in names) if isinstance(names, list) else None


class LivenessLocks(Protocol):
    """How a backend tells that a worker's process is gone: a lock each serving worker
    holds for the life of its process.

    Attributes:
        kind: how (``flock``, ``advisory``), recorded in the worker's row and in takeovers.
    """

    kind: str

    def hold(self, worker_id: str) -> bool:
        """Hold ``worker_id``'s lock (again after a lost connection); False if it cannot."""
        ...

    def dead(self, owners: set[str]) -> set[str]:
        """Those of ``owners`` (worker ids) whose lock is free: their process is gone."""
        ...

    def sweep(
        self, running: Callable[[Sequence[str]], set[str]], only: set[str] | None = None
    ) -> list[str]:
        """Remove what dead workers left behind (``running``: those of the given worker ids
        that still hold a running run keep theirs); the worker ids cleaned up."""
        ...

    def close(self) -> None:
        """Let go of the locks held here."""
        ...


class SQLLiveness:
    """Liveness locks, takeovers of dead holders' runs, and sweeping what they left.

    Args:
        d: the journal's dialect. locks: the backend's liveness locks (None: it has none).
        queues: the journal's queues, whose claim takes over a dead holder's queued runs.
    """

    def __init__(self, d: Dialect, locks: LivenessLocks | None, queues: SQLQueues) -> None:
        self.d = d
        self.locks = locks
        self._queues = queues
        self._orphans = d.sql(_ORPHANS_SQL)
        self._orphan = d.sql(_ORPHAN_SQL)
        # a dead holder's run, exactly as it was seen: still running, at the same epoch
        self._take = claim_update(d, "run_id = ? AND epoch = ? AND status = 'running'")
        self._marked: set[str] = set()
        self._swept_at: float | None = None
        self._busy = d.sql(
            "SELECT DISTINCT owner FROM durable_runs WHERE status = 'running' "
            f"AND {d.any_of('owner')}"
        )

    def hold(self, worker_id: str, *, now: float) -> bool:
        """Hold ``worker_id``'s liveness lock for as long as this journal is open, and say
        so in its worker row (once); False when it cannot be held (leases still decide).

        Called by a serving worker before it claims, and at every heartbeat (a lost
        PostgreSQL connection is reconnected and the lock taken again). The first time,
        it also sweeps what dead workers left.
        """
        lv = self.locks
        if lv is None or not lv.hold(worker_id):
            return False
        if worker_id not in self._marked:
            self.d.write(
                self.d.sql(
                    "INSERT INTO durable_workers (worker_id, workflows, seen_at, liveness) "
                    "VALUES (?, '', ?, ?) ON CONFLICT (worker_id) DO UPDATE "
                    "SET liveness = excluded.liveness"
                ),
                (worker_id, float(now), lv.kind),
                idempotent=True,
            )
            self._marked.add(worker_id)
            self.sweep()
        return True

    def claim_orphans(
        self,
        owner: str,
        *,
        now: float,
        lease_until: float,
        workflows: list[tuple[str, str]],
        limit: int,
        queues: Mapping[str, int | None] | None = None,
        run_id: str | None = None,
    ) -> list[tuple[str, int]]:
        """Take over up to ``limit`` running runs of ``workflows`` whose lease has not
        expired but whose holder's process is gone (its liveness lock is free).

        Each claim is fenced by the epoch the run had when it was looked at (a restarted
        holder that took it back first wins); it is audited ``taken_over`` like any
        claim of a run in flight, in the same transaction, its detail's ``holder_dead``
        naming the holder, the lease not waited out and how. Runs in a named queue are
        taken only from ``queues`` (name -> this worker's ``worker_concurrency``), by
        the queue's claim, which counts them as executing nowhere and keeps the queue's
        limits. ``run_id``: only that run, taken directly whatever its queue (a resume by
        id, as ``claim(run_id=…)``). Returns (run_id, new epoch) pairs.
        """
        lv = self.locks
        if lv is None or limit < 1 or not workflows:
            return []
        self.sweep()  # at most every SWEEP_EVERY seconds
        offered = set(workflows)
        mine = queues or {}
        found = (
            self.d.read(self._orphans, (float(now), owner))
            if run_id is None
            else self.d.read(self._orphan, (float(now), owner, run_id))
        )
        held = [
            (str(r), int(e), str(o), float(until), None if q is None else str(q))
            for r, e, o, w, v, until, q in found
            if (str(w), str(v)) in offered and (q is None or str(q) in mine)
        ]
        if not held:
            return []
        dead = lv.dead({o for _, _, o, _, _ in held})
        got: list[tuple[str, int]] = []
        queued: dict[str, list[Orphan]] = {}
        for run_id, epoch, holder, until, queue in held:
            if holder not in dead:
                continue
            if queue is not None:
                queued.setdefault(queue, []).append(Orphan(run_id, epoch, holder, until))
                continue
            if len(got) >= limit:
                continue
            rows = self.d.poll_write(
                self._take,
                (owner, lease_until, now, run_id, epoch),
                None,
                orphan_audit(self.d, owner, now, holder, until, lv.kind),
            )
            got += [(str(r[0]), int(r[1])) for r in rows]
        for queue, orphans in sorted(queued.items()):
            if len(got) >= limit:
                break
            got += self._queues.claim(
                queue,
                owner,
                now=now,
                lease_until=lease_until,
                workflows=workflows,
                limit=limit - len(got),
                worker_concurrency=mine[queue],
                orphans=orphans,
                how=lv.kind,
            )
        if got:
            self.sweep(only=dead)  # their last runs may have moved: their leftovers
        return got

    def sweep(self, *, only: set[str] | None = None, force: bool = False) -> list[str]:
        """Remove what dead workers left behind (SQLite's lock files) once none of their
        runs is still running: a dead holder's runs need its lock file to be taken over
        before their lease expires. ``only``: just these worker ids (now); otherwise
        every worker, at most every :data:`SWEEP_EVERY` seconds unless ``force``.
        Returns the worker ids whose leftovers were removed.
        """
        lv = self.locks
        if lv is None:
            return []
        if only is None:
            t = time.monotonic()
            if not force and self._swept_at is not None and t - self._swept_at < SWEEP_EVERY:
                return []
            self._swept_at = t
        removed: list[str] = lv.sweep(self._running_owners, only)
        return removed

    def _running_owners(self, owners: Sequence[str]) -> set[str]:
        """Those of ``owners`` that hold a running run (whatever its lease)."""
        if not owners:
            return set()
        rows = self.d.read(self._busy, (self.d.array(sorted(owners)),))
        return {str(r[0]) for r in rows}

    def serving(self, *, now: float) -> dict[str, Serving]:
        """The workers serving now, each with what it serves (:class:`Serving`).

        Serving: its advertisement (``seen_at``) has not run out, and, for a worker that
        said it holds a liveness lock, that lock is still held (a killed worker drops out
        at once instead of three leases later).
        """
        rows = self.d.read(
            self.d.sql(
                "SELECT worker_id, workflows, liveness, queues FROM durable_workers "
                "WHERE seen_at >= ?"
            ),
            (float(now),),
        )
        out = {str(w): Serving(set(workflow_pairs(text)), _queues(q)) for w, text, _, q in rows}
        locked = {str(w) for w, _, how, _ in rows if how is not None}
        lv = self.locks
        if lv is not None and locked:
            for gone in lv.dead(locked):
                out.pop(gone, None)
        return out

    def close(self) -> None:
        """Let go of this journal's liveness locks (the storage owns the connections)."""
        if self.locks is not None:
            self.locks.close()
