"""Run management and bad input: list, show, fork, cancel; clear errors, nothing lost."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from surefoot import FakeClock
from surefoot.durable import App, CrashPlan, SimulatedCrash, Worker
from surefoot.errors import (
    ConfigError,
    JournalError,
    SchemaVersionError,
    StoreError,
    UnknownRunError,
    WorkflowNotFoundError,
)


def _pipeline(app: App, calls: list[str]) -> object:
    @app.step
    def a() -> str:
        calls.append("a")
        return "a"

    @app.step
    def b(x: str) -> str:
        calls.append("b")
        return x + "b"

    @app.step
    def c(x: str) -> str:
        calls.append("c")
        return x + "c"

    @app.workflow
    def abc() -> str:
        return c(b(a()))

    return abc


def test_show_lists_steps_timings_and_audit(app: App) -> None:
    """show() returns the header, every step with result and timing, and the audit log."""
    abc = _pipeline(app, [])
    app.start(abc, run_id="r").result(timeout=10)
    d = app.show("r")
    assert d.run.status == "succeeded" and d.run.result == "abc"
    assert [(s.pos, s.name, s.result) for s in d.steps] == [
        ("1", "a", "a"),
        ("2", "b", "ab"),
        ("3", "c", "abc"),
    ]
    assert all(s.duration is not None and s.duration >= 0 for s in d.steps)
    assert [e.action for e in d.audit] == ["created", "claimed"]
    assert [r.run_id for r in app.list_runs(status="succeeded")] == ["r"]
    assert app.list_runs(status="failed") == []


def test_fork_reruns_from_a_step(app: App) -> None:
    """A fork replays the steps before the chosen one and runs the rest again."""
    calls: list[str] = []
    abc = _pipeline(app, calls)
    app.start(abc, run_id="r").result(timeout=10)
    h = app.fork("r", "2", new_run_id="r2")
    assert h.result(timeout=10) == "abc"
    assert calls == ["a", "b", "c", "b", "c"]
    assert app.show("r2").run.forked_from == "r"


def test_unknown_run_ids_are_clear_errors(app: App) -> None:
    """Every operation on an unknown run id names it (in a journal that exists)."""
    app.journal  # noqa: B018 - the journal exists; the run does not
    for call in (
        lambda: app.show("nope"),
        lambda: app.handle("nope"),
        lambda: app.cancel("nope"),
        lambda: app.retry("nope"),
        lambda: app.resume("nope"),
        lambda: app.signal("nope", "x"),
    ):
        with pytest.raises(UnknownRunError, match="'nope'"):
            call()


def test_unregistered_workflow_is_a_clear_error(app: App) -> None:
    """Starting a workflow name nobody registered says which ones exist."""
    _pipeline(app, [])
    with pytest.raises(WorkflowNotFoundError, match="registered: abc"):
        app.start("missing")


def test_retry_refuses_a_run_that_needs_nothing(app: App) -> None:
    """retry() is for needs_attention runs only; a finished run is left as it is."""
    abc = _pipeline(app, [])
    app.start(abc, run_id="r").result(timeout=10)
    with pytest.raises(JournalError, match="is succeeded; only runs that need attention or failed"):
        app.retry("r")
    assert app.show("r").run.status == "succeeded"


def test_foreign_database_is_refused_untouched(tmp_path: Path) -> None:
    """A SQLite file of another program is refused and left as it was."""
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as c:
        c.execute("CREATE TABLE invoices (id INTEGER)")
        c.execute("INSERT INTO invoices VALUES (1)")
    app = App(f"sqlite:///{path}")
    with pytest.raises(ConfigError, match=r"no surefoot journal in it \(its tables: invoices"):
        app.list_runs()  # reading: refused before anything is opened for writing
    with pytest.raises(SchemaVersionError, match="not a surefoot database"):
        app.journal  # noqa: B018 - opening to write: refused too
    app.close()
    with sqlite3.connect(path) as c:
        assert c.execute("SELECT * FROM invoices").fetchall() == [(1,)]
        tables = [r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    assert tables == ["invoices"]


def test_corrupt_file_is_a_clear_error(tmp_path: Path) -> None:
    """A file that is not SQLite at all is refused with a store error, not a traceback."""
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not a database" * 100)
    app = App(f"sqlite:///{path}")
    with pytest.raises(StoreError, match=r"not a SQLite file or it is corrupt|not a surefoot"):
        app.list_runs()
    app.close()
    assert path.read_bytes() == b"this is not a database" * 100


def test_memory_journal_is_refused() -> None:
    """memory:// cannot hold a durable journal; the error says what to use."""
    app = App("memory://")
    with pytest.raises(ConfigError, match="sqlite://"):
        app.list_runs()


def test_bad_strategy_and_crash_point(db_url: str) -> None:
    """Unknown strategies and crash points are refused with the allowed values."""
    with pytest.raises(ConfigError, match="journal_keys"):
        App(db_url, strategy="yolo")
    with pytest.raises(ConfigError, match="after_effect"):
        CrashPlan("during_lunch")
    with pytest.raises(ConfigError, match="lease must be > 0"):
        App(db_url, lease=0)
    with pytest.raises(ConfigError, match="concurrency"):
        Worker(App(db_url), concurrency=0)


def test_compensate_on_pure_step_is_refused(app: App) -> None:
    """Only effects can be compensated."""
    with pytest.raises(ConfigError, match="effect=True"):

        @app.step(compensate=print)
        def pure() -> None:
            return None


def test_many_concurrent_runs_share_commits(app: App) -> None:
    """Steps of concurrent async runs that finish together share one transaction."""

    @app.step
    async def tick(i: int) -> int:
        return i

    @app.workflow
    async def ticker(n: int) -> int:
        return sum([await tick(i) for i in range(n)])

    runs, steps = 40, 10
    for k in range(runs):
        app.enqueue(ticker, steps, run_id=f"t{k}")
    db = app.journal.wrapped.db  # type: ignore[attr-defined]
    before = db.commits
    w = Worker(app, concurrency=runs)
    assert w.run_once(timeout=30) == runs
    commits = db.commits - before
    assert all(r.status == "succeeded" for r in app.list_runs())
    assert commits < runs * steps / 4  # one claim + shared step batches, not one per step


def test_start_again_after_in_process_crash_resumes(app: App, clock: FakeClock) -> None:
    """Calling start() again with the same run id after a crash picks the run back up."""
    calls: list[str] = []
    abc = _pipeline(app, calls)
    app.crash = CrashPlan("after_journal", step="b")
    with pytest.raises(SimulatedCrash):
        app.start(abc, run_id="again").result(timeout=10)
    assert app.start(abc, run_id="again").result(timeout=10) == "abc"
    assert calls == ["a", "b", "c"]
