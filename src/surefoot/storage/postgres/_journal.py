"""The durable journal on PostgreSQL: runs, steps, leases, timers, signals, audit log.

The same tables and the same semantics as the SQLite journal, shaped for a server:

* a journalled step is **one statement, one round trip, one commit**:
  ``INSERT … SELECT … FROM durable_runs WHERE run_id = … AND epoch = … FOR SHARE ON CONFLICT
  … DO UPDATE``. The ``FOR SHARE`` row lock makes the epoch check exact: a takeover's
  ``UPDATE`` of the run waits for the step to commit, and a step sent after the takeover sees
  the new epoch and inserts nothing (the zombie is refused);
* a batch (group commit) is pipelined: ``BEGIN``, one statement per record, ``COMMIT`` are
  sent together and cost one round trip. Signal consumption and audit rows are made
  conditional in SQL, so no statement needs the answer of an earlier one;
* claiming is ``UPDATE … WHERE run_id IN (SELECT … FOR UPDATE SKIP LOCKED)``: workers on any
  number of machines claim disjoint runs without waiting on each other;
* new pending runs, signals and operator resumes ``NOTIFY`` the journal's channel; a worker
  may block in :meth:`PostgresJournal.wait_for_work` instead of sleeping its poll interval.
  Polling stays the fallback (a lost notification only delays a run by one poll interval).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from ...errors import ConfigError, RunConflictError, UnknownRunError
from ..base import AuditRow, RunRow, RunWrite, StepRow, StepWrite
from ._db import Listener, PostgresDB

__all__ = ["MIGRATIONS", "PostgresJournal"]

MIGRATIONS = [
    """
    CREATE TABLE durable_runs (
        run_id TEXT PRIMARY KEY,
        workflow TEXT NOT NULL,
        version TEXT NOT NULL,
        structure_hash TEXT NOT NULL,
        args TEXT NOT NULL,
        strategy TEXT NOT NULL,
        status TEXT NOT NULL,
        result TEXT,
        error TEXT,
        owner TEXT,
        epoch BIGINT NOT NULL DEFAULT 0,
        lease_until DOUBLE PRECISION,
        wake_at DOUBLE PRECISION,
        waiting_for TEXT,
        forked_from TEXT,
        created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL
    );
    CREATE INDEX durable_runs_ready ON durable_runs (status, wake_at);
    CREATE TABLE durable_steps (
        seq BIGINT GENERATED ALWAYS AS IDENTITY,
        run_id TEXT NOT NULL,
        pos TEXT NOT NULL,
        name TEXT NOT NULL,
        kind TEXT NOT NULL,
        status TEXT NOT NULL,
        result TEXT,
        error TEXT,
        attempts INTEGER NOT NULL,
        epoch BIGINT NOT NULL,
        started_at DOUBLE PRECISION NOT NULL,
        finished_at DOUBLE PRECISION,
        PRIMARY KEY (run_id, pos)
    );
    CREATE TABLE durable_signals (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        run_id TEXT NOT NULL,
        name TEXT NOT NULL,
        payload TEXT NOT NULL,
        signal_id TEXT,
        sent_at DOUBLE PRECISION NOT NULL,
        consumed_pos TEXT,
        UNIQUE (run_id, signal_id)
    );
    CREATE INDEX durable_signals_wait ON durable_signals (run_id, name, consumed_pos);
    CREATE TABLE durable_audit (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        run_id TEXT NOT NULL,
        at DOUBLE PRECISION NOT NULL,
        actor TEXT NOT NULL,
        action TEXT NOT NULL,
        detail TEXT NOT NULL
    );
    CREATE INDEX durable_audit_run ON durable_audit (run_id, id);
    CREATE TABLE durable_workers (
        worker_id TEXT PRIMARY KEY,
        workflows TEXT NOT NULL,
        seen_at DOUBLE PRECISION NOT NULL
    )
    """,
    # 2: claims since the run last suspended or an operator moved it (``max_claims``)
    "ALTER TABLE durable_runs ADD COLUMN claims INTEGER NOT NULL DEFAULT 0",
]

CHANNEL = "durable_work"

_RUN_COLS = (
    "run_id, workflow, version, structure_hash, args, strategy, status, created_at, "
    "updated_at, result, error, owner, epoch, lease_until, wake_at, waiting_for, forked_from"
)
_MARKS = ", ".join(["%s"] * 17)
_SEL = _RUN_COLS + ", claims"  # read back with the claim counter (never inserted)
_STEP_COLS = (
    "run_id, pos, name, kind, status, result, error, attempts, epoch, started_at, finished_at, seq"
)
_F8 = "%s::DOUBLE PRECISION"

_STEP_SQL = (
    "INSERT INTO durable_steps (run_id, pos, name, kind, status, result, error, attempts, "
    f"epoch, started_at, finished_at) SELECT %s, %s, %s, %s, %s, %s::TEXT, %s::TEXT, %s, %s, "
    f"%s, {_F8} FROM durable_runs WHERE run_id = %s AND epoch = %s FOR SHARE "
    "ON CONFLICT (run_id, pos) DO UPDATE SET status = excluded.status, "
    "result = excluded.result, error = excluded.error, attempts = excluded.attempts, "
    "epoch = excluded.epoch, finished_at = excluded.finished_at"
)
# Consumed only if the step's write went through (the run still has the writer's epoch).
_CONSUME_SQL = (
    "UPDATE durable_signals SET consumed_pos = %s WHERE id = %s AND consumed_pos IS NULL "
    "AND EXISTS (SELECT 1 FROM durable_runs WHERE run_id = %s AND epoch = %s)"
)
_FINISH_SQL = (
    "UPDATE durable_runs SET status = %s, result = %s::TEXT, error = %s::TEXT, owner = NULL, "
    "lease_until = NULL, wake_at = NULL, waiting_for = NULL, updated_at = %s "
    "WHERE run_id = %s AND epoch = %s"
)
_SLEEP_SQL = (
    "UPDATE durable_runs SET status = 'sleeping', owner = NULL, lease_until = NULL, "
    "claims = 0, "
    "waiting_for = %s::TEXT, updated_at = %s, wake_at = CASE WHEN %s::TEXT IS NOT NULL AND "
    "EXISTS (SELECT 1 FROM durable_signals WHERE run_id = %s AND "
    "name = ANY(string_to_array(%s::TEXT, chr(31))) AND "
    f"consumed_pos IS NULL) THEN {_F8} ELSE {_F8} END WHERE run_id = %s AND epoch = %s"
)
_AUDIT_SQL = (
    "INSERT INTO durable_audit (run_id, at, actor, action, detail) VALUES (%s, %s, %s, %s, %s)"
)
# Appended only if the run write went through: a finish or sleep keeps the epoch, so the
# run has the writer's epoch and the new status exactly when the write was applied.
# The NOT EXISTS makes a batch safe to re-send after a lost reply: the same entry (same run,
# time, actor, action, detail) is not appended twice.
_AUDIT_IF_SQL = (
    "INSERT INTO durable_audit (run_id, at, actor, action, detail) "
    "SELECT %s, %s::DOUBLE PRECISION, %s::TEXT, %s::TEXT, %s::TEXT "
    "WHERE EXISTS (SELECT 1 FROM durable_runs WHERE run_id = %s AND epoch = %s AND status = %s) "
    "AND NOT EXISTS (SELECT 1 FROM durable_audit WHERE run_id = %s AND at = %s "
    "AND actor = %s AND action = %s AND detail = %s)"
)
_CLAIMABLE = (
    "(status = 'pending' OR (status = 'sleeping' AND wake_at IS NOT NULL AND wake_at <= %s) "
    "OR (status = 'running' AND (lease_until IS NULL OR lease_until < %s)))"
)


def _run(r: Any) -> RunRow:
    return RunRow(*r)


def _step(r: Any) -> StepRow:
    return StepRow(*r)


def _step_params(r: StepWrite) -> tuple[Any, ...]:
    return (
        r.run_id,
        r.pos,
        r.name,
        r.kind,
        r.status,
        r.result,
        r.error,
        r.attempts,
        r.epoch,
        r.started_at,
        r.finished_at,
        r.run_id,
        r.epoch,
    )


def _row_params(row: RunRow) -> tuple[Any, ...]:
    return (
        row.run_id,
        row.workflow,
        row.version,
        row.structure_hash,
        row.args,
        row.strategy,
        row.status,
        row.created_at,
        row.updated_at,
        row.result,
        row.error,
        row.owner,
        row.epoch,
        row.lease_until,
        row.wake_at,
        row.waiting_for,
        row.forked_from,
    )


class PostgresJournal:
    """The ``Journal`` protocol on PostgreSQL (see ``surefoot.storage.base``).

    Args:
        db: the shared ``PostgresDB``; the journal's tables are created by migration.

    Raises:
        SchemaVersionError: the schema is foreign or from a newer surefoot (left untouched).
    """

    def __init__(self, db: PostgresDB) -> None:
        self.db = db
        self.url = db.url
        self._listener: Listener | None = None
        db.migrate("durable", MIGRATIONS)

    # -- runs --------------------------------------------------------------------------

    def create_run(self, row: RunRow) -> tuple[RunRow, bool]:
        """Insert ``row`` unless the run id exists; return (the stored row, created)."""
        created = self.db.execute(
            f"WITH ins AS (INSERT INTO durable_runs ({_RUN_COLS}) VALUES ({_MARKS}) "
            "ON CONFLICT (run_id) DO NOTHING RETURNING run_id, status), "
            "aud AS (INSERT INTO durable_audit (run_id, at, actor, action, detail) "
            "SELECT run_id, %s, %s, 'created', '{}' FROM ins) "
            "SELECT run_id, CASE WHEN status = 'pending' THEN pg_notify(%s, run_id) END FROM ins",
            (
                *_row_params(row),
                row.created_at,
                row.owner or "app",
                self.db.channel(CHANNEL),
            ),
        )
        if created:
            return row, True
        existing = self.get_run(row.run_id)
        if existing is None:  # deleted in between: nothing in surefoot deletes runs
            raise UnknownRunError(row.run_id, self.url)
        return existing, False

    def get_run(self, run_id: str) -> RunRow | None:
        rows = self.db.execute(
            f"SELECT {_SEL} FROM durable_runs WHERE run_id = %s", (run_id,), write=False
        )
        return _run(rows[0]) if rows else None

    def list_runs(
        self, *, status: str | None = None, workflow: str | None = None, limit: int = 100
    ) -> list[RunRow]:
        where, params = [], []
        if status is not None:
            where.append("status = %s")
            params.append(status)
        if workflow is not None:
            where.append("workflow = %s")
            params.append(workflow)
        sql = f"SELECT {_SEL} FROM durable_runs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += ' ORDER BY created_at DESC, run_id COLLATE "C" LIMIT %s'
        return [_run(r) for r in self.db.execute(sql, (*params, int(limit)), write=False)]

    def steps(self, run_id: str) -> list[StepRow]:
        rows = self.db.execute(
            f"SELECT {_STEP_COLS} FROM durable_steps WHERE run_id = %s ORDER BY seq",
            (run_id,),
            write=False,
        )
        return [_step(r) for r in rows]

    # -- the hot path ------------------------------------------------------------------

    def commit(self, records: list[StepWrite | RunWrite]) -> list[bool]:
        """Apply ``records`` in one transaction; per record, was the writer's epoch current?

        One record without a signal to consume is one statement; a batch is pipelined.
        """
        if not records:
            return []
        if len(records) == 1 and type(records[0]) is StepWrite:
            only = records[0]
            if only.consume_signal is None:

                def one(conn: Any) -> list[bool]:
                    return [conn.execute(_STEP_SQL, _step_params(only)).rowcount == 1]

                # Re-applying the same step row is harmless, so a lost reply may be retried.
                return self.db.run(one, idempotent=True)

        # Run rows are locked in run-id order (a stable sort keeps each run's records in
        # order), as the heartbeat locks them, so a batch and a heartbeat never deadlock.
        order = sorted(range(len(records)), key=lambda i: records[i].run_id.encode())

        def batch(conn: Any) -> list[bool]:
            counted: dict[int, Any] = {}
            with conn.pipeline():
                conn.execute("BEGIN")
                for i in order:
                    r = records[i]
                    if type(r) is StepWrite:
                        counted[i] = conn.execute(_STEP_SQL, _step_params(r))
                        if r.consume_signal is not None:
                            conn.execute(_CONSUME_SQL, (r.pos, r.consume_signal, r.run_id, r.epoch))
                    else:
                        counted[i] = self._run_write(conn, r)  # type: ignore[arg-type]
                conn.execute("COMMIT")
            return [counted[i].rowcount == 1 for i in range(len(records))]

        # Every statement of a batch is conditional and re-applies to the same state (the
        # step upsert, the signal consumption, the epoch-checked run write, the deduplicated
        # audit entries), so a batch whose reply was lost may be sent again.
        return self.db.run(batch, idempotent=True)

    def _run_write(self, conn: Any, r: RunWrite) -> Any:
        if r.status == "sleeping":
            cur = conn.execute(
                _SLEEP_SQL,
                (
                    r.waiting_for,
                    r.now,
                    r.waiting_for,
                    r.run_id,
                    r.waiting_for,
                    r.now,
                    r.wake_at,
                    r.run_id,
                    r.epoch,
                ),
            )
        else:
            cur = conn.execute(_FINISH_SQL, (r.status, r.result, r.error, r.now, r.run_id, r.epoch))
        for action, detail in r.audit:
            entry = (r.run_id, r.now, r.actor, action, detail)
            conn.execute(_AUDIT_IF_SQL, (*entry, r.run_id, r.epoch, r.status, *entry))
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
        (``run_id`` only), also a running run whose lease is held by ``owner`` itself or a
        sleeping run that is not yet due. Returns (run_id, new epoch) pairs; the epoch goes
        up by one, fencing the previous holder. Runs locked by another claimer are skipped.
        """
        if run_id is not None:
            cond = "run_id = %s"
            params: list[Any] = [run_id]
            if force:
                cond += (
                    " AND (status IN ('pending', 'sleeping') OR (status = 'running' AND "
                    "(owner = %s OR lease_until IS NULL OR lease_until < %s)))"
                )
                params += [owner, now]
            else:
                cond += f" AND {_CLAIMABLE}"
                params += [now, now]
        else:
            if not workflows:
                return []
            values = ", ".join("(%s, %s)" for _ in workflows)
            cond = (
                f"run_id IN (SELECT run_id FROM durable_runs WHERE {_CLAIMABLE} AND "
                f"(workflow, version) IN (VALUES {values}) "
                "ORDER BY COALESCE(wake_at, created_at) LIMIT %s FOR UPDATE SKIP LOCKED)"
            )
            params = [now, now]
            for w in workflows:
                params += [w[0], w[1]]
            params.append(int(limit))
        # Re-sending a claim whose reply was lost is safe: the runs it took stay fenced to
        # this owner until their lease runs out, then any worker claims them again.
        rows = self.db.execute(
            "UPDATE durable_runs SET status = 'running', owner = %s, epoch = epoch + 1, "
            "claims = claims + 1, "
            f"lease_until = %s, updated_at = %s WHERE {cond} RETURNING run_id, epoch",
            (owner, lease_until, now, *params),
            write=False,  # counted below only when it took a run: an idle poll writes nothing
            idempotent=True,
        )
        if rows:
            self.db.count_commit()
        return [(str(r[0]), int(r[1])) for r in rows]

    def heartbeat(
        self, owner: str, runs: list[tuple[str, int]], *, lease_until: float, now: float
    ) -> list[str]:
        """Extend the leases ``owner`` holds (one statement); return the run ids it lost."""
        if not runs:
            return []
        # Lock the rows in run-id order first (as a group commit does), then extend.
        kept = self.db.execute(
            "WITH held AS (SELECT d.run_id FROM durable_runs d "
            "JOIN unnest(%s::TEXT[], %s::BIGINT[]) AS v(run_id, epoch) "
            "ON d.run_id = v.run_id AND d.epoch = v.epoch WHERE d.status = 'running' "
            'ORDER BY d.run_id COLLATE "C" FOR UPDATE OF d) '
            "UPDATE durable_runs d SET lease_until = %s FROM held "
            "WHERE d.run_id = held.run_id RETURNING d.run_id",
            ([r for r, _ in runs], [e for _, e in runs], lease_until),
            idempotent=True,
        )
        held = {r[0] for r in kept}
        return [run_id for run_id, _ in runs if run_id not in held]

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

        Bumps the epoch, deletes the ``reset_steps`` rows, writes the ``put_steps`` rows
        (under the new epoch) and appends an audit entry, in one transaction. Returns the
        updated row, or None if the run was in another status.

        Raises:
            UnknownRunError: no such run.
        """

        def work(conn: Any) -> RunRow | None:
            exists = conn.execute(
                "SELECT 1 FROM durable_runs WHERE run_id = %s FOR UPDATE", (run_id,)
            ).fetchone()
            if not exists:
                raise UnknownRunError(run_id, self.url)
            row = conn.execute(
                "UPDATE durable_runs SET status = %s, epoch = epoch + 1, owner = NULL, claims = 0, "
                "lease_until = NULL, wake_at = NULL, waiting_for = NULL, updated_at = %s "
                f"WHERE run_id = %s AND status = ANY(%s) RETURNING {_SEL}",
                (status, now, run_id, list(from_statuses)),
            ).fetchone()
            if row is None:
                return None
            for pos in reset_steps or ():
                conn.execute(
                    "DELETE FROM durable_steps WHERE run_id = %s AND pos = %s", (run_id, pos)
                )
            new = _run(row)
            for w in put_steps or ():
                moved = dataclasses.replace(w, run_id=run_id, epoch=new.epoch)
                conn.execute(_STEP_SQL, _step_params(moved))
            conn.execute(_AUDIT_SQL, (run_id, now, actor, action, detail))
            if status == "pending":
                conn.execute("SELECT pg_notify(%s, %s)", (self.db.channel(CHANNEL), run_id))
            return new

        return self.db.run(work, tx=True)

    def signal(
        self, run_id: str, name: str, payload: str, *, now: float, signal_id: str | None
    ) -> bool:
        """Queue a signal for a run; wake the run if it sleeps waiting for ``name``.

        Returns False when ``signal_id`` was already delivered (nothing changed).

        Raises:
            UnknownRunError: no such run.
        """

        def work(conn: Any) -> bool:
            if not conn.execute(
                "SELECT 1 FROM durable_runs WHERE run_id = %s", (run_id,)
            ).fetchone():
                raise UnknownRunError(run_id, self.url)
            cur = conn.execute(
                "INSERT INTO durable_signals (run_id, name, payload, signal_id, sent_at) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (run_id, signal_id) DO NOTHING",
                (run_id, name, payload, signal_id, now),
            )
            if cur.rowcount != 1:
                return False
            woke = conn.execute(
                "UPDATE durable_runs SET wake_at = %s WHERE run_id = %s "
                "AND status = 'sleeping' AND %s = ANY(string_to_array(waiting_for, chr(31)))",
                (now, run_id, name),
            ).rowcount
            if woke:
                conn.execute("SELECT pg_notify(%s, %s)", (self.db.channel(CHANNEL), run_id))
            return True

        return self.db.run(work, tx=True, idempotent=signal_id is not None)

    def pending_signal(self, run_id: str, name: str) -> tuple[int, str] | None:
        rows = self.db.execute(
            "SELECT id, payload FROM durable_signals WHERE run_id = %s AND name = %s "
            "AND consumed_pos IS NULL ORDER BY id LIMIT 1",
            (run_id, name),
            write=False,
        )
        return (int(rows[0][0]), str(rows[0][1])) if rows else None

    def audit(self, run_id: str, *, actor: str, action: str, detail: str, now: float) -> None:
        self.db.execute(_AUDIT_SQL, (run_id, now, actor, action, detail))

    def audit_log(self, run_id: str) -> list[AuditRow]:
        rows = self.db.execute(
            "SELECT run_id, id, at, actor, action, detail FROM durable_audit "
            "WHERE run_id = %s ORDER BY id",
            (run_id,),
            write=False,
        )
        return [AuditRow(*r) for r in rows]

    def fork(self, run_id: str, new_run_id: str, before_pos: str, *, now: float) -> RunRow:
        """Copy a run's header (as pending) and its steps journalled before ``before_pos``.

        Raises:
            UnknownRunError: no such run.
            ConfigError: the run has no step at ``before_pos``.
            RunConflictError: ``new_run_id`` is taken.
        """

        def work(conn: Any) -> RunRow:
            src = conn.execute(
                f"SELECT {_SEL} FROM durable_runs WHERE run_id = %s", (run_id,)
            ).fetchone()
            if src is None:
                raise UnknownRunError(run_id, self.url)
            at = conn.execute(
                "SELECT seq FROM durable_steps WHERE run_id = %s AND pos = %s",
                (run_id, before_pos),
            ).fetchone()
            if at is None:
                raise ConfigError(
                    f"run {run_id!r} has no journalled step at position {before_pos!r}; see "
                    f"the positions with `surefoot runs show {run_id}`"
                )
            old = _run(src)
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
            inserted = conn.execute(
                f"INSERT INTO durable_runs ({_RUN_COLS}) VALUES ({_MARKS}) "
                "ON CONFLICT (run_id) DO NOTHING",
                _row_params(row),
            ).rowcount
            if inserted != 1:
                raise RunConflictError(
                    new_run_id, f"run id {new_run_id!r} is taken; fork to another id"
                )
            conn.execute(
                "INSERT INTO durable_steps (run_id, pos, name, kind, status, result, error, "
                "attempts, epoch, started_at, finished_at) SELECT %s, pos, name, kind, status, "
                "result, error, attempts, 0, started_at, finished_at FROM durable_steps "
                "WHERE run_id = %s AND seq < %s AND status IN ('done', 'error') ORDER BY seq",
                (new_run_id, run_id, at[0]),
            )
            conn.execute(
                _AUDIT_SQL,
                (
                    new_run_id,
                    now,
                    "operator",
                    "forked",
                    json.dumps({"from": run_id, "before": before_pos}),
                ),
            )
            conn.execute("SELECT pg_notify(%s, %s)", (self.db.channel(CHANNEL), new_run_id))
            return row

        return self.db.run(work, tx=True)

    # -- workers -----------------------------------------------------------------------

    def register_worker(
        self, worker_id: str, workflows: list[tuple[str, str]], *, now: float
    ) -> None:
        text = ";".join(f"{n}@{v}" for n, v in sorted(workflows))
        self.db.execute(
            "INSERT INTO durable_workers (worker_id, workflows, seen_at) VALUES (%s, %s, %s) "
            "ON CONFLICT (worker_id) DO UPDATE SET workflows = excluded.workflows, "
            "seen_at = excluded.seen_at",
            (worker_id, text, now),
            idempotent=True,
        )

    def live_workflows(self, *, since: float) -> set[tuple[str, str]]:
        out: set[tuple[str, str]] = set()
        rows = self.db.execute(
            "SELECT workflows FROM durable_workers WHERE seen_at >= %s", (since,), write=False
        )
        for (text,) in rows:
            for item in str(text).split(";"):
                if "@" in item:
                    n, _, v = item.rpartition("@")
                    out.add((n, v))
        return out

    # -- wake-ups (PostgreSQL only) ----------------------------------------------------

    def wait_for_work(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds until a run may have become claimable.

        Woken by ``NOTIFY`` when a pending run is created, forked or resumed, or a signal
        wakes a sleeping run. Returns False on timeout; timers and expired leases are found
        by the caller's next poll. A worker calls this instead of sleeping its poll interval.
        """
        if self._listener is None:
            self._listener = self.db.listener(CHANNEL)
        return self._listener.wait(timeout)

    def close(self) -> None:
        """Close the wake-up listener's connection (the pool belongs to the storage)."""
        if self._listener is not None:
            self._listener.close()
            self._listener = None
