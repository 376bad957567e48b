"""The journal's parts for issue 13: queues with limits, child runs, schedules, retention.

A mixin of :class:`~.journal.SQLJournal` (it uses the journal's dialect ``self.d``), written
once for SQLite and PostgreSQL like the rest of the journal. Its tables and columns come
from migration 4 of each backend.

* **Queues** (:mod:`.queues`): a run with a ``queue`` is claimed only by
  :meth:`~.queues.JournalQueues.claim_queue`, under the queue's limits, in one transaction.
* **Children** (:mod:`.children`): created in the same transaction as the parent's step
  that names them, only while the parent runs; ended together with the parent's wake-up;
  cancelled with their whole tree.
* **Schedules**: a schedule's ``next_at`` moves forward by compare-and-set in the same
  transaction that creates the tick's runs (whose ids are keyed by the tick), so a tick
  starts exactly one run however many workers fire it.
* **Retention**: finished runs (and their steps and signals; their audit log if asked)
  deleted by age or count, in one transaction.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ...errors import RunConflictError
from ..runs import TERMINAL, RunRow, sql_list
from .children import JournalChildren
from .queues import JournalQueues, QueueLimits

if TYPE_CHECKING:
    from .dialect import Dialect

__all__ = ["PLUS_COLS", "JournalPlus", "QueueLimits"]

#: Run columns of issue 13 that are written at creation (``started_at`` is set by a queue).
PLUS_COLS = "queue, priority, dedup_id, parent_id, deadline_at"
_DONE_SQL = sql_list(TERMINAL)


def _plus_params(row: RunRow) -> tuple[Any, ...]:
    return (row.queue, row.priority, row.dedup_id, row.parent_id, row.deadline_at)


class JournalPlus(JournalQueues, JournalChildren):
    """Queues, children, schedules and retention on the journal's tables (a mixin)."""

    d: Dialect
    url: str
    _get: str
    _audit: str
    STEPS_DELETE: str

    def _plus_init(self) -> None:
        from .journal import CHANNEL, RUN_COLS, RUN_MARKS, SEL

        d = self.d
        self._sel = SEL
        self._channel = CHANNEL
        self._create_plus = d.sql(
            f"INSERT INTO durable_runs ({RUN_COLS}, {PLUS_COLS}) VALUES ({RUN_MARKS}, "
            "?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
        )
        self._by_dedup = d.sql(
            f"SELECT {SEL} FROM durable_runs WHERE queue = ? AND dedup_id = ? "
            f"AND status NOT IN {_DONE_SQL}"
        )
        self._queue_claims = {}
        self._children_init(RUN_COLS, PLUS_COLS)

    # -- runs with queue, dedup, parent or deadline --------------------------------------

    def create_run_plus(self, row: RunRow) -> tuple[RunRow, bool]:
        """Insert ``row`` with its queue, priority, dedup id, parent and deadline.

        Returns (the stored row, created). When ``row.run_id`` exists, the stored row; when
        an unfinished run of the same queue holds ``row.dedup_id``, that run's row.

        Raises:
            RunConflictError: the holder of the dedup id finished in between (try again).
        """
        d = self.d

        def work(c: Any) -> tuple[RunRow, bool]:
            from .journal import row_params

            cur = c.execute(self._create_plus, (*row_params(row), *_plus_params(row)))
            if cur.rowcount == 1:
                detail = json.dumps(
                    {k: v for k, v in (("queue", row.queue), ("parent", row.parent_id)) if v}
                )
                c.execute(
                    self._audit,
                    (row.run_id, row.created_at, row.owner or "app", "created", detail),
                )
                if row.status == "pending":
                    d.notify_run(c, self._channel, row.run_id)
                return row, True
            found = c.execute(self._get, (row.run_id,)).fetchone()
            if found is None and row.dedup_id is not None:
                found = c.execute(self._by_dedup, (row.queue, row.dedup_id)).fetchone()
            if found is None:
                raise RunConflictError(
                    row.run_id,
                    f"run {row.run_id!r} was refused (dedup id {row.dedup_id!r}) and its "
                    "holder finished meanwhile; enqueue it again",
                )
            return RunRow(*found), False

        return d.transaction(work)

    # -- schedules -----------------------------------------------------------------------

    def put_schedule(
        self,
        name: str,
        *,
        workflow: str,
        cron: str,
        args: str,
        catchup: str,
        next_at: float,
        now: float,
    ) -> None:
        """Record a schedule; its ``next_at`` is kept unless its cron expression changed."""
        self.d.write(
            self.d.sql(
                "INSERT INTO durable_schedules (name, workflow, cron, args, catchup, next_at, "
                "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET "
                "workflow = excluded.workflow, args = excluded.args, "
                "catchup = excluded.catchup, next_at = CASE WHEN durable_schedules.cron = "
                "excluded.cron THEN durable_schedules.next_at ELSE excluded.next_at END, "
                "cron = excluded.cron, updated_at = excluded.updated_at"
            ),
            (name, workflow, cron, args, catchup, next_at, now),
            idempotent=True,
        )

    def schedules(self) -> list[tuple[str, str, str, str, str, float]]:
        """(name, workflow, cron, args, catchup, next_at) of every schedule."""
        rows = self.d.read(
            "SELECT name, workflow, cron, args, catchup, next_at FROM durable_schedules "
            "ORDER BY name"
        )
        return [(str(a), str(b), str(c), str(e), str(f), float(g)) for a, b, c, e, f, g in rows]

    def fire_schedule(
        self, name: str, *, expected: float, next_at: float, runs: list[RunRow], now: float
    ) -> int:
        """Move schedule ``name`` from ``expected`` to ``next_at`` and create ``runs``.

        One transaction; nothing happens if another worker moved the schedule first (its
        ``next_at`` is no longer ``expected``), and a run id that exists is not created
        again. Returns the runs created.
        """
        from .journal import row_params

        d = self.d
        move = d.sql(
            "UPDATE durable_schedules SET next_at = ?, updated_at = ? "
            "WHERE name = ? AND next_at = ?"
        )

        def work(c: Any) -> int:
            if c.execute(move, (next_at, now, name, expected)).rowcount != 1:
                return 0
            made = 0
            for row in runs:
                params = (*row_params(row), *_plus_params(row))
                if c.execute(self._create_plus, params).rowcount == 1:
                    made += 1
                    detail = json.dumps({"schedule": name})
                    c.execute(self._audit, (row.run_id, now, "schedule", "created", detail))
                    d.notify_run(c, self._channel, row.run_id)
            return made

        return d.transaction(work)

    # -- retention -----------------------------------------------------------------------

    def prune(
        self,
        *,
        before: float | None = None,
        keep: int | None = None,
        drop_audit: bool = False,
        now: float,
    ) -> list[str]:
        """Delete finished runs ended before ``before``, or beyond the newest ``keep``.

        Only succeeded, failed and cancelled runs go (never a run that may still move),
        and never a child whose parent has not finished (the parent still reads it). Their
        steps and signals go with them; their audit log stays (plus an entry ``pruned``)
        unless ``drop_audit``. Returns the ids deleted.
        """
        d = self.d
        guard = (
            f"status IN {_DONE_SQL} AND (parent_id IS NULL OR parent_id NOT IN (SELECT "
            f"run_id FROM durable_runs WHERE status NOT IN {_DONE_SQL}))"
        )
        old = d.sql(f"SELECT run_id FROM durable_runs WHERE {guard} AND updated_at < ?")
        extra = d.sql(
            f"SELECT run_id FROM durable_runs WHERE {guard} ORDER BY updated_at DESC, "
            f"run_id{d.order_c} LIMIT ? OFFSET ?"
        )
        # chunks after the run row: on PostgreSQL, a late writer holding the run row's share
        # lock has committed its chunks by then (or finds no run and inserts none)
        tables = ["durable_signals", "durable_runs", "durable_chunks"]
        if drop_audit:
            tables.append("durable_audit")
        # the steps first, while the run's row says where they are (SQLite: a range)
        deletes = [d.sql(self.STEPS_DELETE)]
        deletes += [d.sql(f"DELETE FROM {t} WHERE run_id = ?") for t in tables]

        def work(c: Any) -> list[str]:
            ids: dict[str, None] = {}
            if before is not None:
                ids.update((str(r[0]), None) for r in c.execute(old, (before,)).fetchall())
            if keep is not None:
                rows = c.execute(extra, (2**62, int(keep))).fetchall()
                ids.update((str(r[0]), None) for r in rows)
            for run_id in ids:
                for sql in deletes:
                    c.execute(sql, (run_id,))
                if not drop_audit:
                    c.execute(self._audit, (run_id, now, "retention", "pruned", "{}"))
            return list(ids)

        return d.transaction(work)
