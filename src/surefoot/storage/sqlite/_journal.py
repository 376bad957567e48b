"""The durable journal on SQLite: the shared SQL journal plus what only SQLite does.

The statements are those of :mod:`surefoot.storage.sql.journal`, run under ``BEGIN
IMMEDIATE`` (the file's write lock fences every write by the lease epoch). What stays here:
the migrations (SQLite types), the step statements (a run's steps in one range of one
b-tree: :data:`SQLITE_STEPS`), the heartbeat (one short transaction); the wake-ups are in
``._waking``.
"""

from __future__ import annotations

from ..sql.chunks import SQLITE_MIGRATION
from ..sql.journal import SQLJournal
from ..sql.observed import ObservedLeases
from ..sql.schema import MAX_ORDER, StepSQL
from ._db import SQLiteDB
from ._dialect import SQLiteDialect
from ._liveness import FileLiveness
from ._waking import SQLiteWaking

__all__ = ["MIGRATIONS", "SQLITE_STEPS", "SQLiteJournal"]

_COLS = "run_id, pos, name, kind, status, result, error, attempts, epoch, started_at, finished_at"
_ORDER = MAX_ORDER  # a run's journal orders: its steps' ids are run_no << 24 + order


def _span(run: str, col: str = "id") -> str:
    """``col`` within the id range of the run whose id is parameter ``run`` (``?1``)."""
    return (
        f"{col} BETWEEN (SELECT run_no << 24 FROM durable_runs WHERE run_id = {run}) "
        f"AND (SELECT (run_no << 24) + {_ORDER} FROM durable_runs WHERE run_id = {run})"
    )


# The step's id within the fenced run ``r``: from the order the writer gave (the hot path),
# else the row journalled at the position, else after the run's last row.
_IN_RUN = f"s.id BETWEEN r.run_no << 24 AND (r.run_no << 24) + {_ORDER}"
_STEP_ID = (
    "COALESCE((r.run_no << 24) + {order}, "
    f"(SELECT s.id FROM durable_steps s WHERE {_IN_RUN} AND s.pos = {{pos}}), "
    f"(SELECT COALESCE(MAX(s.id), r.run_no << 24) + 1 FROM durable_steps s WHERE {_IN_RUN}))"
)
# A position's row is updated only if the id found is that position's (a wrong order
# given updates nothing: the write is refused, as a stale epoch's).
_STEP_UPSERT = (
    "ON CONFLICT (id) DO UPDATE SET status = excluded.status, result = excluded.result, "
    "error = excluded.error, attempts = excluded.attempts, epoch = excluded.epoch, "
    "finished_at = excluded.finished_at, checksum = excluded.checksum "
    "WHERE durable_steps.run_id = excluded.run_id AND durable_steps.pos = excluded.pos"
)
_VALUES = "?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11"
# The step's checksum (storage/rowsum.py) is the statement's last parameter.
_SUMMED = f"id, {_COLS}, checksum"

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
    # 3: the run listing's filters and orders (``page_runs``, ``count_runs``)
    """
    CREATE INDEX durable_runs_status_created ON durable_runs(status, created_at);
    CREATE INDEX durable_runs_created ON durable_runs(created_at);
    CREATE INDEX durable_runs_versions ON durable_runs(workflow, version)
    """,
    # 4: queues, children, deadlines, schedules; see storage/sql/queues.py, children.py, …
    """
    ALTER TABLE durable_runs ADD COLUMN queue TEXT;
    ALTER TABLE durable_runs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE durable_runs ADD COLUMN dedup_id TEXT;
    ALTER TABLE durable_runs ADD COLUMN parent_id TEXT;
    ALTER TABLE durable_runs ADD COLUMN deadline_at REAL;
    ALTER TABLE durable_runs ADD COLUMN started_at REAL;
    CREATE UNIQUE INDEX durable_runs_dedup ON durable_runs (queue, dedup_id)
        WHERE dedup_id IS NOT NULL AND status NOT IN ('succeeded', 'failed', 'cancelled');
    CREATE INDEX durable_runs_queue ON durable_runs (queue, status) WHERE queue IS NOT NULL;
    CREATE INDEX durable_runs_parent ON durable_runs (parent_id) WHERE parent_id IS NOT NULL;
    CREATE INDEX durable_runs_done ON durable_runs (status, updated_at);
    CREATE TABLE durable_queues (
        name TEXT PRIMARY KEY,
        concurrency INTEGER,
        worker_concurrency INTEGER,
        rate_limit INTEGER,
        rate_period REAL,
        updated_at REAL NOT NULL
    );
    CREATE TABLE durable_schedules (
        name TEXT PRIMARY KEY,
        workflow TEXT NOT NULL,
        cron TEXT NOT NULL,
        args TEXT NOT NULL,
        catchup TEXT NOT NULL,
        next_at REAL NOT NULL,
        updated_at REAL NOT NULL
    )
    """,
    # 5: large step results as content-addressed chunks; see storage/sql/chunks.py
    SQLITE_MIGRATION,
    # 6: the worker holds a liveness lock (``flock``): see ._liveness
    "ALTER TABLE durable_workers ADD COLUMN liveness TEXT",
    # 7: the named queues a worker takes part in (a JSON array), so a wake-up for a queued
    # run is ranked among the workers that can claim it (storage/sql/liveness.py)
    "ALTER TABLE durable_workers ADD COLUMN queues TEXT",
    # 8: a run's steps in one range of one b-tree (see SQLITE_STEPS below): a step row's
    # id is its run's number << 24 + its journal order. A run's number is a column (a
    # rowid may change in VACUUM), given at insert by the trigger. Existing steps keep
    # their order (the old rowid's); steps of no run are not carried over.
    f"""
    ALTER TABLE durable_runs ADD COLUMN run_no INTEGER;
    UPDATE durable_runs SET run_no = rowid;
    CREATE UNIQUE INDEX durable_runs_no ON durable_runs (run_no);
    CREATE TRIGGER durable_runs_no AFTER INSERT ON durable_runs WHEN NEW.run_no IS NULL
    BEGIN
        UPDATE durable_runs SET run_no = (SELECT COALESCE(MAX(run_no), 0) + 1
            FROM durable_runs) WHERE rowid = NEW.rowid;
    END;
    CREATE TABLE durable_steps_8 (
        id INTEGER PRIMARY KEY,
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
        finished_at REAL
    );
    INSERT INTO durable_steps_8 (id, {_COLS})
        SELECT (r.run_no << 24) + ROW_NUMBER() OVER (PARTITION BY s.run_id ORDER BY s.rowid),
            {", ".join("s." + c for c in _COLS.split(", "))}
        FROM durable_steps s JOIN durable_runs r ON r.run_id = s.run_id;
    DROP TABLE durable_steps;
    ALTER TABLE durable_steps_8 RENAME TO durable_steps
    """,
    # 9: each step row's checksum (storage/rowsum.py), checked when the row is read; the
    # rows journalled before have NULL there and are served unchecked, as before
    "ALTER TABLE durable_steps ADD COLUMN checksum INTEGER",
]


# A run's steps are one range of one b-tree (migration 8): a step is one page written,
# where a (run_id, pos) index made it two; the position's row is found by the order the
# run's writer gives (StepWrite.order), by the position within the range otherwise.
SQLITE_STEPS = StepSQL(
    # The record's order given (every record a run writes): the id is computed, no lookup.
    # A statement that could also find it (below) costs 1.3x this one even when the order
    # is given (8.4 against 6.5 µs warm, 2026-12-05), so the two are kept apart.
    write=(
        f"INSERT INTO durable_steps ({_SUMMED}) SELECT (r.run_no << 24) + ?14, {_VALUES}, ?15 "
        "FROM durable_runs r WHERE r.run_id = ?12 AND r.epoch = ?13 AND ?14 IS NOT NULL "
        f"{_STEP_UPSERT}"
    ),
    # No order given (an operator's edit): the position's row, else after the run's last.
    found=(
        f"INSERT INTO durable_steps ({_SUMMED}) SELECT "
        f"{_STEP_ID.format(order='?14', pos='?2')}, {_VALUES}, ?15 FROM durable_runs r "
        f"WHERE r.run_id = ?12 AND r.epoch = ?13 {_STEP_UPSERT}"
    ),
    child=(
        f"INSERT INTO durable_steps ({_SUMMED}) SELECT "
        f"{_STEP_ID.format(order='?18', pos='?2')}, {_VALUES}, ?19 FROM durable_runs r "
        "WHERE r.run_id = ?12 AND r.epoch = ?13 AND EXISTS (SELECT 1 FROM durable_runs c "
        "WHERE c.run_id = ?14 AND c.parent_id = ?15 AND c.workflow = ?16 AND c.args = ?17) "
        f"{_STEP_UPSERT}"
    ),
    of_run=(
        f"SELECT {_COLS}, id & {_ORDER}, checksum FROM durable_steps WHERE {_span('?1')} "
        "AND run_id = ?1 ORDER BY id"
    ),
    at=f"SELECT id FROM durable_steps WHERE {_span('?1')} AND pos = ?2",
    delete=f"DELETE FROM durable_steps WHERE {_span('?1')} AND pos = ?2",
    delete_all=f"DELETE FROM durable_steps WHERE {_span('?1')}",
    copy=(
        f"INSERT INTO durable_steps ({_SUMMED}) SELECT ((SELECT run_no FROM durable_runs "
        f"WHERE run_id = ?1) << 24) + (s.id & {_ORDER}), ?1, s.pos, s.name, s.kind, s.status, "
        "s.result, s.error, s.attempts, 0, s.started_at, s.finished_at, s.checksum "
        "FROM durable_steps s "
        f"WHERE {_span('?2', 's.id')} AND s.id < ?3 AND s.status IN ('done', 'error') "
        "ORDER BY s.id"
    ),
    ordered=True,
    summed=True,
)


class SQLiteJournal(SQLJournal):
    """The ``Journal`` protocol on one SQLite file (see ``surefoot.storage.journal``).

    Args:
        db: the shared ``SQLiteDB``; the journal's tables are created by migration.

    Raises:
        SchemaVersionError: the file is foreign or from a newer surefoot (left untouched).
    """

    def __init__(self, db: SQLiteDB) -> None:
        self.db = db
        if db.migrate("durable", MIGRATIONS):
            db.presize_wal()  # a new journal's first 1,000 commits would each extend its -wal
        locks = FileLiveness(db.path) if FileLiveness.available(db.path) else None
        d = SQLiteDialect(db)
        # No server clock here: a live holder's lease is also judged by observation, so a
        # process whose wall clock runs ahead does not take its runs (storage/sql/observed.py).
        observed = None if locks is None else ObservedLeases(d, locks.alive)
        super().__init__(d, SQLITE_STEPS, locks=locks, waking=SQLiteWaking(db), observed=observed)

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
