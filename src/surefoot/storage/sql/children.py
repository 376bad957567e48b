"""Child runs in the SQL journal: created with the parent's step, ended with its wake-up,
cancelled with their tree.

The :class:`~surefoot.storage.children.Children` part of :class:`~.journal.SQLJournal`,
written once for SQLite and PostgreSQL; the columns come from migration 4. The journal's
``commit`` calls its in-transaction hooks (:meth:`SQLChildren.lock_first`,
:meth:`SQLChildren.write_child`, :meth:`SQLChildren.tell_parent`).

* **Creating**: a :class:`~surefoot.storage.runs.ChildWrite` is one record of a batch
  (:meth:`SQLChildren.write_child`): the child's row is inserted only while the parent
  is ``running`` at the writer's epoch (``FOR SHARE`` on the parent's row on PostgreSQL,
  as a step is), and the parent's step that names the child is journalled in the same
  transaction, only if the child then exists as the parent's child. So a parent resumed
  after a crash at any point finds its child or creates it (never two), and a parent
  cancelled or taken over meanwhile creates none.
* **Ending**: the same transaction that ends a child queues the signal ``child:<id>`` for
  its parent and wakes the parent if it sleeps waiting for it (the parent's sleep sees an
  already-queued signal, as for any signal, so nothing is lost in between).
* **Cancelling** a run cancels its unfinished descendants in one transaction. On
  PostgreSQL the tree is read again after its rows are locked, until no new child turned
  up: a child whose creation committed while the tree was read is cancelled with it, and
  one still being created waits for the lock of its parent's row and then finds the
  parent's epoch moved on (it creates nothing).

Lock order (PostgreSQL): every transaction that locks several run rows locks them in
run-id byte order (``COLLATE "C"``), as heartbeats and group commits do. A child's id sorts
after its parent's (``<parent>:<pos>``), so a batch that ends a child, and a cancelled
tree, first lock all the rows they will touch, parents included, in that order
(:meth:`SQLChildren.lock_first`); without it, a child's finish (child, then parent) and
a heartbeat or a cancel holding the parent (parent, then child) could deadlock. A tree that
grew while it was locked is locked again from the start (its locks released back to a
savepoint), so that order holds there too.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from ...errors import UnknownRunError
from ..rowsum import step_sum
from ..runs import TERMINAL, ChildWrite, RunRow, RunStatus, RunWrite
from .dialect import Dialect
from .schema import (
    AUDIT_SQL,
    CHANNEL,
    F8,
    OPEN,
    RUN_COLS,
    SEL,
    TEXT,
    TYPED_RUN_MARKS,
    StepSQL,
    run_params,
)

__all__ = ["SQLChildren"]


class SQLChildren:
    """Children on the journal's tables (see the module docs).

    Args:
        d: the journal's dialect. steps: the backend's step statements (the parent's step
            of a new child is one of them).
    """

    def __init__(self, d: Dialect, steps: StepSQL) -> None:
        self.d = d
        self._ordered = steps.ordered
        self._summed = steps.summed
        self._get = d.sql(f"SELECT {SEL} FROM durable_runs WHERE run_id = ?")
        self._audit = d.sql(AUDIT_SQL)
        # a child's end key-share-locks its parent's row, as ``signal`` does (no lost wake-up)
        self._lock_parent = d.sql("SELECT 1 FROM durable_runs WHERE run_id = ?" + d.key_share)
        self._child_signal = d.sql(
            "INSERT INTO durable_signals (run_id, name, payload, signal_id, sent_at) "
            f"SELECT {TEXT}, {TEXT}, {TEXT}, {TEXT}, {F8} WHERE EXISTS (SELECT 1 FROM "
            "durable_runs WHERE run_id = ? AND epoch = ? AND status = ?) "
            "ON CONFLICT (run_id, signal_id) DO NOTHING"
        )
        self._wake_parent = d.sql(
            "UPDATE durable_runs SET wake_at = ? WHERE run_id = ? AND status = 'sleeping' "
            f"AND {d.member('waiting_for', TEXT)} AND EXISTS (SELECT 1 FROM durable_runs c "
            "WHERE c.run_id = ? AND c.epoch = ? AND c.status = ?)"
        )
        self._lock_rows = d.sql(
            f"SELECT run_id FROM durable_runs WHERE {d.any_of('run_id')} "
            f"ORDER BY run_id{d.order_c} FOR NO KEY UPDATE"
        )
        # a new child's row from the parent's row while it runs at the writer's epoch
        self._new_child = d.sql(
            f"INSERT INTO durable_runs ({RUN_COLS}) SELECT {TYPED_RUN_MARKS} "
            "FROM durable_runs WHERE run_id = ? AND epoch = ? AND status = 'running'"
            f"{d.share_lock} ON CONFLICT (run_id) DO NOTHING"
        )
        # once per child: a batch re-sent after a lost reply, or a resumed parent whose
        # child exists, adds no second entry
        self._child_created = d.sql(
            "INSERT INTO durable_audit (run_id, at, actor, action, detail) SELECT "
            f"{TEXT}, {F8}, 'app', 'created', {TEXT} WHERE EXISTS (SELECT 1 FROM "
            "durable_runs WHERE run_id = ? AND parent_id = ?) AND NOT EXISTS (SELECT 1 "
            "FROM durable_audit WHERE run_id = ? AND action = 'created')"
        )
        self._child_step = d.sql(steps.child.format(share_lock=d.share_lock))

    def lock_first(self, records: Sequence[Any]) -> list[str] | None:
        """PostgreSQL: the run ids a batch locks first (in run-id order, see the module
        docs) because one of ``records`` ends a child and so updates its parent; else None.
        """
        if not self.d.row_lock:
            return None  # SQLite: the whole file is locked
        parents = [
            r.parent
            for r in records
            if type(r) is RunWrite and r.parent is not None and r.status in TERMINAL
        ]
        if not parents:
            return None
        return sorted({*parents, *(r.run_id for r in records)}, key=str.encode)

    def lock_rows(self, c: Any, run_ids: list[str]) -> None:
        """In ``c``'s transaction, lock the rows of ``run_ids`` in run-id order."""
        c.execute(self._lock_rows, (self.d.array(run_ids),))

    def write_child(self, c: Any, r: ChildWrite) -> Any:
        """In a batch's transaction: create ``r.child`` if the parent still runs at the
        writer's epoch, then journal the parent's ``r.step`` if the child is the parent's
        (see :class:`~surefoot.storage.runs.ChildWrite`). Returns the step's cursor: its
        row count says whether the record was applied."""
        kid, w = r.child, r.step
        parent = w.run_id
        if kid.parent_id != parent:  # a child is the writer's, whatever its row said
            kid = dataclasses.replace(kid, parent_id=parent)
        c.execute(self._new_child, (*run_params(kid), parent, w.epoch))
        detail = json.dumps({"parent": parent})
        once = (kid.run_id, kid.created_at, detail, kid.run_id, parent, kid.run_id)
        c.execute(self._child_created, once)
        self.d.notify_run(c, CHANNEL, kid.run_id)
        return c.execute(
            self._child_step,
            (
                parent, w.pos, w.name, w.kind, w.status, w.result, w.error, w.attempts,
                w.epoch, w.started_at, w.finished_at, parent, w.epoch,
                kid.run_id, parent, kid.workflow, kid.args,
                *((w.order,) if self._ordered else ()),
                *((step_sum(w.pos, w.name, w.kind, w.status, w.result, w.error),)
                  if self._summed else ()),
            ),
        )  # fmt: skip

    def tell_parent(self, c: Any, r: RunWrite) -> None:
        """In ``r``'s transaction: signal its parent that the child ended, and wake it."""
        if r.status not in TERMINAL or r.parent is None:
            return
        name = f"child:{r.run_id}"
        if self.d.key_share:
            c.execute(self._lock_parent, (r.parent,))
        c.execute(
            self._child_signal, (r.parent, name, "null", name, r.now, r.run_id, r.epoch, r.status)
        )
        c.execute(self._wake_parent, (r.now, r.parent, name, r.run_id, r.epoch, r.status))
        self.d.notify_run(c, CHANNEL, r.parent)

    def of(self, run_id: str) -> list[RunRow]:
        """The runs started by ``run_id`` as children, oldest first."""
        rows = self.d.read(
            self.d.sql(
                f"SELECT {SEL} FROM durable_runs WHERE parent_id = ? "
                f"ORDER BY created_at, run_id{self.d.order_c}"
            ),
            (run_id,),
        )
        return [RunRow(*r) for r in rows]

    def cancel_tree(self, run_id: str, *, now: float, actor: str, detail: str) -> list[str]:
        """Cancel ``run_id`` and its unfinished descendants in one transaction.

        Each cancelled run's epoch goes up (a worker running it is fenced off, and a child
        it is creating now is not created) and gets an audit entry ``cancel``
        (descendants: with ``{"parent_cancelled": <root>}``). If the root is itself a child,
        its parent is signalled as when a child ends. Returns the ids cancelled (empty
        when the root had already ended).

        Raises:
            UnknownRunError: no such run.
        """
        d = self.d
        tree = d.sql(
            f"WITH RECURSIVE tree(id) AS (SELECT {TEXT} UNION SELECT r.run_id FROM "
            "durable_runs r JOIN tree ON r.parent_id = tree.id) SELECT id FROM tree"
        )
        move = d.sql(
            "UPDATE durable_runs SET status = 'cancelled', epoch = epoch + 1, owner = NULL, "
            "claims = 0, lease_until = NULL, wake_at = NULL, waiting_for = NULL, "
            f"updated_at = ? WHERE run_id = ? AND {d.any_of('status')} "
            "RETURNING run_id, epoch, parent_id"
        )

        def read(c: Any) -> list[str]:
            return [str(r[0]) for r in c.execute(tree, (run_id,)).fetchall()]

        def work(c: Any) -> list[str]:
            top = c.execute(self._get, (run_id,)).fetchone()
            if not top:
                raise UnknownRunError(run_id, self.d.url)
            ids = read(c)
            if d.row_lock:  # the tree and the root's parent, in run-id order, and no new child
                ids = self._lock_tree(c, ids, RunRow(*top).parent_id, read)
            done: list[str] = []
            for i in ids:
                got = c.execute(move, (now, i, d.array(OPEN))).fetchone()
                if got is None:
                    continue
                done.append(i)
                text = detail if i == run_id else json.dumps({"parent_cancelled": run_id})
                c.execute(self._audit, (i, now, actor, "cancel", text))
                if i == run_id and got[2] is not None:
                    w = RunWrite(
                        i, int(got[1]), RunStatus.CANCELLED.value, now, actor, parent=str(got[2])
                    )
                    self.tell_parent(c, w)
            return done

        return d.transaction(work)

    def _lock_tree(self, c: Any, ids: list[str], parent: str | None, read: Any) -> list[str]:
        """PostgreSQL: lock the rows of tree ``ids`` (and the root's ``parent``) in run-id
        order, then read the tree again: a child committed before the locks were taken
        shows now (a child created after waits for its parent's lock, then creates
        nothing). While the tree grew, start over from a savepoint (its locks released),
        so every row is locked in run-id order. Returns the whole tree."""
        while True:
            c.execute("SAVEPOINT surefoot_tree")
            self.lock_rows(c, sorted({*ids, *([parent] if parent else [])}, key=str.encode))
            again = read(c)
            if set(again) <= set(ids):
                c.execute("RELEASE SAVEPOINT surefoot_tree")
                return ids
            c.execute("ROLLBACK TO SAVEPOINT surefoot_tree")
            ids = list(dict.fromkeys([*ids, *again]))
