"""The Python API as a first user met it: sleep(seconds=), signals to ended runs, audit."""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest

from surefoot import FakeClock
from surefoot.durable import App, CrashPlan, SimulatedCrash, Worker
from surefoot.errors import JournalError, StoreUnavailableError
from surefoot.resilience import Backoff


def actions(app: App, run_id: str) -> list[str]:
    """The audit log's actions of one run, in order."""
    return [a.action for a in app.show(run_id).audit]


def test_sleep_takes_seconds_by_keyword(app: App, clock: FakeClock) -> None:
    """app.sleep(seconds=5) is a 5 s durable timer, like minutes=/hours=/days=."""

    @app.workflow
    def nap() -> str:
        app.sleep(seconds=5)
        app.sleep(seconds=1, minutes=1)
        return "up"

    t0 = clock.now()
    app.enqueue(nap, run_id="n")
    Worker(app).run_once(timeout=10)
    run = app.show("n").run
    assert run.status == "sleeping" and run.wake_at == t0 + 5
    clock.advance(5)
    Worker(app).run_once(timeout=10)
    assert app.show("n").run.wake_at == t0 + 5 + 61
    clock.advance(61)
    Worker(app).run_once(timeout=10)
    assert app.handle("n").result(timeout=5) == "up"


def test_signal_to_an_ended_run_is_refused_and_a_repeat_returns_false(app: App) -> None:
    """An ended run refuses a new signal (JournalError, nothing stored); a signal id it
    was already given returns False, like any repeated delivery."""

    @app.workflow
    async def ask() -> Any:
        return await app.wait_for("approve")

    app.enqueue(ask, run_id="a")
    assert app.signal("a", "approve", "yes", signal_id="ann") is True
    Worker(app).run_once(timeout=10)
    assert app.handle("a").result(timeout=5) == "yes"
    with pytest.raises(JournalError, match=r"has ended \(succeeded\)"):
        app.signal("a", "approve", "again")
    assert app.signal("a", "approve", "yes", signal_id="ann") is False
    assert actions(app, "a") == ["created", "signal", "claimed"]  # the refused one: no trace


def test_operator_actions_are_in_the_audit_log(app: App) -> None:
    """A signal a worker consumed, a resume after a crash and a fork are each audited."""
    calls: list[str] = []

    @app.step
    def work(x: int) -> int:
        calls.append(f"work{x}")
        return x

    @app.workflow
    async def flow() -> int:
        got = await app.wait_for("go")
        return work(1) + work(2) + int(got)

    app.enqueue(flow, run_id="s")
    Worker(app).run_once(timeout=10)
    assert app.show("s").run.status == "sleeping"
    app.signal("s", "go", 10)
    app.crash = CrashPlan("before_step", step="3")
    with pytest.raises(SimulatedCrash):
        Worker(app).run_once(timeout=10)
    assert app.resume("s").result(timeout=10) == 13
    # claimed, suspended, signalled, claimed again and crashed in flight (its claim is
    # audited though it wrote nothing), resumed by hand: a takeover of the crashed one
    story = ["created", "claimed", "signal", "claimed", "taken_over", "resume"]
    assert actions(app, "s") == story
    resume = app.show("s").audit[-1]
    assert resume.actor == "operator" and resume.detail == {
        "from": "running",
        "worker": app.worker_id,
    }
    app.fork("s", "3", new_run_id="s2")
    assert actions(app, "s") == [*story, "fork"]
    assert app.show("s").audit[-1].detail["as"] == "s2"
    assert actions(app, "s2") == ["forked"]


def test_resume_of_a_finished_run_records_nothing(app: App) -> None:
    """resume only audits when it takes the run: a finished run's log is unchanged."""

    @app.workflow
    def one() -> int:
        return 1

    assert app.start(one, run_id="f").result(timeout=10) == 1
    assert app.resume("f").result(timeout=5) == 1
    assert actions(app, "f") == ["created", "claimed"]  # its one execution, no resume


def test_worker_idle_exit_is_honoured_during_an_outage(app: App) -> None:
    """A worker whose claims keep failing still exits after --idle-exit seconds."""
    app.journal  # noqa: B018 - opened: the outage begins after a successful start
    down = {"claims": 0}

    def broken(*args: Any, **kwargs: Any) -> Any:
        down["claims"] += 1
        raise StoreUnavailableError(app.url, "the database went away (test)")

    app.journal.claim = broken  # type: ignore[method-assign]
    w = Worker(app, backoff=Backoff(0.01, 0.05, "full"), rng=random.Random(3))
    stop = threading.Event()
    t = threading.Thread(target=w.run, args=(stop,), kwargs={"idle_exit": 0.3}, daemon=True)
    t.start()
    t.join(timeout=10)
    alive = t.is_alive()
    stop.set()
    t.join(timeout=10)
    assert not alive, "the worker ignored idle_exit during the outage"
    assert down["claims"] >= 2 and w.outages == 1 and w.failed_claims == down["claims"]


def test_wait_for_in_a_sync_workflow_returns_the_payload(app: App) -> None:
    """In a sync workflow `x = app.wait_for(name)` is the signal's payload, not a wrapper."""

    @app.workflow
    def ask() -> Any:
        got = app.wait_for("approve")
        return {"got": got}

    app.enqueue(ask, run_id="sync")
    app.signal("sync", "approve", {"by": "ann"})
    Worker(app).run_once(timeout=10)
    assert app.handle("sync").result(timeout=5) == {"got": {"by": "ann"}}
