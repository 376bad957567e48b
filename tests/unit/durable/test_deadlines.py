"""Run deadlines: past its timeout a run stops, visibly, after running its compensations."""

from __future__ import annotations

import pytest

from surefoot import FakeClock
from surefoot.durable import App, Worker
from surefoot.errors import ConfigError, DeadlineExceededError, RunFailedError


def _drain(w: Worker, n: int = 3) -> None:
    for _ in range(n):
        w.run_once(timeout=10)


def test_a_sleeping_run_wakes_at_its_deadline_and_compensates(app: App, clock: FakeClock) -> None:
    """timeout=60 with a one-hour sleep: the run wakes at 60 s, undoes its effect once and
    ends failed with DeadlineExceededError and a 'deadline' audit entry."""
    undone: list[str] = []

    def unbook(what: str) -> None:
        undone.append(what)

    @app.step(effect=True, compensate=unbook)
    def book(what: str) -> str:
        return what

    @app.workflow(timeout=60)
    def trip() -> str:
        book("hotel")
        app.sleep(hours=1)
        return "done"

    h = app.enqueue(trip, run_id="t")
    w = Worker(app)
    _drain(w)
    info = h.info()
    assert info.status == "sleeping" and info.wake_at == info.created_at + 60
    clock.advance(61)
    _drain(w)
    with pytest.raises(RunFailedError) as err:
        h.result(timeout=5)
    assert err.value.error["type"] == "surefoot.errors.DeadlineExceededError"
    assert undone == ["hotel"]
    actions = [a.action for a in app.show("t").audit]
    assert "deadline" in actions


def test_a_wait_for_a_signal_ends_at_the_run_deadline(app: App, clock: FakeClock) -> None:
    """start(timeout=30) on a run that waits for a signal with no timeout of its own: it
    wakes and fails at the deadline; the workflow may catch the error."""

    @app.workflow
    async def approval() -> str:
        try:
            return str(await app.wait_for("approve"))
        except DeadlineExceededError as exc:
            return f"late: {exc.what}"

    h = app.enqueue(approval, run_id="a", timeout=30)
    w = Worker(app)
    _drain(w)
    assert h.status() == "sleeping"
    clock.advance(31)
    _drain(w)
    assert h.result(timeout=5) == "late: run"


def test_a_deadline_passed_while_running_stops_at_the_next_step(app: App, clock: FakeClock) -> None:
    """A step that takes past the deadline finishes; the next step does not run."""
    ran: list[str] = []

    @app.step
    def slow() -> None:
        ran.append("slow")
        clock.advance(100)

    @app.step
    def after() -> None:
        ran.append("after")

    @app.workflow
    def flow() -> None:
        slow()
        after()

    with pytest.raises(RunFailedError):
        app.start(flow, timeout=10).result(timeout=5)
    assert ran == ["slow"]


def test_runs_within_their_deadline_are_untouched(app: App) -> None:
    """A run that ends before its deadline succeeds and has no deadline entry."""

    @app.workflow(timeout=3600)
    def quick(x: int) -> int:
        return x

    h = app.start(quick, 4, run_id="q")
    assert h.result(timeout=5) == 4
    assert h.info().status == "succeeded"
    assert "deadline" not in [a.action for a in app.show("q").audit]


def test_bad_timeouts_are_refused(app: App) -> None:
    """timeout must be a positive number of seconds."""
    with pytest.raises(ConfigError):

        @app.workflow(timeout=0)
        def nope() -> None: ...

    @app.workflow
    def fine() -> None: ...

    with pytest.raises(ConfigError):
        app.enqueue(fine, timeout=-1)
