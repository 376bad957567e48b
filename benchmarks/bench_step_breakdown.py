"""Where a durable step's time goes: surefoot's step taken apart, beside the hand-written
fenced step and the SQLite floor of ``bench_durable.py``, in one run.

Three parts, each alternating its cases so the machine's drift hits all alike:

* warm (a folder on ``/dev/shm``, where an fsync costs nothing): CPU µs per step of a
  1,000-step run; the same with the step's statement replaced by a stub (what surefoot's
  Python costs around it); the hand-written step with and without its statement; and the
  statements alone: the floor's ``BEGIN``/``INSERT``/``COMMIT``, the fenced step upsert
  into a table and its ``(run_id, pos)`` index (two b-trees: surefoot's SQLite layout
  before durable migration 8, PostgreSQL's), and the same upsert into one b-tree whose
  rowid is (the run's number, the step's journal order), that order given by the writer
  (surefoot's SQLite layout since migration 8) or found by the statement;
* a run: CPU µs of a run of no steps (``start`` then ``result``: two commits, the hand-off
  to the app's loop thread and back), with the process free to use every CPU and pinned to
  one (a thread woken on an idle virtual CPU costs more than one woken on a busy one);
* on the disk (``--dir``, settled files as in ``bench_durable.py``): user and system CPU
  µs per step (``getrusage``) of the floor, the hand-written step, surefoot, and the step
  statements alone as above.

Nothing here has a target: it says which part of surefoot's ratio to the floor is whose.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sqlite3
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_durable import CPU, HandWritten, Kept, floor, settle_floor
from surefoot.storage.sql.schema import STEP_SQL

WARM_STEPS = 1_000


def _cpu(fn: Callable[[], Any]) -> float:
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def warm(rounds: int) -> dict[str, float]:
    """Median CPU µs per step of each warm case (see the module docs)."""
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    d = Path(tempfile.mkdtemp(prefix="bench-breakdown-", dir=shm))
    try:
        kept, hand = Kept(d), HandWritten(d)
        inner: Any = kept.app.journal.wrapped  # type: ignore[attr-defined]  # the SQL journal
        real = inner._write_step

        def surefoot(stub: bool) -> float:
            inner._write_step = (lambda params: 1) if stub else real
            try:
                run_id = f"w{time.monotonic_ns()}"
                return _cpu(lambda: kept.app.start(kept.flow, WARM_STEPS, run_id=run_id).result(60))
            finally:
                inner._write_step = real

        sql = _statements(d)
        cases: dict[str, Callable[[], float]] = {
            "surefoot step": lambda: surefoot(False),
            "surefoot step, statement stubbed": lambda: surefoot(True),
            "hand-written step": lambda: sum(hand.run()[1] for _ in range(WARM_STEPS // 100)),
            "hand-written, no statement": lambda: sum(
                hand.run(write=False)[1] for _ in range(WARM_STEPS // 100)
            ),
            **sql,
        }
        got = _alternate(cases, rounds)
        kept.app.close()
        hand.close()
        return {name: 1e6 * t / WARM_STEPS for name, t in got.items()}
    finally:
        shutil.rmtree(d, ignore_errors=True)


# A one-b-tree layout for the step table (not surefoot's): the rowid is the run's number
# << 24 plus the step's journal order, so a run's steps are one range of the table and a
# re-journalled position is the same rowid. ``run_no`` is a column with a unique index,
# given by a trigger (a rowid may change in VACUUM; a column does not).
_RANGE_SCHEMA = """
CREATE TABLE range_runs (run_id TEXT PRIMARY KEY, epoch INTEGER NOT NULL, run_no INTEGER);
CREATE UNIQUE INDEX range_runs_no ON range_runs (run_no);
CREATE TRIGGER range_runs_no AFTER INSERT ON range_runs WHEN NEW.run_no IS NULL BEGIN
    UPDATE range_runs SET run_no = (SELECT COALESCE(MAX(run_no), 0) + 1 FROM range_runs)
    WHERE rowid = NEW.rowid;
END;
CREATE TABLE range_steps (id INTEGER PRIMARY KEY, {cols});
"""
_RANGE_COLS = (
    "id, run_id, pos, name, kind, status, result, error, attempts, epoch, started_at, finished_at"
)
_RANGE_UPSERT = (
    "ON CONFLICT (id) DO UPDATE SET status = excluded.status, result = excluded.result, "
    "error = excluded.error, attempts = excluded.attempts, epoch = excluded.epoch, "
    "finished_at = excluded.finished_at"
)
_RANGE_VALUES = "?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11 FROM range_runs r"
_RANGE_FENCE = "WHERE r.run_id = ?12 AND r.epoch = ?13"
# the journal order given by the writer (?14), which must then know it for every row
RANGE_GIVEN = (
    f"INSERT INTO range_steps ({_RANGE_COLS}) SELECT (r.run_no << 24) + ?14, {_RANGE_VALUES} "
    f"{_RANGE_FENCE} {_RANGE_UPSERT}"
)
# the journal order found by the statement: the run's last rowid + 1 (a seek)
_SPAN = "s.id BETWEEN r.run_no << 24 AND (r.run_no << 24) + 16777215"
RANGE_FOUND = (
    f"INSERT INTO range_steps ({_RANGE_COLS}) SELECT (SELECT COALESCE(MAX(s.id), "
    f"r.run_no << 24) + 1 FROM range_steps s WHERE {_SPAN}), {_RANGE_VALUES} "
    f"{_RANGE_FENCE} {_RANGE_UPSERT}"
)


TWO = "SQL: 2 b-trees (the step statement before migration 8)"
GIVEN = "SQL: 1 b-tree, order given (surefoot's since migration 8)"
FOUND = "SQL: 1 b-tree, order found by the statement"


def _statements(d: Path, n: int = WARM_STEPS) -> dict[str, Callable[[], float]]:
    """The statements alone, ``n`` of each per call, on one WAL + FULL file, each call on a
    new run (as surefoot's steps: a run's row is read for its epoch)."""
    c = sqlite3.connect(d / "statements.db", isolation_level=None)
    c.execute("PRAGMA journal_mode=WAL")
    c.execute("PRAGMA synchronous=FULL")
    cols = ("run_id TEXT NOT NULL, pos TEXT NOT NULL, name TEXT NOT NULL, kind TEXT NOT NULL, "
            "status TEXT NOT NULL, result TEXT, error TEXT, attempts INTEGER NOT NULL, "
            "epoch INTEGER NOT NULL, started_at REAL NOT NULL, finished_at REAL")  # fmt: skip
    c.executescript(
        f"""CREATE TABLE floor (k INTEGER PRIMARY KEY, v TEXT);
        CREATE TABLE durable_runs (run_id TEXT PRIMARY KEY, epoch INTEGER NOT NULL);
        CREATE TABLE durable_steps ({cols}, PRIMARY KEY (run_id, pos));
        {_RANGE_SCHEMA.format(cols=cols)}"""
    )
    step = STEP_SQL.format(share_lock="")

    def statement(sql: str | None, runs: str = "durable_runs") -> Callable[[], float]:
        def run() -> float:
            run_id = uuid.uuid4().hex  # as surefoot's own run ids
            c.execute(f"INSERT INTO {runs} (run_id, epoch) VALUES (?, 1)", (run_id,))
            t0 = time.process_time()
            for i in range(n):
                if sql is None:
                    c.execute("BEGIN IMMEDIATE")
                    c.execute("INSERT INTO floor (v) VALUES (?)", (f"value {i}",))
                    c.execute("COMMIT")
                    continue
                params = (run_id, str(i), "step", "step", "done", str(i + 1), None, 1, 1, 1.0,
                          1.0, run_id, 1)  # fmt: skip
                c.execute(sql, (*params, i + 1) if sql is RANGE_GIVEN else params)
            return time.process_time() - t0

        return run

    return {
        "SQL: the floor (BEGIN, INSERT, COMMIT)": statement(None),
        TWO: statement(step),
        GIVEN: statement(RANGE_GIVEN, "range_runs"),
        FOUND: statement(RANGE_FOUND, "range_runs"),
    }


def _alternate(cases: dict[str, Callable[[], float]], rounds: int) -> dict[str, float]:
    """Each case once per round, in a rotating order; the median of each."""
    got: dict[str, list[float]] = {name: [] for name in cases}
    names = list(cases)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            got[name].append(cases[name]())
    return {name: statistics.median(ts) for name, ts in got.items()}


def _pin(cpus: set[int]) -> None:
    """Every thread of this process (the app's loop thread too) to ``cpus``: a pid given
    to ``sched_setaffinity`` names one thread on Linux."""
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except ProcessLookupError:  # the thread ended meanwhile
            pass


def run_cost(runs: int, rounds: int) -> dict[str, float]:
    """CPU µs of a run of no steps, free on every CPU and pinned to one, alternated."""
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    d = Path(tempfile.mkdtemp(prefix="bench-breakdown-", dir=shm))
    cpus = os.sched_getaffinity(0)
    try:
        kept = Kept(d)
        n = iter(range(10**9))

        def batch(pin: bool) -> float:
            _pin({min(cpus)} if pin else cpus)
            try:
                return _cpu(
                    lambda: [
                        kept.app.start(kept.flow, 0, run_id=f"z{next(n)}").result(60)
                        for _ in range(runs)
                    ]
                )
            finally:
                _pin(cpus)

        got = _alternate({"free": lambda: batch(False), "pinned": lambda: batch(True)}, rounds)
        kept.app.close()
        return {name: 1e6 * t / runs for name, t in got.items()}
    finally:
        shutil.rmtree(d, ignore_errors=True)


def on_disk(where: str | None, rounds: int) -> dict[str, tuple[float, float]]:
    """User and system CPU µs per step of the floor, the hand-written step, surefoot and the
    step statement alone in 2 and 1 b-trees (100 steps a case, 10 of each per round,
    rotating), on settled files."""
    d = Path(tempfile.mkdtemp(prefix="bench-breakdown-", dir=where))
    try:
        settle_floor(d)
        kept, hand = Kept(d), HandWritten(d)

        def go_floor() -> None:
            floor(d, 100)
            CPU["floor"].pop()

        def go_surefoot() -> None:
            kept.app.start(kept.flow, 100, run_id=f"d{time.monotonic_ns()}").result(60)

        sql = _statements(d, 100)
        for _ in range(6):  # past the statements file's first checkpoint, as the others
            for statement in sql.values():
                statement()
        cases: dict[str, Callable[[], Any]] = {
            "floor": go_floor,
            "hand-written": hand.run,
            "surefoot": go_surefoot,
            "statement, 2 b-trees": sql[TWO],
            "statement, 1 b-tree, order given": sql[GIVEN],
            "statement, 1 b-tree, order found": sql[FOUND],
        }
        acc = {name: [0.0, 0.0] for name in cases}
        names = list(cases)
        for k in range(rounds * 10):
            for name in names[k % len(names) :] + names[: k % len(names)]:
                a = resource.getrusage(resource.RUSAGE_SELF)
                cases[name]()
                b = resource.getrusage(resource.RUSAGE_SELF)
                acc[name][0] += b.ru_utime - a.ru_utime
                acc[name][1] += b.ru_stime - a.ru_stime
        kept.app.close()
        hand.close()
        steps = rounds * 10 * 100
        return {name: (1e6 * u / steps, 1e6 * s / steps) for name, (u, s) in acc.items()}
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--dir", default=None, help="where the on-disk part's files go")
    a = ap.parse_args()
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    print(f"bench_step_breakdown.py, {started}, load average {os.getloadavg()[0]:.1f}")
    w = warm(a.rounds)
    print(f"\nwarm (/dev/shm), CPU µs per step, medians of {a.rounds} alternated rounds")
    for name, us in w.items():
        print(f"  {name:58} {us:7.2f}")
    print(
        f"  surefoot's Python around its statement vs the hand-written's: "
        f"{w['surefoot step, statement stubbed']:.2f} vs {w['hand-written, no statement']:.2f}"
    )
    r = run_cost(300, a.rounds)
    print(f"\na run of no steps (start + result), CPU µs per run, medians of {a.rounds}")
    print(f"  free on every CPU {r['free']:7.1f}    pinned to one CPU {r['pinned']:7.1f}")
    disk = on_disk(a.dir, max(a.rounds // 2, 2))
    fl = sum(disk["floor"])
    print("\non the disk (settled files), CPU µs per step: user + system = total (vs floor)")
    for name, (u, s) in disk.items():
        print(f"  {name:32} {u:6.1f} + {s:6.1f} = {u + s:6.1f}  ({(u + s) / fl:.2f}x)")


if __name__ == "__main__":
    main()
