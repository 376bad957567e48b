"""Retention: finished runs pruned by age or count; audit kept or dropped as asked."""

from __future__ import annotations

import pytest

from surefoot import FakeClock
from surefoot.durable import App, Worker
from surefoot.durable._retention import Retention
from surefoot.errors import ConfigError


def _runs(app: App, n: int, clock: FakeClock) -> None:
    @app.workflow
    def job(i: int) -> int:
        return i

    for i in range(n):
        app.start(job, i, run_id=f"r{i}").result(timeout=5)
        clock.advance(10)


def test_prune_by_age_keeps_recent_and_unfinished_runs(app: App, clock: FakeClock) -> None:
    """older_than=25 s deletes the runs that ended more than 25 s ago, not the others,
    and never an unfinished run."""

    @app.workflow
    async def waits() -> None:
        await app.wait_for("never")

    app.enqueue(waits, run_id="open")
    _runs(app, 5, clock)  # ended at t0, t0+10, …, t0+40; now t0+50
    Worker(app).run_once(timeout=10)
    clock.advance(1000)
    gone = app.prune(older_than=1025)
    assert sorted(gone) == ["r0", "r1", "r2"]
    assert sorted(r.run_id for r in app.list_runs()) == ["open", "r3", "r4"]
    assert app.journal.steps("r0") == []


def test_prune_by_count_keeps_the_newest(app: App, clock: FakeClock) -> None:
    """keep=2 deletes all but the two newest finished runs."""
    _runs(app, 5, clock)
    assert sorted(app.prune(keep=2)) == ["r0", "r1", "r2"]
    assert sorted(r.run_id for r in app.list_runs()) == ["r3", "r4"]
    assert app.prune(keep=2) == []


def test_audit_is_kept_with_a_pruned_entry_or_dropped(app: App, clock: FakeClock) -> None:
    """By default a pruned run's audit log stays, ending with 'pruned'; audit='drop'
    deletes it."""
    _runs(app, 2, clock)
    app.prune(keep=1)
    assert [a.action for a in app.journal.audit_log("r0")][-1] == "pruned"
    app.prune(keep=0, audit="drop")
    assert app.journal.audit_log("r1") == []


def test_a_child_is_kept_while_its_parent_runs(app: App, clock: FakeClock) -> None:
    """A finished child of an unfinished parent is not pruned (the parent reads it)."""

    @app.workflow
    def kid() -> int:
        return 1

    @app.workflow
    async def parent() -> int:
        v = int(await app.child(kid))
        await app.wait_for("hold")
        return v

    app.enqueue(parent, run_id="p")
    w = Worker(app)
    for _ in range(20):
        w.run_once(timeout=10)
        if app.handle("p:1").status() == "succeeded" and app.handle("p").status() == "sleeping":
            break
    assert app.handle("p:1").status() == "succeeded"
    assert app.prune(keep=0) == []


def test_a_worker_applies_its_retention(app: App, clock: FakeClock) -> None:
    """Worker(retention=…) prunes as it claims."""
    _runs(app, 3, clock)
    Worker(app, retention=Retention.make(None, 1)).run_once(timeout=10)
    assert [r.run_id for r in app.list_runs()] == ["r2"]


def test_bad_retention_is_refused(app: App) -> None:
    """No bound, a negative count or an unknown audit choice: ConfigError."""
    with pytest.raises(ConfigError):
        app.prune()
    with pytest.raises(ConfigError):
        app.prune(keep=-1)
    with pytest.raises(ConfigError):
        app.prune(keep=1, audit="maybe")
