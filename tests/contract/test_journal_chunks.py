"""The chunk table of the SQL journals (SQLite and PostgreSQL): nodes written in the step's
transaction and fenced by its epoch, never half-written, copied by a fork, deleted by
prune, and a journal of the previous schema migrated in place with its values intact."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _backends import backend_url

from surefoot import durable, storage
from surefoot.storage.runs import RunRow, RunWrite, StepWrite

SQL_BACKENDS = ["sqlite", "postgresql"]


@pytest.fixture(params=SQL_BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh SQLite file or PostgreSQL schema."""
    return backend_url(str(request.param), tmp_path, request, "chunks")


@pytest.fixture
def st(url: str) -> Any:
    s = storage.open(url)
    yield s
    s.close()


def _claimed(st: Any, run: str = "r") -> tuple[Any, int]:
    j = st.journal()
    j.create_run(RunRow(run, "wf", "1", "h", "[]", "journal_keys", "pending", 1.0, 1.0))
    got = j.claim("w1", now=2.0, lease_until=10.0, workflows=[("wf", "1")], limit=1, run_id=run)
    ((_, epoch),) = got
    return j, epoch


def _step(run: str, epoch: int, pos: str, result: str = "sfk:0:3:aa") -> StepWrite:
    return StepWrite(run, epoch, pos, "s", "pure", "done", result, None, 1, 3.0, 3.0)


def test_chunks_go_in_the_steps_commit(st: Any) -> None:
    """A step with its chunk rows is one commit; the rows read back by id."""
    j, epoch = _claimed(st)
    c0 = st.db.commits
    chunks = [("r", epoch, "aa", "[1]"), ("r", epoch, "bb", "[2]")]
    assert j.commit([_step("r", epoch, "1")], chunks=chunks) == [True]
    assert st.db.commits - c0 == 1
    assert j.chunks.get("r", ["aa", "bb", "cc"]) == {"aa": "[1]", "bb": "[2]"}
    # the same node again (the next step's value shares it) adds nothing
    finish = RunWrite("r", epoch, "succeeded", 5.0, "w1", result='"z"', audit=[("done", "{}")])
    again = [("r", epoch, "aa", "[1]"), ("r", epoch, "dd", "[4]")]
    assert j.commit([_step("r", epoch, "2"), finish], chunks=again) == [True, True]
    assert st.db.commits - c0 == 2
    assert j.chunks.usage("r") == (3, 9)
    assert j.chunks.get("other", ["aa"]) == {}  # nodes belong to their run


def test_a_zombies_chunks_are_refused_with_its_step(st: Any) -> None:
    j, old = _claimed(st)
    j.claim("w2", now=11.0, lease_until=20.0, workflows=[("wf", "1")], limit=1)
    assert j.commit([_step("r", old, "1")], chunks=[("r", old, "aa", "[1]")]) == [False]
    assert j.chunks.usage() == (0, 0)


def test_a_failed_transaction_leaves_neither_step_nor_chunks(st: Any) -> None:
    """The step row and a first chunk are written, then a bad chunk fails: the transaction
    rolls back all of it (one transaction, so a crash at any point leaves both or neither)."""
    j, epoch = _claimed(st)
    bad: list[Any] = [("r", epoch, "aa", "[1]"), ("r", epoch, "bb", None)]
    with pytest.raises(Exception, match=r"(?i)null"):
        j.commit([_step("r", epoch, "1")], chunks=bad)
    assert j.chunks.usage() == (0, 0)
    assert j.steps("r") == []


def test_fork_copies_and_prune_deletes(st: Any) -> None:
    j, epoch = _claimed(st)
    j.commit([_step("r", epoch, "1"), _step("r", epoch, "2")], chunks=[("r", epoch, "aa", "[1]")])
    j.commit([RunWrite("r", epoch, "failed", 5.0, "w1", error='"e"')])
    j.fork("r", "f", "2", now=6.0)
    assert j.chunks.get("f", ["aa"]) == {"aa": "[1]"}
    assert j.pruning.prune(keep=0, now=7.0) == ["r"]  # the fork is pending: it stays
    assert j.chunks.usage("r") == (0, 0)
    assert j.chunks.usage("f") == (1, 3)


def test_a_journal_of_the_previous_schema_is_migrated_in_place(url: str) -> None:
    """A journal made by the surefoot before chunks (migrations 1-4) gets the chunk table
    when opened; its runs and plain values read as before, and new large values chunk."""
    if url.startswith("sqlite"):
        from surefoot.storage.sqlite._journal import MIGRATIONS
    else:
        from surefoot.storage.postgres._journal import MIGRATIONS
    # SQLite 8: steps in one b-tree, 9: step checksums; PostgreSQL 8: run-end NOTIFY
    assert len(MIGRATIONS) == (9 if url.startswith("sqlite") else 8)
    old: Any = storage.open(url)
    old.db.migrate("durable", MIGRATIONS[:4])
    history = json.dumps([{"role": "user", "content": "x" * 20_000}], separators=(",", ":"))
    d = old.db
    ins_run = (
        "INSERT INTO durable_runs (run_id, workflow, version, structure_hash, args, strategy, "
        "status, created_at, updated_at, result) VALUES "
        "('old', 'wf', '1', 'h', '[[], {}]', 'journal_keys', 'succeeded', 1.0, 1.0, '1')"
    )
    ins_step = (
        "INSERT INTO durable_steps (run_id, pos, name, kind, status, result, error, attempts, "
        "epoch, started_at, finished_at) VALUES ('old', '1', 's', 'pure', 'done', ?, NULL, 1, "
        "1, 1.0, 1.0)"
    )
    if url.startswith("sqlite"):
        with d.write() as c:
            c.execute(ins_run)
            c.execute(ins_step, (history,))
    else:
        d.run(
            lambda c: (c.execute(ins_run), c.execute(ins_step.replace("?", "%s"), (history,))),
            tx=True,
        )
    old.close()

    app = durable.App(url, value_chunks=8192)
    try:
        assert app.show("old").steps[0].result == json.loads(history)
        j: Any = app.journal
        assert j.chunks.usage() == (0, 0)

        @app.step
        def grow(h: list[dict[str, str]]) -> list[dict[str, str]]:
            return [*h, {"role": "assistant", "content": "y" * 20_000}]

        @app.workflow
        def flow() -> int:
            return len(grow(grow(json.loads(history))))

        assert app.start(flow, run_id="new").result(timeout=30) == 3
        assert j.chunks.usage("new")[0] > 0
        assert app.show("new").steps[1].result[2]["content"] == "y" * 20_000
    finally:
        app.close()
