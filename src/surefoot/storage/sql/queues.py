"""Named queues with limits in the SQL journal: one claim transaction enforces them all.

The :class:`~surefoot.storage.queues.Queues` part of :class:`~.journal.SQLJournal`, written
once for SQLite and PostgreSQL. Its table and columns come from migration 4.

A run with a ``queue`` is claimed only by :meth:`SQLQueues.claim`, never by the
ordinary claim. A claim of a queue is one transaction that first locks the queue's row
(``FOR UPDATE`` on PostgreSQL; SQLite's write lock serializes it anyway), then counts the
queue's runs executing under a live lease (all workers, and this worker's own), and the
runs the queue started within the rate period, and takes only what the limits leave. So
any number of workers on any number of machines never exceed a queue's limits: the limits
are enforced by the journal, not by the workers' memory.

A run whose holder's process is gone (its liveness lock is free, see :mod:`.liveness`)
still holds an unexpired lease. Given such runs (``orphans``, each with the epoch it had
when it was seen dead), the claim counts them as executing nowhere: their slots are free,
and they are taken over first, each fenced by that epoch (a holder restarted under the
same id that took its run back first wins, and then its run counts as executing again).
A takeover is not a new start, so it never counts against the rate limit.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..queues import Orphan, QueueLimits
from .claims import CLAIM_AUDIT, ORPHAN_AUDIT, claim_audit, resumable
from .dialect import ROWS, Dialect
from .observed import ObservedLeases

__all__ = ["SQLQueues"]


class SQLQueues:
    """Queues and their limits on the journal's tables (see the module docs).

    ``observed``: as :class:`~.claims.SQLClaims`'s (a live holder's expired lease is
    taken only once seen unchanged for a full lease)."""

    def __init__(self, d: Dialect, observed: ObservedLeases | None = None) -> None:
        self.d = d
        self.observed = observed
        self._claims: dict[tuple[int, int], tuple[str, str, str, str, str]] = {}

    def put(self, name: str, limits: QueueLimits, *, now: float) -> None:
        """Record a queue's limits (the last app to declare it wins)."""
        self.d.write(
            self.d.sql(
                "INSERT INTO durable_queues (name, concurrency, worker_concurrency, "
                "rate_limit, rate_period, updated_at) VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (name) DO UPDATE SET concurrency = excluded.concurrency, "
                "worker_concurrency = excluded.worker_concurrency, "
                "rate_limit = excluded.rate_limit, rate_period = excluded.rate_period, "
                "updated_at = excluded.updated_at"
            ),
            (name, *limits, now),
            idempotent=True,
        )

    def limits(self) -> dict[str, QueueLimits]:
        """Every queue recorded in the journal, with its limits."""
        rows = self.d.read(
            "SELECT name, concurrency, worker_concurrency, rate_limit, rate_period "
            "FROM durable_queues ORDER BY name"
        )
        return {str(r[0]): QueueLimits(r[1], r[2], r[3], r[4]) for r in rows}

    def counts(self) -> dict[str, dict[str, int]]:
        """Per queue, how many of its runs are in each status."""
        rows = self.d.read(
            "SELECT queue, status, COUNT(*) FROM durable_runs WHERE queue IS NOT NULL "
            "GROUP BY queue, status"
        )
        out: dict[str, dict[str, int]] = {}
        for q, status, n in rows:
            out.setdefault(str(q), {})[str(status)] = int(n)
        return out

    def _queue_sql(self, n: int, dead: int) -> tuple[str, str, str, str, str]:
        """The statements of a claim of a queue's ``n`` workflows with ``dead`` orphans:
        (resumable runs' UPDATE, new runs' UPDATE, the look-before-lock probe, the count
        of runs executing on live holders, the probe by the wall clock alone), in the
        dialect's spelling."""
        cache = self._claims
        got = cache.get((n, dead))
        if got is not None:
            return got
        d = self.d
        values = ", ".join("(?, ?)" for _ in range(n))
        pairs = ", ".join("(?, ?)" for _ in range(dead))
        # the orphans as they were seen dead: still running, under the same epoch
        orphan = f"(status = 'running' AND (run_id, epoch) IN (VALUES {pairs}))" if dead else ""
        pick = (
            "SELECT run_id FROM durable_runs WHERE queue = ? AND {which} AND "
            f"(workflow, version) IN (VALUES {values}) ORDER BY priority, {{order}}"
        )
        update = (
            "UPDATE durable_runs SET status = 'running', owner = ?, epoch = epoch + 1, "
            "claims = claims + 1, lease_until = ?, updated_at = ?, "
            "started_at = COALESCE(started_at, ?) "
            f"WHERE run_id IN ({pick} LIMIT ?{d.skip_locked}) "
            "RETURNING run_id, epoch, claims"
        )
        resuming = resumable("" if self.observed is None else self.observed.cond)
        which = f"({resuming} OR {orphan})" if dead else resuming
        live = (
            "SELECT COUNT(*) FROM durable_runs WHERE queue = ? AND status = 'running' "
            "AND lease_until >= ?"
        )
        if dead:
            live += f" AND (run_id, epoch) NOT IN (VALUES {pairs})"
        got = (
            d.sql(update.format(which=which, order="COALESCE(wake_at, created_at)")),
            d.sql(update.format(which="status = 'pending'", order="created_at")),
            d.sql(
                f"SELECT 1 FROM durable_runs WHERE queue = ? AND (status = 'pending' OR "
                f"{resuming}) AND (workflow, version) IN (VALUES {values}) LIMIT 1"
            ),
            d.sql(live),
            d.sql(
                f"SELECT 1 FROM durable_runs WHERE queue = ? AND (status = 'pending' OR "
                f"{resumable()}) AND (workflow, version) IN (VALUES {values}) LIMIT 1"
            ),
        )
        cache[n, dead] = got
        return got

    def claim(
        self,
        name: str,
        owner: str,
        *,
        now: float,
        lease_until: float,
        workflows: Sequence[tuple[str, str]],
        limit: int,
        worker_concurrency: int | None = None,
        orphans: Sequence[Orphan] = (),
        how: str = "",
    ) -> list[tuple[str, int]]:
        """Take up to ``limit`` runs of queue ``name`` that its limits allow now.

        Runs the queue already started (due sleepers, expired leases, ``orphans``) come
        first and count against the concurrency limits only; new runs (pending, by
        priority then age) also count against the rate limit. ``worker_concurrency`` (this
        worker's own limit) overrides the one recorded for the queue. ``orphans``: runs of
        the queue whose holder's process is gone (``how``: how that was seen); they count
        as executing nowhere and are taken over first, each only under the epoch it was
        seen with, audited ``taken_over`` with ``holder_dead``. Returns (run_id, new epoch)
        pairs.
        """
        if not workflows or limit <= 0:
            return []
        d = self.d
        resume_sql, new_sql, probe, live, loose = self._queue_sql(len(workflows), len(orphans))
        wf: list[Any] = [x for pair in workflows for x in pair]
        dead: list[Any] = [x for run_id, epoch, _, _ in orphans for x in (run_id, epoch)]
        due: list[Any] = [now, now]
        if self.observed is not None:
            if not orphans and not d.read(loose, (name, now, now, *wf)):
                return []  # nothing claimable even by the wall clock: no vetting
            due.append(self.observed.vet(now, lease_until - now))
        if not orphans and not d.read(probe, (name, *due, *wf)):
            return []  # an idle poll takes no lock and commits nothing
        lock = d.sql(
            "SELECT concurrency, worker_concurrency, rate_limit, rate_period "
            f"FROM durable_queues WHERE name = ?{d.row_lock}"
        )
        count = "SELECT COUNT(*) FROM durable_runs WHERE queue = ? AND "
        mine = d.sql(count + "status = 'running' AND lease_until >= ? AND owner = ?")
        recent = d.sql(count + "started_at > ?")
        audit = claim_audit(d, owner, now).params
        orphan = claim_audit(d, owner, now, "holder_dead").params
        seen = {run_id: (holder, until) for run_id, _, holder, until in orphans}

        def work(c: Any) -> list[tuple[str, int]]:
            cfg = c.execute(lock, (name,)).fetchone()
            conc, wconc, rate, period = cfg if cfg is not None else (None, None, None, None)
            if worker_concurrency is not None:
                wconc = worker_concurrency
            budget = limit
            if conc is not None:  # a dead holder's runs execute nowhere: their slots are free
                held = int(c.execute(live, (name, now, *dead)).fetchone()[0])
                budget = min(budget, int(conc) - held)
            if wconc is not None:
                held = int(c.execute(mine, (name, now, owner)).fetchone()[0])
                budget = min(budget, int(wconc) - held)
            if budget <= 0:
                return []
            head = (owner, lease_until, now, now, name)
            got = c.execute(resume_sql, (*head, *due, *dead, *wf, budget)).fetchall()
            budget -= len(got)
            if rate is not None and period is not None:
                started = int(c.execute(recent, (name, now - float(period))).fetchone()[0])
                budget = min(budget, int(rate) - started)
            if budget > 0:
                got += c.execute(new_sql, (*head, *wf, budget)).fetchall()
            # each claim's audit entry, in this transaction (no extra commit)
            plain = [r[0] for r in got if r[0] not in seen]
            if plain:
                marks = ", ".join("?" for _ in plain)
                src = f"(SELECT * FROM durable_runs WHERE run_id IN ({marks})) AS claimed"
                c.execute(d.sql(CLAIM_AUDIT.replace(ROWS, src)), (*audit, *plain))
            for r in got:
                if r[0] in seen:
                    holder, until = seen[r[0]]
                    gone = json.dumps({"holder": holder, "lease_until": until, "how": how})
                    src = "(SELECT * FROM durable_runs WHERE run_id = ?) AS claimed"
                    c.execute(d.sql(ORPHAN_AUDIT.replace(ROWS, src)), (*orphan, gone, r[0]))
            return [(str(r[0]), int(r[1])) for r in got]

        return d.transaction(work)
