"""The durable journal on SQLite: runs, steps, leases, timers, signals, audit log.

Every write of a running run is fenced by the lease epoch inside one ``BEGIN IMMEDIATE``
transaction: a step is one ``INSERT … SELECT … WHERE EXISTS (run with this epoch)``, so a
zombie worker's late write changes nothing and is reported as refused. ``commit`` takes a
batch of records and writes them in one transaction, so steps of many runs that finish
together share one fsync (group commit).
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from ...errors import ConfigError, RunConflictError, UnknownRunError
from ..base import AuditRow, RunRow, RunWrite, StepRow, StepWrite
from ._db import SQLiteDB

__all__ = ["MIGRATIONS", "SQLiteJournal"]

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
        epoch INTEGER NOT NULL DEFAULT 0,
        lease_until REAL,
        wake_at REAL,
        waiting_for TEXT,
        forked_from TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE INDEX durable_runs_ready ON durable_runs(status, wake_at);
    CREATE TABLE durable_steps (
        run_id TEXT NOT NULL,
        pos TEXT NOT NULL,
        name TEXT NOT NULL,
        kind TEXT NOT NULL,
        status TEXT NOT NULL,
        result TEXT,
        error TEXT,
        attempts INTEGER NOT NULL,
        epoch INTEGER NOT NULL,
        started_at REAL NOT NULL,
        finished_at REAL,
        PRIMARY KEY (run_id, pos)
    );
    CREATE TABLE durable_signals (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL,
        name TEXT NOT NULL,
        payload TEXT NOT NULL,
        signal_id TEXT,
        sent_at REAL NOT NULL,
        consumed_pos TEXT,
        UNIQUE (run_id, signal_id)
    );
    CREATE INDEX durable_signals_wait ON durable_signals(run_id, name, consumed_pos);
    CREATE TABLE durable_audit (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL,
        at REAL NOT NULL,
        actor TEXT NOT NULL,
        action TEXT NOT NULL,
        detail TEXT NOT NULL
    );
    CREATE INDEX durable_audit_run ON durable_audit(run_id, id);
    CREATE TABLE durable_workers (
        worker_id TEXT PRIMARY KEY,
        workflows TEXT NOT NULL,
        seen_at REAL NOT NULL
    )
    """,
    # 2: claims since the run last suspended or an operator moved it (``max_claims``)
    "ALTER TABLE durable_runs ADD COLUMN claims INTEGER NOT NULL DEFAULT 0",
]

_RUN_COLS = (
    "run_id, workflow, version, structure_hash, args, strategy, status, created_at, "
    "updated_at, result, error, owner, epoch, lease_until, wake_at, waiting_for, forked_from"
)
_MARKS = ", ".join("?" * 17)
_SEL = _RUN_COLS + ", claims"  # read back with the claim counter (never inserted)
_STEP_COLS = (
    "run_id, pos, name, kind, status, result, error, attempts, epoch, started_at, "
    "finished_at, rowid"
)

_STEP_SQL = (
    "INSERT INTO durable_steps(run_id, pos, name, kind, status, result, error, attempts, "
    "epoch, started_at, finished_at) SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? "
    "WHERE EXISTS (SELECT 1 FROM durable_runs WHERE run_id = ? AND epoch = ?) "
    "ON CONFLICT(run_id, pos) DO UPDATE SET status = excluded.status, "
    "result = excluded.result, error = excluded.error, attempts = excluded.attempts, "
    "epoch = excluded.epoch, finished_at = excluded.finished_at"
)
_CONSUME_SQL = "UPDATE durable_signals SET consumed_pos = ? WHERE id = ? AND consumed_pos IS NULL"
_FINISH_SQL = (
    "UPDATE durable_runs SET status = ?, result = ?, error = ?, owner = NULL, "
    "lease_until = NULL, wake_at = NULL, waiting_for = NULL, updated_at = ? "
    "WHERE run_id = ? AND epoch = ?"
)
_SLEEP_SQL = (
    "UPDATE durable_runs SET status = 'sleeping', owner = NULL, lease_until = NULL, claims = 0, "
    "waiting_for = ?, updated_at = ?, wake_at = CASE WHEN ? IS NOT NULL AND EXISTS ("
    "SELECT 1 FROM durable_signals WHERE run_id = ? AND consumed_pos IS NULL AND "
    "instr(char(31) || ? || char(31), char(31) || name || char(31)) > 0) "
    "THEN ? ELSE ? END WHERE run_id = ? AND epoch = ?"
)
_AUDIT_SQL = "INSERT INTO durable_audit(run_id, at, actor, action, detail) VALUES (?, ?, ?, ?, ?)"
_CLAIMABLE = (
    "(status = 'pending' OR (status = 'sleeping' AND wake_at IS NOT NULL AND wake_at <= ?) "
    "OR (status = 'running' AND (lease_until IS NULL OR lease_until < ?)))"
)


def _row_params(row: RunRow) -> tuple[Any, ...]:
    return (
        row.run_id, row.workflow, row.version, row.structure_hash, row.args, row.strategy,
        row.status, row.created_at, row.updated_at, row.result, row.error, row.owner,
        row.epoch, row.lease_until, row.wake_at, row.waiting_for, row.forked_from,
    )  # fmt: skip


def _run(r: Any) -> RunRow:
    return RunRow(*r)


def _step(r: Any) -> StepRow:
    return StepRow(*r)


class SQLiteJournal:
    """The ``Journal`` protocol on one SQLite file (see ``surefoot.storage.base``).

    Args:
        db: the shared ``SQLiteDB``; the journal's tables are created by migration.

    Raises:
        SchemaVersionError: the file is foreign or from a newer surefoot (left untouched).
    """

    def __init__(self, db: SQLiteDB) -> None:
        self.db = db
        self.url = db.url
        db.migrate("durable", MIGRATIONS)

    # -- runs --------------------------------------------------------------------------

    def create_run(self, row: RunRow) -> tuple[RunRow, bool]:
        """Insert ``row`` unless the run id exists; return (the stored row, created)."""
        existing = self.get_run(row.run_id)  # the common repeat: no write lock, no commit
        if existing is not None:
            return existing, False
        with self.db.write() as c:
            cur = c.execute(
                f"INSERT INTO durable_runs({_RUN_COLS}) VALUES ({_MARKS}) "
                "ON CONFLICT(run_id) DO NOTHING",
                _row_params(row),
            )
            if cur.rowcount == 1:
                c.execute(
                    _AUDIT_SQL,
                    (row.run_id, row.created_at, row.owner or "app", "created", "{}"),
                )
                return row, True
            existing = c.execute(
                f"SELECT {_SEL} FROM durable_runs WHERE run_id = ?", (row.run_id,)
            ).fetchone()
        return _run(existing), False

    def get_run(self, run_id: str) -> RunRow | None:
        r = (
            self.db.conn()
            .execute(f"SELECT {_SEL} FROM durable_runs WHERE run_id = ?", (run_id,))
            .fetchone()
        )
        return _run(r) if r else None

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
        sql = f"SELECT {_SEL} FROM durable_runs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at DESC, run_id LIMIT ?"
        return [_run(r) for r in self.db.conn().execute(sql, (*params, int(limit)))]

    def steps(self, run_id: str) -> list[StepRow]:
        cur = self.db.conn().execute(
            f"SELECT {_STEP_COLS} FROM durable_steps WHERE run_id = ? ORDER BY rowid", (run_id,)
        )
        return [_step(r) for r in cur]

    # -- the hot path ------------------------------------------------------------------

    def commit(self, records: list[StepWrite | RunWrite]) -> list[bool]:
        """Apply ``records`` in one transaction; per record, was the writer's epoch current?"""
        out: list[bool] = []
        with self.db.write() as c:
            ex = c.execute
            for r in records:
                if type(r) is StepWrite:
                    ok = (
                        ex(
                            _STEP_SQL,
                            (
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
                            ),
                        ).rowcount
                        == 1
                    )
                    if ok and r.consume_signal is not None:
                        ex(_CONSUME_SQL, (r.pos, r.consume_signal))
                    out.append(ok)
                else:
                    out.append(self._run_write(c, r))  # type: ignore[arg-type]
        return out

    def _run_write(self, c: sqlite3.Connection, r: RunWrite) -> bool:
        if r.status == "sleeping":
            cur = c.execute(
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
            cur = c.execute(_FINISH_SQL, (r.status, r.result, r.error, r.now, r.run_id, r.epoch))
        ok = cur.rowcount == 1
        if ok:
            for action, detail in r.audit:
                c.execute(_AUDIT_SQL, (r.run_id, r.now, r.actor, action, detail))
        return ok

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
        epoch) pairs; the epoch goes up by one, fencing the previous holder.
        """
        if run_id is not None:
            cond = "run_id = ?"
            params: list[Any] = [run_id]
            if force:
                cond += (
                    " AND (status IN ('pending', 'sleeping') OR (status = 'running' AND "
                    "(owner = ? OR lease_until IS NULL OR lease_until < ?)))"
                )
                params += [owner, now]
            else:
                cond += f" AND {_CLAIMABLE}"
                params += [now, now]
        else:
            if not workflows:
                return []
            values = ", ".join("(?, ?)" for _ in workflows)
            cond = (
                f"run_id IN (SELECT run_id FROM durable_runs WHERE {_CLAIMABLE} AND "
                f"(workflow, version) IN (VALUES {values}) "
                "ORDER BY COALESCE(wake_at, created_at) LIMIT ?)"
            )
            params = [now, now]
            for w in workflows:
                params += [w[0], w[1]]
            params.append(int(limit))
            # An idle worker polls often: look before taking the write lock.
            probe = (
                self.db.conn()
                .execute(f"SELECT 1 FROM durable_runs WHERE {cond} LIMIT 1", params)
                .fetchone()
            )
            if probe is None:
                return []
        with self.db.write() as c:
            rows = c.execute(
                "UPDATE durable_runs SET status = 'running', owner = ?, epoch = epoch + 1, "
                "claims = claims + 1, "
                f"lease_until = ?, updated_at = ? WHERE {cond} RETURNING run_id, epoch",
                (owner, lease_until, now, *params),
            ).fetchall()
        return [(r[0], r[1]) for r in rows]

    def heartbeat(
        self, owner: str, runs: list[tuple[str, int]], *, lease_until: float, now: float
    ) -> list[str]:
        """Extend the leases ``owner`` holds; return the run ids it no longer holds."""
        lost: list[str] = []
        if not runs:
            return lost
        with self.db.write() as c:
            for run_id, epoch in runs:
                cur = c.execute(
                    "UPDATE durable_runs SET lease_until = ? WHERE run_id = ? AND epoch = ? "
                    "AND status = 'running'",
                    (lease_until, run_id, epoch),
                )
                if cur.rowcount != 1:
                    lost.append(run_id)
        return lost

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
        marks = ", ".join("?" for _ in from_statuses)
        with self.db.write() as c:
            if not c.execute("SELECT 1 FROM durable_runs WHERE run_id = ?", (run_id,)).fetchone():
                raise UnknownRunError(run_id, self.url)
            row = c.execute(
                "UPDATE durable_runs SET status = ?, epoch = epoch + 1, owner = NULL, claims = 0, "
                "lease_until = NULL, wake_at = NULL, waiting_for = NULL, updated_at = ? "
                f"WHERE run_id = ? AND status IN ({marks}) RETURNING {_SEL}",
                (status, now, run_id, *from_statuses),
            ).fetchone()
            if row is None:
                return None
            for pos in reset_steps or ():
                c.execute("DELETE FROM durable_steps WHERE run_id = ? AND pos = ?", (run_id, pos))
            epoch = row[_SEL.split(", ").index("epoch")]
            for w in put_steps or ():
                c.execute(
                    _STEP_SQL,
                    (
                        run_id, w.pos, w.name, w.kind, w.status, w.result, w.error, w.attempts,
                        epoch, w.started_at, w.finished_at, run_id, epoch,
                    ),
                )  # fmt: skip
            c.execute(_AUDIT_SQL, (run_id, now, actor, action, detail))
        return _run(row)

    def signal(
        self, run_id: str, name: str, payload: str, *, now: float, signal_id: str | None
    ) -> bool:
        """Queue a signal for a run; wake the run if it sleeps waiting for ``name``.

        Returns False when ``signal_id`` was already delivered (nothing changed).

        Raises:
            UnknownRunError: no such run.
        """
        with self.db.write() as c:
            if not c.execute("SELECT 1 FROM durable_runs WHERE run_id = ?", (run_id,)).fetchone():
                raise UnknownRunError(run_id, self.url)
            cur = c.execute(
                "INSERT INTO durable_signals(run_id, name, payload, signal_id, sent_at) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT(run_id, signal_id) DO NOTHING",
                (run_id, name, payload, signal_id, now),
            )
            if cur.rowcount != 1:
                return False
            c.execute(
                "UPDATE durable_runs SET wake_at = ? WHERE run_id = ? AND status = 'sleeping' "
                "AND instr(char(31) || waiting_for || char(31), char(31) || ? || char(31)) > 0",
                (now, run_id, name),
            )
        return True

    def pending_signal(self, run_id: str, name: str) -> tuple[int, str] | None:
        r = (
            self.db.conn()
            .execute(
                "SELECT id, payload FROM durable_signals WHERE run_id = ? AND name = ? "
                "AND consumed_pos IS NULL ORDER BY id LIMIT 1",
                (run_id, name),
            )
            .fetchone()
        )
        return (r[0], r[1]) if r else None

    def audit(self, run_id: str, *, actor: str, action: str, detail: str, now: float) -> None:
        with self.db.write() as c:
            c.execute(_AUDIT_SQL, (run_id, now, actor, action, detail))

    def audit_log(self, run_id: str) -> list[AuditRow]:
        cur = self.db.conn().execute(
            "SELECT run_id, id, at, actor, action, detail FROM durable_audit WHERE run_id = ? "
            "ORDER BY id",
            (run_id,),
        )
        return [AuditRow(*r) for r in cur]

    def fork(self, run_id: str, new_run_id: str, before_pos: str, *, now: float) -> RunRow:
        """Copy a run's header (as pending) and its steps journalled before ``before_pos``.

        Raises:
            UnknownRunError: no such run.
            ConfigError: the run has no step at ``before_pos``.
            RunConflictError: ``new_run_id`` is taken.
        """
        with self.db.write() as c:
            src = c.execute(
                f"SELECT {_SEL} FROM durable_runs WHERE run_id = ?", (run_id,)
            ).fetchone()
            if src is None:
                raise UnknownRunError(run_id, self.url)
            at = c.execute(
                "SELECT rowid FROM durable_steps WHERE run_id = ? AND pos = ?", (run_id, before_pos)
            ).fetchone()
            if at is None:
                raise ConfigError(
                    f"run {run_id!r} has no journalled step at position {before_pos!r}; see "
                    f"the positions with `surefoot runs show {run_id}`"
                )
            if c.execute("SELECT 1 FROM durable_runs WHERE run_id = ?", (new_run_id,)).fetchone():
                raise RunConflictError(
                    new_run_id, f"run id {new_run_id!r} is taken; fork to another id"
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
            c.execute(
                f"INSERT INTO durable_runs({_RUN_COLS}) VALUES ({_MARKS})",
                _row_params(row),
            )
            c.execute(
                "INSERT INTO durable_steps(run_id, pos, name, kind, status, result, error, "
                "attempts, epoch, started_at, finished_at) SELECT ?, pos, name, kind, status, "
                "result, error, attempts, 0, started_at, finished_at FROM durable_steps "
                "WHERE run_id = ? AND rowid < ? AND status IN ('done', 'error') ORDER BY rowid",
                (new_run_id, run_id, at[0]),
            )
            c.execute(
                _AUDIT_SQL,
                (
                    new_run_id,
                    now,
                    "operator",
                    "forked",
                    json.dumps({"from": run_id, "before": before_pos}),
                ),
            )
        return row

    # -- workers -----------------------------------------------------------------------

    def register_worker(
        self, worker_id: str, workflows: list[tuple[str, str]], *, now: float
    ) -> None:
        text = ";".join(f"{n}@{v}" for n, v in sorted(workflows))
        with self.db.write() as c:
            c.execute(
                "INSERT INTO durable_workers(worker_id, workflows, seen_at) VALUES (?, ?, ?) "
                "ON CONFLICT(worker_id) DO UPDATE SET workflows = excluded.workflows, "
                "seen_at = excluded.seen_at",
                (worker_id, text, now),
            )

    def live_workflows(self, *, since: float) -> set[tuple[str, str]]:
        out: set[tuple[str, str]] = set()
        for (text,) in self.db.conn().execute(
            "SELECT workflows FROM durable_workers WHERE seen_at >= ?", (since,)
        ):
            for item in str(text).split(";"):
                if "@" in item:
                    n, _, v = item.rpartition("@")
                    out.add((n, v))
        return out
