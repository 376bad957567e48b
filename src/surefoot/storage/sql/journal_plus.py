"""The journal's parts for issue 13: queues with limits, child runs, schedules, retention.

A mixin of :class:`~.journal.SQLJournal` (it uses the journal's dialect ``self.d``), written
once for SQLite and PostgreSQL like the rest of the journal. Its tables and columns come
from migration 4 of each backend.

* **Queues** (:mod:`.queues`): a run with a ``queue`` is claimed only by
  :meth:`~.queues.JournalQueues.claim_queue`, under the queue's limits, in one transaction.
* **Children**: when a child run ends, the same transaction that ends it queues the signal
  ``child:<id>`` for its parent and wakes the parent if it sleeps waiting for it (the
  parent's sleep sees an already-queued signal, as for any signal, so nothing is lost in
  between). Cancelling a run cancels its unfinished descendants in one transaction.
  Lock order (PostgreSQL): every transaction that locks several run rows locks them in
  run-id byte order (``COLLATE "C"``), as heartbeats and group commits do. A child's id
  sorts after its parent's (``<parent>:<pos>``), so a batch that ends a child, and a
  cancelled tree, first lock all the rows they will touch, parents included, in that
  order (:meth:`JournalPlus.lock_first`); without it, a child's finish (child, then parent)
  and a heartbeat or a cancel holding the parent (parent, then child) could deadlock.
* **Schedules**: a schedule's ``next_at`` moves forward by compare-and-set in the same
  transaction that creates the tick's runs (whose ids are keyed by the tick), so a tick
  starts exactly one run however many workers fire it.
* **Retention**: finished runs (and their steps and signals; their audit log if asked)
  deleted by age or count, in one transaction.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...errors import RunConflictError, UnknownRunError
from ..base import RunRow, RunWrite
from .queues import JournalQueues, QueueLimits

if TYPE_CHECKING:
    from .dialect import Dialect

__all__ = ["DONE_STATUSES", "PLUS_COLS", "JournalPlus", "QueueLimits"]

#: Run columns of issue 13 that are written at creation (``started_at`` is set by a queue).
PLUS_COLS = "queue, priority, dedup_id, parent_id, deadline_at"
DONE_STATUSES = ("succeeded", "failed", "cancelled")
_DONE_SQL = "('succeeded', 'failed', 'cancelled')"
_OPEN = ("pending", "running", "sleeping", "needs_attention")
_TEXT = "CAST(? AS TEXT)"
_F8 = "CAST(? AS DOUBLE PRECISION)"


def _plus_params(row: RunRow) -> tuple[Any, ...]:
    return (row.queue, row.priority, row.dedup_id, row.parent_id, row.deadline_at)


class JournalPlus(JournalQueues):
    """Queues, children, schedules and retention on the journal's tables (a mixin)."""

    d: Dialect
    url: str
    _get: str
    _audit: str

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
        # a child's end key-share-locks its parent's row, as ``signal`` does (no lost wake-up)
        self._lock_parent = d.sql("SELECT 1 FROM durable_runs WHERE run_id = ?" + d.key_share)
        self._child_signal = d.sql(
            "INSERT INTO durable_signals (run_id, name, payload, signal_id, sent_at) "
            f"SELECT {_TEXT}, {_TEXT}, {_TEXT}, {_TEXT}, {_F8} WHERE EXISTS (SELECT 1 FROM "
            "durable_runs WHERE run_id = ? AND epoch = ? AND status = ?) "
            "ON CONFLICT (run_id, signal_id) DO NOTHING"
        )
        self._wake_parent = d.sql(
            "UPDATE durable_runs SET wake_at = ? WHERE run_id = ? AND status = 'sleeping' "
            f"AND {d.member('waiting_for', _TEXT)} AND EXISTS (SELECT 1 FROM durable_runs c "
            "WHERE c.run_id = ? AND c.epoch = ? AND c.status = ?)"
        )
        self._queue_claims = {}
        self._lock_rows = d.sql(
            f"SELECT run_id FROM durable_runs WHERE {d.any_of('run_id')} "
            f"ORDER BY run_id{d.order_c} FOR NO KEY UPDATE"
        )

    def lock_first(self, records: Sequence[Any]) -> list[str] | None:
        """PostgreSQL: the run ids a batch locks first (in run-id order, see the module
        docs) because one of ``records`` ends a child and so updates its parent; else None.
        """
        if not self.d.row_lock:
            return None  # SQLite: the whole file is locked
        parents = [
            r.parent
            for r in records
            if type(r) is RunWrite and r.parent is not None and r.status in DONE_STATUSES
        ]
        if not parents:
            return None
        return sorted({*parents, *(r.run_id for r in records)}, key=str.encode)

    def lock_rows(self, c: Any, run_ids: list[str]) -> None:
        """In ``c``'s transaction, lock the rows of ``run_ids`` in run-id order."""
        c.execute(self._lock_rows, (self.d.array(run_ids),))

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

    def _tell_parent(self, c: Any, r: RunWrite) -> None:
        """In ``r``'s transaction: signal its parent that the child ended, and wake it."""
        if r.status not in DONE_STATUSES or r.parent is None:
            return
        name = f"child:{r.run_id}"
        if self.d.key_share:
            c.execute(self._lock_parent, (r.parent,))
        c.execute(
            self._child_signal, (r.parent, name, "null", name, r.now, r.run_id, r.epoch, r.status)
        )
        c.execute(self._wake_parent, (r.now, r.parent, name, r.run_id, r.epoch, r.status))
        self.d.notify_run(c, self._channel, r.parent)

    def children(self, run_id: str) -> list[RunRow]:
        """The runs started by ``run_id`` as children, oldest first."""
        rows = self.d.read(
            self.d.sql(
                f"SELECT {self._sel} FROM durable_runs WHERE parent_id = ? "
                f"ORDER BY created_at, run_id{self.d.order_c}"
            ),
            (run_id,),
        )
        return [RunRow(*r) for r in rows]

    def cancel_tree(self, run_id: str, *, now: float, actor: str, detail: str) -> list[str]:
        """Cancel ``run_id`` and its unfinished descendants in one transaction.

        Each cancelled run's epoch goes up (a worker running it is fenced off) and gets an
        audit entry ``cancel`` (descendants: with ``{"parent_cancelled": <root>}``). If the
        root is itself a child, its parent is signalled as when a child ends. Returns the
        ids cancelled (empty when the root had already ended).

        Raises:
            UnknownRunError: no such run.
        """
        d = self.d
        tree = d.sql(
            f"WITH RECURSIVE tree(id) AS (SELECT {_TEXT} UNION SELECT r.run_id FROM "
            "durable_runs r JOIN tree ON r.parent_id = tree.id) SELECT id FROM tree"
        )
        move = d.sql(
            "UPDATE durable_runs SET status = 'cancelled', epoch = epoch + 1, owner = NULL, "
            "claims = 0, lease_until = NULL, wake_at = NULL, waiting_for = NULL, "
            f"updated_at = ? WHERE run_id = ? AND {d.any_of('status')} "
            "RETURNING run_id, epoch, parent_id"
        )

        def work(c: Any) -> list[str]:
            top = c.execute(self._get, (run_id,)).fetchone()
            if not top:
                raise UnknownRunError(run_id, self.url)
            ids = [str(r[0]) for r in c.execute(tree, (run_id,)).fetchall()]
            if d.row_lock:  # the tree and the root's parent, in run-id order
                parent = RunRow(*top).parent_id
                self.lock_rows(c, sorted({*ids, *([parent] if parent else [])}, key=str.encode))
            done: list[str] = []
            for i in ids:
                got = c.execute(move, (now, i, d.array(_OPEN))).fetchone()
                if got is None:
                    continue
                done.append(i)
                text = detail if i == run_id else json.dumps({"parent_cancelled": run_id})
                c.execute(self._audit, (i, now, actor, "cancel", text))
                if i == run_id and got[2] is not None:
                    w = RunWrite(i, int(got[1]), "cancelled", now, actor, parent=str(got[2]))
                    self._tell_parent(c, w)
            return done

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
        tables = ["durable_steps", "durable_signals", "durable_runs", "durable_chunks"]
        if drop_audit:
            tables.append("durable_audit")
        deletes = [d.sql(f"DELETE FROM {t} WHERE run_id = ?") for t in tables]

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
