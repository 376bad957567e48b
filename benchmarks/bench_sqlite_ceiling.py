"""What a SQLite commit can cost at best: the ceiling under issue 14's ratio targets.

The statebus targets are ratios to one ``BEGIN IMMEDIATE; INSERT; COMMIT`` into a one-b-tree
table (WAL, ``synchronous=FULL``). surefoot's writes must write more than that: a stream
append keeps a message by sequence number *and* finds a retry by its id (a b-tree each), a
versioned write keeps the key's row and its change-log row. This script measures, in one run
on one file, alternated one operation at a time so fsync drift hits all alike:

* the floor, and a bare ``INSERT`` into tables with 1, 2 and 3 b-trees (the pages a commit
  writes), each alone in its own transaction;
* the stream append as SQL alone, no Python around it: as surefoot stores it (3 b-trees:
  the table, ``(stream, seq)``, ``(stream, message_id)``), a 2-b-tree design whose rowid
  encodes (stream, seq), and a 2-b-tree design whose rowid is a hash of the message id;
* the durable step as SQL alone: surefoot's fenced upsert (``STEP_SQL``, its own
  transaction) into its step table (2 b-trees: the table and ``(run_id, pos)``), and the
  same fenced insert into a 1-b-tree design whose rowid encodes (run, journal order);
* warm and cold Python: ``Store.write`` against the backend's ``write`` with
  ``synchronous=OFF`` (no fsync), back to back (warm) and after a 0.2 ms sleep before each
  (cold: what the code between two fsyncs meets, its caches taken by other work);
* the WAL's growth: the floor's commit on a file whose ``-wal`` is reused (written past its
  first checkpoint, at 1,000 frames, after which SQLite writes it again from its start)
  against the same commit on a new file (each commit extends the ``-wal``), alternated in
  blocks of 100 commits, a new file for every block; and on a new file whose ``-wal`` was
  first extended to 1,000 frames of zeros under the write lock (what surefoot's
  ``SQLiteDB.presize_wal`` does when it creates a journal), with the time that extension took.

Each line prints the median µs per operation and the ratio to the floor. Usage:

    .venv/bin/python benchmarks/bench_sqlite_ceiling.py [--n 2000]
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from surefoot.statebus import Store
from surefoot.storage.sql.schema import STEP_SQL

TABLES = """
CREATE TABLE floor (k INTEGER PRIMARY KEY, v TEXT);
CREATE TABLE one (k INTEGER PRIMARY KEY, v TEXT);
CREATE TABLE two (a TEXT, b INTEGER, v TEXT, PRIMARY KEY (a, b));
CREATE TABLE three (a TEXT, b INTEGER, m TEXT, v TEXT, PRIMARY KEY (a, b), UNIQUE (a, m));
CREATE TABLE ids (stream TEXT, message_id TEXT, PRIMARY KEY (stream, message_id));
CREATE TABLE s3 (stream TEXT NOT NULL, seq INTEGER NOT NULL, message_id TEXT NOT NULL,
    payload TEXT NOT NULL, appended_at REAL NOT NULL,
    PRIMARY KEY (stream, seq), UNIQUE (stream, message_id));
CREATE TABLE srange (id INTEGER PRIMARY KEY, stream TEXT NOT NULL, message_id TEXT NOT NULL,
    payload TEXT NOT NULL, appended_at REAL NOT NULL, UNIQUE (stream, message_id));
CREATE TABLE shash (stream TEXT NOT NULL, seq INTEGER NOT NULL, message_id TEXT NOT NULL,
    payload TEXT NOT NULL, appended_at REAL NOT NULL, PRIMARY KEY (stream, seq));
CREATE TABLE durable_runs (run_id TEXT PRIMARY KEY, epoch INTEGER NOT NULL, args TEXT);
CREATE TABLE durable_steps (run_id TEXT NOT NULL, pos TEXT NOT NULL, name TEXT NOT NULL,
    kind TEXT NOT NULL, status TEXT NOT NULL, result TEXT, error TEXT, attempts INTEGER NOT NULL,
    epoch INTEGER NOT NULL, started_at REAL NOT NULL, finished_at REAL, PRIMARY KEY (run_id, pos));
CREATE TABLE steps_range (id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, pos TEXT NOT NULL,
    name TEXT NOT NULL, kind TEXT NOT NULL, status TEXT NOT NULL, result TEXT, error TEXT,
    attempts INTEGER NOT NULL, epoch INTEGER NOT NULL, started_at REAL NOT NULL,
    finished_at REAL);
INSERT INTO durable_runs VALUES ('run-1', 3, '[]');
"""
# surefoot's step write (storage/sql/journal.py), and the same fenced insert with the rowid
# = run number << 24 | journal order: no (run_id, pos) index (a retry would be found by the
# writer, not by the index)
STEP_2 = STEP_SQL.format(share_lock="")
STEP_RANGE = (
    "INSERT INTO steps_range (id, run_id, pos, name, kind, status, result, error, attempts, "
    "epoch, started_at, finished_at) SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? FROM "
    "durable_runs WHERE run_id = ? AND epoch = ?"
)
# surefoot's append (storage/sqlite/_stream.py), on its own table
APPEND_3 = """INSERT INTO s3 (stream, seq, message_id, payload, appended_at)
SELECT :s, last + 1, :id, :payload, :now
FROM (SELECT COALESCE((SELECT MAX(seq) FROM s3 WHERE stream = :s), 0) AS last)
WHERE NOT EXISTS (SELECT 1 FROM ids WHERE stream = :s AND message_id = :id)
ON CONFLICT (stream, message_id) DO NOTHING RETURNING seq"""
# rowid = stream number << 40 | seq: the table is in (stream, seq) order, no index for it
APPEND_RANGE = """INSERT INTO srange (id, stream, message_id, payload, appended_at)
SELECT last + 1, :s, :id, :payload, :now
FROM (SELECT COALESCE((SELECT MAX(id) FROM srange WHERE id BETWEEN :lo AND :hi), :lo) AS last)
WHERE NOT EXISTS (SELECT 1 FROM ids WHERE stream = :s AND message_id = :id)
ON CONFLICT (stream, message_id) DO NOTHING RETURNING id - :lo"""
# rowid = a hash of (stream, message_id): a retry is found by rowid, no index for the id
APPEND_HASH = """INSERT INTO shash (rowid, stream, seq, message_id, payload, appended_at)
SELECT :h, :s, last + 1, :id, :payload, :now
FROM (SELECT COALESCE((SELECT MAX(seq) FROM shash WHERE stream = :s), 0) AS last)
WHERE NOT EXISTS (SELECT 1 FROM shash WHERE rowid = :h)
  AND NOT EXISTS (SELECT 1 FROM ids WHERE stream = :s AND message_id = :id)
RETURNING seq"""


def _slot(stream: str, message_id: str) -> int:
    digest = hashlib.blake2b(f"{stream}\x00{message_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def sql_ceiling(folder: Path, n: int) -> dict[str, float]:
    """Median µs per operation, alternated one at a time on one WAL + FULL file."""
    c = sqlite3.connect(folder / "ceiling.db", isolation_level=None)
    c.execute("PRAGMA journal_mode=WAL")
    c.execute("PRAGMA synchronous=FULL")
    c.executescript(TABLES)
    lo = 5 << 40

    def tx(sql: str, params: tuple[object, ...]) -> Callable[[], None]:
        def run() -> None:
            c.execute("BEGIN IMMEDIATE")
            c.execute(sql, params)
            c.execute("COMMIT")

        return run

    def one_statement(sql: str, params: dict[str, object]) -> Callable[[], None]:
        def run() -> None:
            c.execute(sql, params).fetchall()

        return run

    def alone(sql: str, params: tuple[object, ...]) -> Callable[[], None]:
        def run() -> None:
            c.execute(sql, params)

        return run

    times: dict[str, list[float]] = {}
    for i in range(n):
        msg = {"s": "bench", "id": f"m{i}", "payload": f'{{"i":{i}}}', "now": time.time()}
        now = time.time()
        step = ("run-1", str(i), "step", "step", "done", str(i + 1), None, 1, 3, now, now)
        ops = {
            "floor": tx("INSERT INTO floor VALUES (?, ?)", (i, "x")),
            "1 b-tree": tx("INSERT INTO one VALUES (?, ?)", (i, "x")),
            "2 b-trees": tx("INSERT INTO two VALUES ('run', ?, ?)", (i, "x")),
            "3 b-trees": tx("INSERT INTO three VALUES ('run', ?, ?, ?)", (i, f"m{i}", "x")),
            "append, surefoot's (3 b-trees)": one_statement(APPEND_3, msg),
            "append, rowid = (stream, seq) (2)": one_statement(
                APPEND_RANGE, {**msg, "lo": lo, "hi": lo + (1 << 40) - 1}
            ),
            "append, rowid = hash(id) (2)": one_statement(
                APPEND_HASH, {**msg, "h": _slot("bench", f"m{i}")}
            ),
            "step, surefoot's (2 b-trees)": alone(STEP_2, (*step, "run-1", 3)),
            "step, rowid = (run, order) (1)": alone(STEP_RANGE, ((1 << 24) + i, *step, "run-1", 3)),
        }
        names = list(ops)
        k = i % len(names)  # rotate: no operation always follows the same one
        for name in names[k:] + names[:k]:
            t0 = time.perf_counter()
            ops[name]()
            times.setdefault(name, []).append(time.perf_counter() - t0)
    c.close()
    return {name: 1e6 * statistics.median(ts) for name, ts in times.items()}


def python_cold(folder: Path, n: int) -> dict[str, float]:
    """Median µs of ``Store.write`` and the backend's ``write`` (no fsync), warm and cold."""
    st = Store(f"sqlite:///{folder / 'python.db'}?synchronous=OFF", namespace="bench")
    backend = st.state
    version = st.write("doc", {"n": 0}).version
    raw = backend.write("raw", '{"n":0}', author="system", trust="system", expect=None, now=0.0)
    raw_version = raw.version
    out: dict[str, float] = {}
    for label, pause in (("warm", 0.0), ("cold", 0.0002)):
        store_t: list[float] = []
        backend_t: list[float] = []
        for i in range(n):
            if pause:
                time.sleep(pause)
            t0 = time.perf_counter()
            version = st.write("doc", {"n": i}, expect=version).version
            store_t.append(time.perf_counter() - t0)
            if pause:
                time.sleep(pause)
            t0 = time.perf_counter()
            raw_version = backend.write(
                "raw", f'{{"n":{i}}}', author="system", trust="system", expect=raw_version,
                now=time.time(),
            ).version  # fmt: skip
            backend_t.append(time.perf_counter() - t0)
        out[f"Store.write, {label}"] = 1e6 * statistics.median(store_t)
        out[f"backend write, {label}"] = 1e6 * statistics.median(backend_t)
    st.close()
    return out


def wal_growth(folder: Path, blocks: int) -> dict[str, float]:
    """Median µs per floor commit on a settled file and on new files (see the module docs)."""

    def connect(path: Path) -> sqlite3.Connection:
        c = sqlite3.connect(path, isolation_level=None)
        c.execute("PRAGMA journal_mode=WAL")
        c.execute("PRAGMA synchronous=FULL")
        c.execute("CREATE TABLE IF NOT EXISTS floor (k INTEGER PRIMARY KEY, v TEXT)")
        return c

    def commits(c: sqlite3.Connection, n: int) -> list[float]:
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            c.execute("BEGIN IMMEDIATE")
            c.execute("INSERT INTO floor (v) VALUES ('x')")
            c.execute("COMMIT")
            out.append(time.perf_counter() - t0)
        return out

    def presize(path: Path, frames: int = 1_000) -> tuple[sqlite3.Connection, float]:
        """A new file whose ``-wal`` is extended with zeros, beyond its end only, while this
        connection holds the write lock (zeros are no valid frame: SQLite stops there)."""
        c = connect(path)
        t0 = time.perf_counter()
        c.execute("BEGIN IMMEDIATE")
        try:
            wal = Path(f"{path}-wal")
            have, want = wal.stat().st_size, 32 + frames * (4096 + 24)
            if have < want:
                with wal.open("r+b") as f:
                    f.seek(have)
                    f.write(bytes(want - have))
                    f.flush()
                    os.fsync(f.fileno())
        finally:
            c.execute("COMMIT")
        return c, time.perf_counter() - t0

    settled = connect(folder / "settled.db")
    commits(settled, 1_100)  # past the first checkpoint: the WAL is reused from here on
    times: dict[str, list[float]] = {
        "reused -wal (settled file)": [],
        "growing -wal (new file)": [],
        "pre-sized -wal (new file)": [],
    }
    extend: list[float] = []
    for b in range(blocks):
        times["reused -wal (settled file)"] += commits(settled, 100)
        new = connect(folder / f"new-{b}.db")
        times["growing -wal (new file)"] += commits(new, 100)
        new.close()
        sized, took = presize(folder / f"sized-{b}.db")
        extend.append(took)
        times["pre-sized -wal (new file)"] += commits(sized, 100)
        sized.close()
    settled.close()
    out = {name: 1e6 * statistics.median(ts) for name, ts in times.items()}
    out["extend ms"] = 1e3 * statistics.median(extend)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=2000, help="operations of each kind")
    args = ap.parse_args()
    started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    print(f"started {started}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="bench-ceiling-") as tmp:
        sql = sql_ceiling(Path(tmp), args.n)
        py = python_cold(Path(tmp), args.n)
        growth = wal_growth(Path(tmp), max(args.n // 200, 5))
    floor = sql["floor"]
    print(f"\nSQLite WAL + FULL, median µs per operation (n={args.n} each, alternated)")
    for name, us in sql.items():
        print(f"  {name:36} {us:8.1f} µs  {floor / us:5.2f}x the floor's rate")
    print("\nPython around one versioned write, synchronous=OFF (no fsync), median µs")
    for name, us in py.items():
        print(f"  {name:36} {us:8.1f} µs")
    for label in ("warm", "cold"):
        extra = py[f"Store.write, {label}"] - py[f"backend write, {label}"]
        print(f"  Store.write over the backend, {label}: {extra:5.1f} µs")
    print("\nThe floor's commit while the -wal grows, median µs (blocks of 100, alternated)")
    took = growth.pop("extend ms")
    reused = growth["reused -wal (settled file)"]
    for name, us in growth.items():
        print(f"  {name:36} {us:8.1f} µs  {us / reused:5.2f}x the reused -wal's")
    print(f"  extending a new -wal to 1,000 frames took {took:.1f} ms (median)")


if __name__ == "__main__":
    main()
