"""The durable journal in SQL, written once for SQLite and PostgreSQL.

Runs, steps, leases, timers, signals and the audit log (see ``Journal`` in
``surefoot.storage.journal``). Every statement is written here once, with ``?``
placeholders; the backend's :class:`~surefoot.storage.sql.dialect.Dialect` spells the few
fragments that differ and runs the statements. The journal is composed of parts named by
what they do, each given only what it needs (the dialect, the backend's step statements):
``queues`` (:mod:`.queues`), ``children`` (:mod:`.children`), ``schedules``
(:mod:`.schedules`), ``pruning`` (:mod:`.pruning`), ``chunks`` (:mod:`.chunks`),
``liveness`` (:mod:`.liveness`), its listings (:mod:`.listing`), and the backend's
``waking``. Shared columns and statements come from :mod:`.schema`, the claim statements
from :mod:`.claims`. A backend subclass keeps only what truly differs: its migrations, its
step statements (a :class:`~.schema.StepSQL`), the heartbeat, and, on PostgreSQL, a run's
creation and end as one statement each.

Every write of a running run is fenced by the lease epoch: a step is one
``INSERT … SELECT … FROM durable_runs WHERE run_id = ? AND epoch = ? [FOR SHARE] ON CONFLICT
… DO UPDATE``, so a zombie worker's late write inserts nothing and is reported as refused.
``commit`` writes a batch in one transaction (one commit), so steps of many runs that finish
together share one fsync; every statement of a batch is conditional in SQL (no statement
needs the answer of an earlier one), so PostgreSQL pipelines the batch into one round trip
and may send it again after a lost reply.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from ...errors import RunConflictError, StoreError, UnknownRunError
from ..checks import check_size
from ..chunks import ChunkWrite
from ..rowsum import refused, step_sum
from ..runs import AuditRow, ChildWrite, Record, RunRow, RunWrite, StepRow, StepWrite, WorkerRow
from ..waking import Waking
from .children import SQLChildren
from .chunks import SQLChunks
from .claims import SQLClaims
from .dialect import Dialect
from .listing import SQLListing
from .liveness import LivenessLocks, SQLLiveness
from .observed import ObservedLeases
from .operations import SQLOperations
from .pruning import SQLPruning
from .queues import SQLQueues
from .schedules import SQLSchedules
from .schema import (
    AUDIT_SQL,
    CHANNEL,
    DONE_SQL,
    F8,
    FINISH_SQL,
    INSERT_RUN,
    MAX_ORDER,
    SEL,
    STEP_TYPES,
    TEXT,
    StepSQL,
    created_detail,
    run_params,
    step_params,
    workflow_pairs,
    workflows_text,
)

__all__ = ["SQLJournal"]

# Consumed only if the step's write went through (the run still has the writer's epoch).
_CONSUME_SQL = (
    "UPDATE durable_signals SET consumed_pos = ? WHERE id = ? AND consumed_pos IS NULL "
    "AND EXISTS (SELECT 1 FROM durable_runs WHERE run_id = ? AND epoch = ?)"
)
_SLEEP_SQL = (
    "UPDATE durable_runs SET status = 'sleeping', owner = NULL, lease_until = NULL, claims = 0, "
    f"waiting_for = {TEXT}, updated_at = ?, wake_at = CASE WHEN {TEXT} IS NOT NULL AND "
    "EXISTS (SELECT 1 FROM durable_signals WHERE run_id = ? AND consumed_pos IS NULL AND "
    f"{{member}}) THEN {F8} ELSE {F8} END WHERE run_id = ? AND epoch = ?"
)
# Appended only if the run write went through: a finish or sleep keeps the epoch, so the
# run has the writer's epoch and the new status exactly when the write was applied.
# The NOT EXISTS makes a batch safe to re-send after a lost reply: the same entry (same run,
# time, actor, action, detail) is not appended twice.
_AUDIT_IF_SQL = (
    f"INSERT INTO durable_audit (run_id, at, actor, action, detail) SELECT ?, {F8}, {TEXT}, "
    f"{TEXT}, {TEXT} "
    "WHERE EXISTS (SELECT 1 FROM durable_runs WHERE run_id = ? AND epoch = ? AND status = ?) "
    "AND NOT EXISTS (SELECT 1 FROM durable_audit WHERE run_id = ? AND at = ? "
    "AND actor = ? AND action = ? AND detail = ?)"
)


class SQLJournal:
    """The ``Journal`` protocol in SQL, on one backend's :class:`Dialect`, made of parts.

    Args:
        dialect: the backend's spelling and statement runner.
        steps: the backend's statements on the step table.
        locks: how the backend tells a worker's process is gone (None: it cannot).
        waking: the backend's wake-ups (None: callers poll).
        observed: judges a live holder's expired lease by observation too (SQLite, whose
            leases are on each process's wall clock: :mod:`.observed`); None: the wall
            clock alone.

    Subclasses run their migrations, then call ``super().__init__``; they implement
    :meth:`heartbeat`, which differs by backend.
    """

    def __init__(
        self,
        dialect: Dialect,
        steps: StepSQL = StepSQL(),  # noqa: B008 - frozen: one default for every journal
        *,
        locks: LivenessLocks | None = None,
        waking: Waking | None = None,
        observed: ObservedLeases | None = None,
    ) -> None:
        d = self.d = dialect
        self.url = dialect.url
        self._steps = steps
        self._ordered = steps.ordered
        self._summed = steps.summed
        self.step_args: Callable[[StepWrite], tuple[Any, ...]] = (
            self._summed_step_params
            if steps.summed
            else self._ordered_step_params
            if steps.ordered
            else step_params
        )
        statement = steps.write.format(share_lock=d.share_lock)
        self._step = d.sql(statement)
        self._step_found = d.sql(steps.found) if steps.ordered else self._step
        # the hot path: one step, one statement, prepared once per connection
        self._write_step = d.prepare(statement, STEP_TYPES, idempotent=True)
        self._consume = d.sql(_CONSUME_SQL)
        self._finish = d.sql(FINISH_SQL)
        self._sleep = d.sql(_SLEEP_SQL.format(member=d.member(TEXT, "name")))
        self._audit = d.sql(AUDIT_SQL)
        self._audit_if = d.sql(_AUDIT_IF_SQL)
        self._get = d.sql(f"SELECT {SEL} FROM durable_runs WHERE run_id = ?")
        self._insert = d.sql(INSERT_RUN)
        self._by_dedup = d.sql(
            f"SELECT {SEL} FROM durable_runs WHERE queue = ? AND dedup_id = ? "
            f"AND status NOT IN {DONE_SQL}"
        )
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
        self.observed = observed
        self._claimer = SQLClaims(d, observed)
        self._listing = SQLListing(d)
        self._children = SQLChildren(d, steps)
        self._chunks = SQLChunks(d)
        self.queues = SQLQueues(d, observed)
        self.schedules = SQLSchedules(d)
        self.pruning = SQLPruning(d, steps)
        self.liveness = SQLLiveness(d, locks, self.queues)
        self.waking = waking
        self._ops = SQLOperations(d, steps, self._put_step, self._check_values, self._chunks)

    @property
    def children(self) -> SQLChildren:
        """The journal's children (``of``, ``cancel_tree``)."""
        return self._children

    @property
    def chunks(self) -> SQLChunks:
        """The nodes of chunked values (``get``, ``usage``); committed with their steps."""
        return self._chunks

    # -- runs --------------------------------------------------------------------------

    def _ordered_step_params(self, r: StepWrite) -> tuple[Any, ...]:
        """:func:`step_params` and the record's journal ``order`` (``StepSQL.ordered``).

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

    def _summed_step_params(self, r: StepWrite) -> tuple[Any, ...]:
        """:meth:`_ordered_step_params` and the row's checksum (``StepSQL.summed``)."""
        if r.order is not None and r.order > MAX_ORDER:
            return self._ordered_step_params(r)  # raises
        pos, name, kind, status, result, error = r.pos, r.name, r.kind, r.status, r.result, r.error
        return (
            r.run_id, pos, name, kind, status, result, error, r.attempts,
            r.epoch, r.started_at, r.finished_at, r.run_id, r.epoch, r.order,
            step_sum(pos, name, kind, status, result, error),
        )  # fmt: skip

    def _put_step(self, c: Any, w: StepWrite) -> Any:
        """Write step record ``w`` inside ``c``'s transaction (fenced by its epoch)."""
        return c.execute(self._step if w.order is not None else self._step_found, self.step_args(w))

    def create_run(self, row: RunRow) -> tuple[RunRow, bool]:
        """Insert ``row`` with everything it carries (queue, priority, dedup id, parent,
        deadline) and its ``created`` audit entry, in one transaction.

        Returns (the stored row, created). When ``row.run_id`` exists, the stored row; when
        an unfinished run of the same queue holds ``row.dedup_id``, that run's row. No read
        first: ``App.start`` reads the run before it creates one (the common repeat takes
        no write lock); a repeat that does get here is answered by the ``ON CONFLICT``.

        Raises:
            RunConflictError: the holder of the dedup id finished in between (try again).
            UnknownRunError: the run with this id was deleted in between.
            ValueTooLargeError: the arguments are over the store's ``max_value_bytes``.
        """
        self._check_run(row)
        d = self.d

        def work(c: Any) -> tuple[RunRow, bool]:
            if c.execute(self._insert, run_params(row)).rowcount == 1:
                entry = (row.run_id, row.created_at, row.owner or "app", "created")
                c.execute(self._audit, (*entry, created_detail(row)))
                if row.status == "pending":
                    d.notify_run(c, CHANNEL, row.run_id)
                return row, True
            found = c.execute(self._get, (row.run_id,)).fetchone()
            if found is None and row.dedup_id is not None:
                found = c.execute(self._by_dedup, (row.queue, row.dedup_id)).fetchone()
            if found is None:
                raise self._gone(row)
            return RunRow(*found), False

        return d.transaction(work)

    def _gone(self, row: RunRow) -> Exception:
        """A run refused by the insert and then not found: its holder went meanwhile."""
        if row.dedup_id is None:
            return UnknownRunError(row.run_id, self.url)  # deleted in between (pruned)
        return RunConflictError(
            row.run_id,
            f"run {row.run_id!r} was refused (dedup id {row.dedup_id!r}) and its holder "
            "finished meanwhile; enqueue it again",
        )

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
        """The journalled steps of ``run_id``, in order.

        Raises:
            CorruptionError: a step row fails its checksum (``StepSQL.summed``); none is
                returned.
        """
        sql = self.d.sql(self._steps.of_run.format(seq=self.d.step_seq))
        rows = self.d.read(sql, (run_id,))
        if not self._summed:
            return [StepRow(*r) for r in rows]
        out = []
        for *r, stored in rows:
            if stored is not None and stored != step_sum(r[1], r[2], r[3], r[4], r[5], r[6]):
                raise refused(self.url, f"step {r[1]!r} of run {run_id!r} (table durable_steps)")
            out.append(StepRow(*r))
        return out

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
                and not only.audit
                and (only.order is not None or not self._ordered)
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
        kids = self._children
        first = kids.lock_first(records)  # a child's end updates its parent: see .children

        def batch(c: Any) -> list[Any]:
            counted: list[Any] = [None] * n
            ex = c.execute
            if first is not None:
                kids.lock_rows(c, first)
            for i in order:
                r = records[i]
                if type(r) is StepWrite:
                    step = self._step if r.order is not None else self._step_found
                    counted[i] = ex(step, self.step_args(r))
                    if r.consume_signal is not None:
                        ex(self._consume, (r.pos, r.consume_signal, r.run_id, r.epoch))
                    for actor, action, detail in r.audit:  # fenced as the step, deduplicated
                        entry = (r.run_id, r.finished_at or r.started_at, actor, action, detail)
                        ex(self._audit_if, (*entry, r.run_id, r.epoch, "running", *entry))
                elif type(r) is RunWrite:
                    counted[i] = self._run_write(c, r)
                else:  # a child run and its parent's step (.children)
                    counted[i] = kids.write_child(c, r)  # type: ignore[arg-type]
            if chunks:  # chunked values' nodes, fenced by epoch; run rows already locked
                self._chunks.put(c, chunks)
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
                self._children.tell_parent(c, r)
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
        reason: str | None = None,
    ) -> list[tuple[str, int]]:
        """Take up to ``limit`` claimable runs of ``workflows`` (or exactly ``run_id``); see
        :meth:`.SQLClaims.claim`."""
        return self._claimer.claim(
            owner, now=now, lease_until=lease_until, workflows=workflows, limit=limit,
            run_id=run_id, force=force, reason=reason,
        )  # fmt: skip

    def heartbeat(
        self, owner: str, runs: list[tuple[str, int]], *, lease_until: float, now: float
    ) -> list[str]:
        """Extend the leases ``owner`` holds; return the run ids it no longer holds."""
        raise NotImplementedError

    # -- operators and senders (.operations) ------------------------------------------

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
        """Move a run to ``status`` if it is in ``from_statuses``, fencing any holder; see
        :meth:`.SQLOperations.operator`."""
        return self._ops.operator(
            run_id, status=status, from_statuses=from_statuses, now=now, actor=actor,
            action=action, detail=detail, reset_steps=reset_steps, put_steps=put_steps,
        )  # fmt: skip

    def signal(
        self, run_id: str, name: str, payload: str, *, now: float, signal_id: str | None
    ) -> bool:
        """Queue a signal for a run and wake it; see :meth:`.SQLOperations.signal`."""
        return self._ops.signal(run_id, name, payload, now=now, signal_id=signal_id)

    def fork(self, run_id: str, new_run_id: str, before_pos: str, *, now: float) -> RunRow:
        """Copy a run's header and its first steps; see :meth:`.SQLOperations.fork`."""
        return self._ops.fork(run_id, new_run_id, before_pos, now=now)

    # -- signals and the audit log ------------------------------------------------------

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
            (worker_id, workflows_text(workflows), now, json.dumps(sorted(queues))),
            idempotent=True,
        )

    def live_workflows(self, *, since: float) -> set[tuple[str, str]]:
        """The (workflow, version) pairs offered by the workers live at ``since``."""
        rows = self.d.read(
            self.d.sql("SELECT workflows FROM durable_workers WHERE seen_at >= ?"), (since,)
        )
        return {pair for (text,) in rows for pair in workflow_pairs(text)}

    # -- listings (.listing) -----------------------------------------------------------

    def page_runs(
        self,
        *,
        status: str | None = None,
        workflow: str | None = None,
        version: str | None = None,
        since: float | None = None,
        search: str | None = None,
        order: str = "newest",
        offset: int = 0,
        limit: int = 100,
    ) -> list[RunRow]:
        """Runs matching every given filter, a page of them (see :class:`.SQLListing`)."""
        return self._listing.page_runs(
            status=status, workflow=workflow, version=version, since=since, search=search,
            order=order, offset=offset, limit=limit,
        )  # fmt: skip

    def count_runs(
        self,
        *,
        status: str | None = None,
        workflow: str | None = None,
        version: str | None = None,
        since: float | None = None,
        search: str | None = None,
    ) -> dict[str, int]:
        """How many runs match every given filter, per status (see :class:`.SQLListing`)."""
        return self._listing.count_runs(
            status=status, workflow=workflow, version=version, since=since, search=search
        )

    def backlog(self, *, now: float) -> tuple[int, float | None]:
        """How many runs are claimable at ``now``, and since when (see :class:`.SQLListing`)."""
        return self._listing.backlog(now=now)

    def run_versions(self) -> list[tuple[str, str]]:
        """The distinct (workflow, version) pairs of the journal's runs, sorted."""
        return self._listing.run_versions()

    def workers(self, *, now: float) -> list[WorkerRow]:
        """Every worker the journal has seen, with the unexpired leases it holds."""
        return self._listing.workers(now=now)

    def close(self) -> None:
        """Let go of the liveness locks and wake-up listeners held here (the storage owns
        the connections)."""
        self.liveness.close()
        if self.waking is not None:
            self.waking.close()
