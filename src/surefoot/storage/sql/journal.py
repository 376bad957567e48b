"""The durable journal in SQL, written once for SQLite and PostgreSQL.

Runs, steps, leases, timers, signals and the audit log (see ``Journal`` in
``surefoot.storage.base``). Every statement is written here once, with ``?`` placeholders;
the backend's :class:`~surefoot.storage.sql.dialect.Dialect` spells the few fragments that
differ and runs the statements. A backend subclass keeps only what truly differs: its
migrations, how a run is created (PostgreSQL: one statement that also audits and notifies),
the heartbeat (PostgreSQL: one statement over arrays) and PostgreSQL's wake-ups.

Every write of a running run is fenced by the lease epoch: a step is one
``INSERT … SELECT … FROM durable_runs WHERE run_id = ? AND epoch = ? [FOR SHARE] ON CONFLICT
… DO UPDATE``, so a zombie worker's late write inserts nothing and is reported as refused.
``commit`` writes a batch in one transaction (one commit), so steps of many runs that finish
together share one fsync; every statement of a batch is conditional in SQL (no statement
needs the answer of an earlier one), so PostgreSQL pipelines the batch into one round trip
and may send it again after a lost reply.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from typing import Any

from ...errors import ConfigError, RunConflictError, StoreError, UnknownRunError
from ..checks import check_size
from ..runs import AuditRow, ChildWrite, Record, RunRow, RunWrite, StepRow, StepWrite
from .chunks import ChunkStore, ChunkWrite
from .dialect import Dialect
from .journal_plus import PLUS_COLS, JournalPlus
from .liveness import JournalLiveness
from .runs import SQLRunQueries, claim_audit

__all__ = [
    "AUDIT_SQL",
    "CHANNEL",
    "FINISH_SQL",
    "RUN_COLS",
    "RUN_MARKS",
    "SEL",
    "STEP_SQL",
    "STEP_TYPES",
    "SQLJournal",
    "row_params",
    "step_params",
]

#: The NOTIFY channel of new work (PostgreSQL; SQLite's dialect ignores notifications).
CHANNEL = "durable_work"

RUN_COLS = (
    "run_id, workflow, version, structure_hash, args, strategy, status, created_at, "
    "updated_at, result, error, owner, epoch, lease_until, wake_at, waiting_for, forked_from"
)
RUN_MARKS = ", ".join("?" * 17)
# read back with the claim counter and the columns of issue 13 (see .journal_plus)
SEL = RUN_COLS + ", claims, " + PLUS_COLS + ", started_at"
_EPOCH = SEL.split(", ").index("epoch")
_STEP_COLS = (
    "run_id, pos, name, kind, status, result, error, attempts, epoch, started_at, finished_at"
)
_TEXT = "CAST(? AS TEXT)"  # PostgreSQL cannot infer a NULL's type in a SELECT list
_F8 = "CAST(? AS DOUBLE PRECISION)"

STEP_SQL = (
    f"INSERT INTO durable_steps ({_STEP_COLS}) SELECT ?, ?, ?, ?, ?, {_TEXT}, {_TEXT}, ?, ?, "
    f"?, {_F8} FROM durable_runs WHERE run_id = ? AND epoch = ?{{share_lock}} "
    "ON CONFLICT (run_id, pos) DO UPDATE SET status = excluded.status, "
    "result = excluded.result, error = excluded.error, attempts = excluded.attempts, "
    "epoch = excluded.epoch, finished_at = excluded.finished_at"
)
#: The SQL types of :data:`STEP_SQL`'s parameters (see ``Dialect.prepare``).
STEP_TYPES = ("text",) * 7 + ("int4", "int8", "float8", "float8", "text", "int8")
# Consumed only if the step's write went through (the run still has the writer's epoch).
_CONSUME_SQL = (
    "UPDATE durable_signals SET consumed_pos = ? WHERE id = ? AND consumed_pos IS NULL "
    "AND EXISTS (SELECT 1 FROM durable_runs WHERE run_id = ? AND epoch = ?)"
)
#: A run's end (not a sleep): ``status, result, error, updated_at, run_id, epoch``.
FINISH_SQL = (
    f"UPDATE durable_runs SET status = ?, result = {_TEXT}, error = {_TEXT}, owner = NULL, "
    "lease_until = NULL, wake_at = NULL, waiting_for = NULL, updated_at = ? "
    "WHERE run_id = ? AND epoch = ?"
)
_SLEEP_SQL = (
    "UPDATE durable_runs SET status = 'sleeping', owner = NULL, lease_until = NULL, claims = 0, "
    f"waiting_for = {_TEXT}, updated_at = ?, wake_at = CASE WHEN {_TEXT} IS NOT NULL AND "
    "EXISTS (SELECT 1 FROM durable_signals WHERE run_id = ? AND consumed_pos IS NULL AND "
    f"{{member}}) THEN {_F8} ELSE {_F8} END WHERE run_id = ? AND epoch = ?"
)
AUDIT_SQL = "INSERT INTO durable_audit (run_id, at, actor, action, detail) VALUES (?, ?, ?, ?, ?)"
# Appended only if the run write went through: a finish or sleep keeps the epoch, so the
# run has the writer's epoch and the new status exactly when the write was applied.
# The NOT EXISTS makes a batch safe to re-send after a lost reply: the same entry (same run,
# time, actor, action, detail) is not appended twice.
_AUDIT_IF_SQL = (
    f"INSERT INTO durable_audit (run_id, at, actor, action, detail) SELECT ?, {_F8}, {_TEXT}, "
    f"{_TEXT}, {_TEXT} "
    "WHERE EXISTS (SELECT 1 FROM durable_runs WHERE run_id = ? AND epoch = ? AND status = ?) "
    "AND NOT EXISTS (SELECT 1 FROM durable_audit WHERE run_id = ? AND at = ? "
    "AND actor = ? AND action = ? AND detail = ?)"
)
_CLAIMABLE = (
    "(status = 'pending' OR (status = 'sleeping' AND wake_at IS NOT NULL AND wake_at <= ?) "
    "OR (status = 'running' AND (lease_until IS NULL OR lease_until < ?)))"
)


def step_params(r: StepWrite) -> tuple[Any, ...]:
    """The parameters of :data:`STEP_SQL` for ``r``."""
    return (
        r.run_id, r.pos, r.name, r.kind, r.status, r.result, r.error, r.attempts, r.epoch,
        r.started_at, r.finished_at, r.run_id, r.epoch,
    )  # fmt: skip


MAX_ORDER = 16_777_215  # 2**24 - 1: the most steps one run journals where orders are kept


def row_params(row: RunRow) -> tuple[Any, ...]:
    """The parameters of an insert of ``row`` into :data:`RUN_COLS`."""
    return (
        row.run_id, row.workflow, row.version, row.structure_hash, row.args, row.strategy,
        row.status, row.created_at, row.updated_at, row.result, row.error, row.owner,
        row.epoch, row.lease_until, row.wake_at, row.waiting_for, row.forked_from,
    )  # fmt: skip


def _workflows_text(workflows: list[tuple[str, str]]) -> str:
    return ";".join(f"{n}@{v}" for n, v in sorted(workflows))


class SQLJournal(JournalPlus, SQLRunQueries, ChunkStore, JournalLiveness):
    """The ``Journal`` protocol in SQL, on one backend's :class:`Dialect`.

    Subclasses run their migrations, then call ``super().__init__(dialect)``; they
    implement :meth:`create_run` and :meth:`heartbeat`, which differ by backend.
    """

    _sel = SEL
    # The step table's statements, by what they are given: SQLite's keep a run's steps in
    # one range of one b-tree (its journal), so they differ; ``{seq}`` is the dialect's.
    STEP_STATEMENT = STEP_SQL  # step_args(r); ``{share_lock}`` is the dialect's
    # (run_id,)
    STEPS_OF_RUN = (
        f"SELECT {_STEP_COLS}, {{seq}} FROM durable_steps WHERE run_id = ? ORDER BY {{seq}}"
    )
    STEP_AT = "SELECT {seq} FROM durable_steps WHERE run_id = ? AND pos = ?"  # (run_id, pos)
    STEP_DELETE = "DELETE FROM durable_steps WHERE run_id = ? AND pos = ?"  # (run_id, pos)
    STEPS_DELETE = "DELETE FROM durable_steps WHERE run_id = ?"  # (run_id,)
    # (new run id, run id, the step's seq): the steps journalled before it, in order
    STEPS_COPY = (
        f"INSERT INTO durable_steps ({_STEP_COLS}) SELECT ?, pos, name, kind, status, "
        "result, error, attempts, 0, started_at, finished_at FROM durable_steps "
        "WHERE run_id = ? AND {seq} < ? AND status IN ('done', 'error') ORDER BY {seq}"
    )
    ORDERED_STEPS = False  # True: step statements also take the record's ``order``
    STEP_FOUND = ""  # ORDERED_STEPS: the step statement for a record without an order

    def __init__(self, dialect: Dialect) -> None:
        d = self.d = dialect
        self.url = dialect.url
        self.step_args: Callable[[StepWrite], tuple[Any, ...]] = (
            self._ordered_step_params if self.ORDERED_STEPS else step_params
        )
        statement = self.STEP_STATEMENT.format(share_lock=d.share_lock)
        self._step = d.sql(statement)
        self._step_found = d.sql(self.STEP_FOUND) if self.ORDERED_STEPS else self._step
        # the hot path: one step, one statement, prepared once per connection
        self._write_step = d.prepare(statement, STEP_TYPES, idempotent=True)
        self._consume = d.sql(_CONSUME_SQL)
        self._finish = d.sql(FINISH_SQL)
        self._sleep = d.sql(_SLEEP_SQL.format(member=d.member(_TEXT, "name")))
        self._audit = d.sql(AUDIT_SQL)
        self._audit_if = d.sql(_AUDIT_IF_SQL)
        self._get = d.sql(f"SELECT {SEL} FROM durable_runs WHERE run_id = ?")
        # Where rows lock (PostgreSQL, READ COMMITTED): a run that goes to sleep for a signal
        # locks its row FOR UPDATE in a statement of its own before the sleep's UPDATE, and
        # a signal (or a child's end) takes FOR KEY SHARE on it before inserting; the two
        # conflict, so the sleep's look for a waiting signal takes its snapshot after any
        # signal that came first has committed, and a signal that comes after the sleep
        # sees the run sleeping. Without them a signal committed between the sleep
        # statement's snapshot and its row update was seen by neither side: the run slept
        # forever with its signal queued (2 of 200 agent runs under 4 workers, seen in
        # bench_postgres.py). KEY SHARE does not conflict with the NO KEY UPDATE locks of
        # heartbeats, claims and plain updates, so a signaller never waits on (or
        # deadlocks with) them.
        self._lock_run = d.sql("SELECT 1 FROM durable_runs WHERE run_id = ?" + d.row_lock)
        self._limit = d.max_value_bytes
        self._claims: dict[tuple[str, int], tuple[str, str | None]] = {}
        self._plus_init()
        self._liveness_init()

    # -- runs --------------------------------------------------------------------------

    def _ordered_step_params(self, r: StepWrite) -> tuple[Any, ...]:
        """:func:`step_params` and the record's journal ``order`` (ORDERED_STEPS).

        Raises:
            StoreError: the run has journalled ``MAX_ORDER`` positions already.
        """
        if r.order is not None and r.order > MAX_ORDER:
            raise StoreError(
                self.url,
                f"run {r.run_id!r} would journal its {r.order:,}th step; a run holds at "
                f"most {MAX_ORDER:,} in this journal. Split the work into child runs, or "
                "keep the journal on PostgreSQL.",
            )
        return (
            r.run_id, r.pos, r.name, r.kind, r.status, r.result, r.error, r.attempts,
            r.epoch, r.started_at, r.finished_at, r.run_id, r.epoch, r.order,
        )  # fmt: skip

    def create_run(self, row: RunRow) -> tuple[RunRow, bool]:
        """Insert ``row`` unless the run id exists; return (the stored row, created)."""
        raise NotImplementedError

    def _check_values(self, records: list[Record] | list[StepWrite]) -> None:
        """Refuse step and run results over the store's ``max_value_bytes``.

        Raises:
            ValueTooLargeError: naming the step (or run), its size and the limit.
        """
        limit = self.d.max_value_bytes
        for r in records:
            if isinstance(r, ChildWrite):  # a new child: its arguments, and the parent's step
                self._check_run(r.child)
                r = r.step
            if isinstance(r, StepWrite):
                what = f"the result of step {r.pos} ({r.name!r}) of run {r.run_id!r}"
            else:
                what = f"the result of run {r.run_id!r}"
            check_size(self.url, what, r.result, limit)

    def _check_run(self, row: RunRow) -> None:
        """Refuse a run whose arguments are over the store's ``max_value_bytes``."""
        what = f"the arguments of run {row.run_id!r}"
        check_size(self.url, what, row.args, self.d.max_value_bytes)

    def get_run(self, run_id: str) -> RunRow | None:
        rows = self.d.read(self._get, (run_id,))
        return RunRow(*rows[0]) if rows else None

    def list_runs(
        self, *, status: str | None = None, workflow: str | None = None, limit: int = 100
    ) -> list[RunRow]:
        where, params = [], []
        if status is not None:
            where.append("status = ?")
            params.append(status)
        if workflow is not None:
            where.append("workflow = ?")
            params.append(workflow)
        sql = f"SELECT {SEL} FROM durable_runs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += f" ORDER BY created_at DESC, run_id{self.d.order_c} LIMIT ?"
        return [RunRow(*r) for r in self.d.read(self.d.sql(sql), (*params, int(limit)))]

    def steps(self, run_id: str) -> list[StepRow]:
        sql = self.d.sql(self.STEPS_OF_RUN.format(seq=self.d.step_seq))
        return [StepRow(*r) for r in self.d.read(sql, (run_id,))]

    # -- the hot path ------------------------------------------------------------------

    def commit(self, records: list[Record], chunks: list[ChunkWrite] | None = None) -> list[bool]:
        """Apply ``records`` in one transaction; per record, was the writer's epoch current?

        One step without a signal to consume is one statement; a batch is one transaction
        (pipelined on PostgreSQL). ``chunks``: the nodes of chunked step results
        (:mod:`.chunks`), inserted in the same transaction.
        """
        if not records:
            return []
        if chunks is None and len(records) == 1:
            only = records[0]
            if (
                type(only) is StepWrite
                and only.consume_signal is None
                and (only.order is not None or not self.ORDERED_STEPS)
            ):
                text, limit = only.result, self._limit
                if text is not None and limit and len(text) * 4 > limit:
                    self._check_values(records)  # only a long text can be over the limit
                # Re-applying the same step row is harmless, so a lost reply may be retried.
                return [self._write_step(self.step_args(only)) == 1]
        self._check_values(records)

        # PostgreSQL locks run rows in run-id order (a stable sort keeps each run's records
        # in order), as its heartbeat does, so a batch and a heartbeat never deadlock.
        # SQLite locks the whole file, so its batch keeps the given order.
        n = len(records)
        order = (
            sorted(range(n), key=lambda i: records[i].run_id.encode())
            if self.d.row_lock
            else range(n)
        )
        first = self.lock_first(records)  # a child's end updates its parent: see .children

        def batch(c: Any) -> list[Any]:
            counted: list[Any] = [None] * n
            ex = c.execute
            if first is not None:
                self.lock_rows(c, first)
            for i in order:
                r = records[i]
                if type(r) is StepWrite:
                    step = self._step if r.order is not None else self._step_found
                    counted[i] = ex(step, self.step_args(r))
                    if r.consume_signal is not None:
                        ex(self._consume, (r.pos, r.consume_signal, r.run_id, r.epoch))
                elif type(r) is RunWrite:
                    counted[i] = self._run_write(c, r)
                else:  # a child run and its parent's step (.children)
                    counted[i] = self.write_child(c, r)  # type: ignore[arg-type]
            if chunks:  # chunked values' nodes, fenced by epoch; run rows already locked
                self.put_chunks(c, chunks)
            return counted

        # Every statement of a batch is conditional and re-applies to the same state (the
        # step upsert, the signal consumption, the epoch-checked run write, the deduplicated
        # audit entries), so a batch whose reply was lost may be sent again.
        return [cur.rowcount == 1 for cur in self.d.batch(batch, idempotent=True)]

    def _run_write(self, c: Any, r: RunWrite) -> Any:
        if r.status == "sleeping":
            w = r.waiting_for
            if w is not None and self.d.row_lock:
                c.execute(self._lock_run, (r.run_id,))  # see __init__: no lost wake-up
            cur = c.execute(
                self._sleep, (w, r.now, w, r.run_id, w, r.now, r.wake_at, r.run_id, r.epoch)
            )
        else:
            cur = c.execute(self._finish, (r.status, r.result, r.error, r.now, r.run_id, r.epoch))
            if r.parent is not None:
                self._tell_parent(c, r)
        for action, detail in r.audit:
            entry = (r.run_id, r.now, r.actor, action, detail)
            c.execute(self._audit_if, (*entry, r.run_id, r.epoch, r.status, *entry))
        return cur

    # -- leases ------------------------------------------------------------------------

    def claim(
        self,
        owner: str,
        *,
        now: float,
        lease_until: float,
        workflows: list[tuple[str, str]],
        limit: int,
        run_id: str | None = None,
        force: bool = False,
    ) -> list[tuple[str, int]]:
        """Take up to ``limit`` claimable runs of ``workflows`` (or exactly ``run_id``).

        Claimable: pending; sleeping and due; running with an expired lease. With ``force``
        (``run_id`` only), also a running run whose lease is held by ``owner`` itself (this
        worker's previous life) or a sleeping run that is not yet due. Returns (run_id, new
        epoch) pairs; the epoch goes up by one, fencing the previous holder. On PostgreSQL,
        runs locked by another claimer are skipped.
        """
        if run_id is not None:
            params: list[Any] = [run_id, owner, now] if force else [run_id, now, now]
            shape: tuple[str, int] = ("force" if force else "one", 0)
        else:
            if not workflows:
                return []
            params = [now, now]
            for w in workflows:
                params += [w[0], w[1]]
            params.append(int(limit))
            shape = ("queue", len(workflows))
        update, probe = self._claims.get(shape) or self._claim_sql(shape)
        # Re-sending a claim whose reply was lost is safe: the runs it took stay fenced to
        # this owner until their lease runs out, then any worker claims them again.
        rows = self.d.poll_write(
            update,
            (owner, lease_until, now, *params),
            None if probe is None else (probe, params),
            claim_audit(self.d, owner, now),  # claimed / taken_over, in the same commit
        )
        return [(str(r[0]), int(r[1])) for r in rows]

    def _claim_sql(self, shape: tuple[str, int]) -> tuple[str, str | None]:
        """The claim's UPDATE and its look-before-lock probe, built once per shape: a
        single run (``one``, or ``force``d) or the queue of ``n`` workflows."""
        mode, n = shape
        probe: str | None = None
        if mode == "orphan":  # a dead holder's run, exactly as it was seen (see claim_orphans)
            cond = "run_id = ? AND epoch = ? AND status = 'running'"
        elif mode == "force":
            cond = (
                "run_id = ? AND (status IN ('pending', 'sleeping') OR (status = 'running' AND "
                "(owner = ? OR lease_until IS NULL OR lease_until < ?)))"
            )
        elif mode == "one":
            cond = f"run_id = ? AND {_CLAIMABLE}"
        else:
            values = ", ".join("(?, ?)" for _ in range(n))
            # Runs in a named queue are claimed by ``claim_queue``, under its limits.
            cond = (
                f"run_id IN (SELECT run_id FROM durable_runs WHERE {_CLAIMABLE} AND "
                "queue IS NULL AND "
                f"(workflow, version) IN (VALUES {values}) "
                f"ORDER BY COALESCE(wake_at, created_at) LIMIT ?{self.d.skip_locked})"
            )
            # An idle worker polls often: SQLite looks before taking the write lock.
            probe = self.d.sql(f"SELECT 1 FROM durable_runs WHERE {cond} LIMIT 1")
        update = self.d.sql(
            "UPDATE durable_runs SET status = 'running', owner = ?, epoch = epoch + 1, "
            "claims = claims + 1, "
            f"lease_until = ?, updated_at = ? WHERE {cond} RETURNING run_id, epoch, claims"
        )
        self._claims[shape] = (update, probe)
        return update, probe

    def heartbeat(
        self, owner: str, runs: list[tuple[str, int]], *, lease_until: float, now: float
    ) -> list[str]:
        """Extend the leases ``owner`` holds; return the run ids it no longer holds."""
        raise NotImplementedError

    # -- operators ---------------------------------------------------------------------

    def operator(
        self,
        run_id: str,
        *,
        status: str,
        from_statuses: tuple[str, ...],
        now: float,
        actor: str,
        action: str,
        detail: str,
        reset_steps: list[str] | None = None,
        put_steps: list[StepWrite] | None = None,
    ) -> RunRow | None:
        """Move a run to ``status`` if it is in ``from_statuses``, fencing any holder.

        Bumps the epoch (a worker still running it is refused at its next write), deletes
        the ``reset_steps`` rows (so they run again), writes the ``put_steps`` rows (under
        the new epoch; e.g. an outcome a person resolved) and appends an audit entry, in one
        transaction. Returns the updated row, or None if the run was in another status.

        Raises:
            UnknownRunError: no such run.
        """
        d = self.d
        self._check_values(put_steps or [])
        exists = d.sql("SELECT 1 FROM durable_runs WHERE run_id = ?" + d.row_lock)
        move = d.sql(
            "UPDATE durable_runs SET status = ?, epoch = epoch + 1, owner = NULL, claims = 0, "
            "lease_until = NULL, wake_at = NULL, waiting_for = NULL, updated_at = ? "
            f"WHERE run_id = ? AND {d.any_of('status')} RETURNING {SEL}"
        )
        delete = d.sql(self.STEP_DELETE)

        def work(c: Any) -> RunRow | None:
            if not c.execute(exists, (run_id,)).fetchone():
                raise UnknownRunError(run_id, self.url)
            row = c.execute(move, (status, now, run_id, d.array(from_statuses))).fetchone()
            if row is None:
                return None
            for pos in reset_steps or ():
                c.execute(delete, (run_id, pos))
            for w in put_steps or ():
                moved = dataclasses.replace(w, run_id=run_id, epoch=row[_EPOCH])
                c.execute(
                    self._step if moved.order is not None else self._step_found,
                    self.step_args(moved),
                )
            c.execute(self._audit, (run_id, now, actor, action, detail))
            if status == "pending":
                d.notify_run(c, CHANNEL, run_id)
            return RunRow(*row)

        return d.transaction(work)

    def signal(
        self, run_id: str, name: str, payload: str, *, now: float, signal_id: str | None
    ) -> bool:
        """Queue a signal for a run; wake the run if it sleeps waiting for ``name``.

        Returns False when ``signal_id`` was already delivered (nothing changed).

        Raises:
            UnknownRunError: no such run.
        """
        d = self.d
        what = f"the payload of signal {name!r} to run {run_id!r}"
        check_size(self.url, what, payload, d.max_value_bytes)
        # a run going to sleep waits for this signal to commit, or this signal for the
        # sleep (see __init__)
        exists = d.sql("SELECT 1 FROM durable_runs WHERE run_id = ?" + d.key_share)
        insert = d.sql(
            "INSERT INTO durable_signals (run_id, name, payload, signal_id, sent_at) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (run_id, signal_id) DO NOTHING"
        )
        wake = d.sql(
            "UPDATE durable_runs SET wake_at = ? WHERE run_id = ? AND status = 'sleeping' "
            f"AND {d.member('waiting_for', '?')}"
        )

        def work(c: Any) -> bool:
            if not c.execute(exists, (run_id,)).fetchone():
                raise UnknownRunError(run_id, self.url)
            if c.execute(insert, (run_id, name, payload, signal_id, now)).rowcount != 1:
                return False
            if c.execute(wake, (now, run_id, name)).rowcount:
                d.notify_run(c, CHANNEL, run_id)
            return True

        return d.transaction(work, idempotent=signal_id is not None)

    def pending_signal(self, run_id: str, name: str) -> tuple[int, str] | None:
        rows = self.d.read(
            self.d.sql(
                "SELECT id, payload FROM durable_signals WHERE run_id = ? AND name = ? "
                "AND consumed_pos IS NULL ORDER BY id LIMIT 1"
            ),
            (run_id, name),
        )
        return (int(rows[0][0]), str(rows[0][1])) if rows else None

    def audit(self, run_id: str, *, actor: str, action: str, detail: str, now: float) -> None:
        self.d.write(self._audit, (run_id, now, actor, action, detail))

    def audit_log(self, run_id: str) -> list[AuditRow]:
        rows = self.d.read(
            self.d.sql(
                "SELECT run_id, id, at, actor, action, detail FROM durable_audit "
                "WHERE run_id = ? ORDER BY id"
            ),
            (run_id,),
        )
        return [AuditRow(*r) for r in rows]

    def fork(self, run_id: str, new_run_id: str, before_pos: str, *, now: float) -> RunRow:
        """Copy a run's header (as pending) and its steps journalled before ``before_pos``.

        Raises:
            UnknownRunError: no such run.
            ConfigError: the run has no step at ``before_pos``.
            RunConflictError: ``new_run_id`` is taken.
        """
        d, seq = self.d, self.d.step_seq
        at_sql = d.sql(self.STEP_AT.format(seq=seq))
        insert = d.sql(
            f"INSERT INTO durable_runs ({RUN_COLS}) VALUES ({RUN_MARKS}) "
            "ON CONFLICT (run_id) DO NOTHING"
        )
        copy = d.sql(self.STEPS_COPY.format(seq=seq))

        def work(c: Any) -> RunRow:
            src = c.execute(self._get, (run_id,)).fetchone()
            if src is None:
                raise UnknownRunError(run_id, self.url)
            at = c.execute(at_sql, (run_id, before_pos)).fetchone()
            if at is None:
                raise ConfigError(
                    f"run {run_id!r} has no journalled step at position {before_pos!r}; see "
                    f"the positions with `surefoot runs show {run_id}`"
                )
            old = RunRow(*src)
            row = RunRow(
                run_id=new_run_id,
                workflow=old.workflow,
                version=old.version,
                structure_hash=old.structure_hash,
                args=old.args,
                strategy=old.strategy,
                status="pending",
                created_at=now,
                updated_at=now,
                forked_from=run_id,
            )
            if c.execute(insert, row_params(row)).rowcount != 1:
                raise RunConflictError(
                    new_run_id, f"run id {new_run_id!r} is taken; fork to another id"
                )
            c.execute(copy, (new_run_id, run_id, at[0]))
            self.copy_chunks(c, run_id, new_run_id)  # the copied steps' chunked values
            forked = json.dumps({"from": run_id, "before": before_pos})
            c.execute(self._audit, (new_run_id, now, "operator", "forked", forked))
            d.notify_run(c, CHANNEL, new_run_id)
            return row

        return d.transaction(work)

    # -- workers -----------------------------------------------------------------------

    def register_worker(
        self,
        worker_id: str,
        workflows: list[tuple[str, str]],
        *,
        now: float,
        queues: Sequence[str] = (),
    ) -> None:
        """Advertise what ``worker_id`` serves until ``now``: its (workflow, version)
        pairs and the named queues it takes part in (their limits, its claims)."""
        self.d.write(
            self.d.sql(
                "INSERT INTO durable_workers (worker_id, workflows, seen_at, queues) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (worker_id) DO UPDATE SET "
                "workflows = excluded.workflows, seen_at = excluded.seen_at, "
                "queues = excluded.queues"
            ),
            (worker_id, _workflows_text(workflows), now, json.dumps(sorted(queues))),
            idempotent=True,
        )

    def live_workflows(self, *, since: float) -> set[tuple[str, str]]:
        out: set[tuple[str, str]] = set()
        rows = self.d.read(
            self.d.sql("SELECT workflows FROM durable_workers WHERE seen_at >= ?"), (since,)
        )
        for (text,) in rows:
            for item in str(text).split(";"):
                if "@" in item:
                    n, _, v = item.rpartition("@")
                    out.add((n, v))
        return out
