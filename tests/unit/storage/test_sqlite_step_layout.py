"""SQLite keeps a run's steps in one range of one b-tree (durable migration 8): a step row's
id is its run's number << 24 plus its journal order, numbered by the run that writes it, so
a journalled step writes one b-tree (the table), where a ``(run_id, pos)`` index made two.
These tests hold the layout to what the index gave: one row per position, journal order,
a re-journalled position updated in place, and a file of the previous layout carried over.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from surefoot import durable
from surefoot.durable import CrashPlan, SimulatedCrash
from surefoot.errors import StoreError
from surefoot.storage.runs import RunRow, StepWrite
from surefoot.storage.sql.schema import MAX_ORDER
from surefoot.storage.sqlite import SQLiteDB
from surefoot.storage.sqlite._journal import MIGRATIONS, SQLiteJournal


def _journal(path: Path) -> Any:
    return SQLiteJournal(SQLiteDB(str(path)))


def _rows(path: Path) -> list[tuple[Any, ...]]:
    c = sqlite3.connect(path)
    try:
        return c.execute(
            "SELECT s.id, s.id >> 24, s.id & 16777215, r.run_no, s.run_id, s.pos, s.status "
            "FROM durable_steps s JOIN durable_runs r USING (run_id) ORDER BY s.id"
        ).fetchall()
    finally:
        c.close()


def test_the_step_table_is_one_b_tree_and_rows_are_numbered_in_journal_order(
    tmp_path: Path,
) -> None:
    path = tmp_path / "j.db"
    app = durable.App(f"sqlite:///{path}")

    @app.step
    async def add(x: int) -> int:
        return x + 1

    @app.workflow
    async def flow(n: int) -> int:
        total = 0
        for i in range(n):
            total += await add(i)
        return total

    assert app.start(flow, 3, run_id="a").result(timeout=30) == 6
    assert app.start(flow, 2, run_id="b").result(timeout=30) == 3
    app.close()
    c = sqlite3.connect(path)
    indexes = c.execute("PRAGMA index_list(durable_steps)").fetchall()
    c.close()
    assert indexes == []  # the table is its own b-tree: no second one to write per step
    rows = _rows(path)
    assert [(r[4], r[5], r[2]) for r in rows] == [
        ("a", "1", 1), ("a", "2", 2), ("a", "3", 3), ("b", "1", 1), ("b", "2", 2),
    ]  # fmt: skip
    assert all(r[1] == r[3] for r in rows)  # each row in its run's range
    j = _journal(path)
    assert [(s.pos, s.seq) for s in j.steps("a")] == [("1", 1), ("2", 2), ("3", 3)]
    j.db.close()


def test_an_effects_intent_is_updated_in_place_and_a_resumed_run_numbers_after_it(
    tmp_path: Path,
) -> None:
    """An effect's intent row, then its outcome: one row, the same id. A run resumed after
    a crash numbers its new positions after the journal's last."""
    path = tmp_path / "j.db"
    app = durable.App(f"sqlite:///{path}")
    calls: list[str] = []

    @app.step
    async def pure(x: int) -> int:
        return x

    @app.step(effect=True, idempotent=True)
    async def send(x: int) -> int:
        calls.append(f"send {x}")
        return x

    @app.workflow
    async def flow() -> int:
        a = await pure(1)
        b = await send(2)
        return a + b + await pure(3)

    app.crash = CrashPlan("after_effect", step="send")  # it ran; its outcome unjournalled
    with pytest.raises(SimulatedCrash):
        app.start(flow, run_id="r").result(timeout=30)
    app.crash = None
    before = _rows(path)
    assert [(r[5], r[6]) for r in before] == [("1", "done"), ("2", "intent")]
    assert app.resume("r").result(timeout=30) == 6
    app.close()
    after = _rows(path)
    assert [(r[5], r[6], r[2]) for r in after] == [
        ("1", "done", 1), ("2", "done", 2), ("3", "done", 3),
    ]  # fmt: skip
    assert after[1][0] == before[1][0]  # the intent's row, updated in place
    assert calls == ["send 2", "send 2"]


def test_a_wrong_order_updates_no_other_position(tmp_path: Path) -> None:
    """A record given the order of another position is refused (as a stale epoch's write),
    not written over that position's row."""
    j = _journal(tmp_path / "j.db")
    j.create_run(RunRow("r", "wf", "1", "h", "[]", "journal_keys", "pending", 1.0, 1.0))
    ((run_id, epoch),) = j.claim("w", now=1.0, lease_until=9.0, workflows=[("wf", "1")], limit=1)

    def step(pos: str, order: int | None) -> StepWrite:
        return StepWrite(run_id, epoch, pos, "s", "step", "done", "1", None, 1, 1.0, 2.0,
                         order=order)  # fmt: skip

    assert j.commit([step("1", 1)]) == [True]
    assert j.commit([step("2", 1)]) == [False]  # order 1 is position 1's
    assert j.commit([step("2", None)]) == [True]  # no order: found after the last
    assert [(s.pos, s.seq) for s in j.steps("r")] == [("1", 1), ("2", 2)]
    j.db.close()


def test_a_run_holds_at_most_max_order_steps(tmp_path: Path) -> None:
    """The step past the limit is refused with the journal's file named; nothing written."""
    j = _journal(tmp_path / "j.db")
    j.create_run(RunRow("r", "wf", "1", "h", "[]", "journal_keys", "pending", 1.0, 1.0))
    ((run_id, epoch),) = j.claim("w", now=1.0, lease_until=9.0, workflows=[("wf", "1")], limit=1)
    w = StepWrite(run_id, epoch, "9", "s", "step", "done", "1", None, 1, 1.0, 2.0,
                  order=MAX_ORDER + 1)  # fmt: skip
    with pytest.raises(StoreError, match="at most 16,777,215") as info:
        j.commit([w])
    assert "j.db" in info.value.url
    assert j.steps("r") == []
    j.db.close()


def test_a_journal_of_layout_7_is_carried_over_in_journal_order(tmp_path: Path) -> None:
    """Steps written by the previous layout (a (run_id, pos) index, rowid order), runs
    interleaved, keep their order within each run; new steps go after them."""
    path = tmp_path / "old.db"
    db = SQLiteDB(str(path))
    db.migrate("durable", MIGRATIONS[:7])
    ins_run = (
        "INSERT INTO durable_runs (run_id, workflow, version, structure_hash, args, strategy, "
        "status, created_at, updated_at, epoch) VALUES (?, 'wf', '1', 'h', '[[], {}]', "
        "'journal_keys', 'running', 1.0, 1.0, 3)"
    )
    ins_step = (
        "INSERT INTO durable_steps (run_id, pos, name, kind, status, result, error, attempts, "
        "epoch, started_at, finished_at) VALUES (?, ?, 's', 'step', 'done', '1', NULL, 1, 3, "
        "1.0, 1.0)"
    )
    with db.write() as c:
        c.execute(ins_run, ("x",))
        c.execute(ins_run, ("y",))
        for run_id, pos in [("x", "1"), ("y", "1"), ("x", "2"), ("y", "2"), ("x", "10")]:
            c.execute(ins_step, (run_id, pos))
        c.execute(ins_step, ("gone", "1"))  # a step of no run: not carried over
    db.close()
    j = _journal(path)  # migration 8 runs here
    assert [(s.pos, s.seq) for s in j.steps("x")] == [("1", 1), ("2", 2), ("10", 3)]
    assert [(s.pos, s.seq) for s in j.steps("y")] == [("1", 1), ("2", 2)]
    new = StepWrite("x", 3, "11", "s", "step", "done", "2", None, 1, 2.0, 2.0, order=4)
    assert j.commit([new]) == [True]
    assert [s.pos for s in j.steps("x")] == ["1", "2", "10", "11"]
    j.create_run(RunRow("z", "wf", "1", "h", "[]", "journal_keys", "pending", 1.0, 1.0))
    j.db.close()
    c = sqlite3.connect(path)
    nos = dict(c.execute("SELECT run_id, run_no FROM durable_runs").fetchall())
    orphans = c.execute("SELECT COUNT(*) FROM durable_steps WHERE run_id = 'gone'").fetchone()
    c.close()
    assert nos["z"] == max(nos["x"], nos["y"]) + 1  # a new run numbered after the others
    assert orphans == (0,)
