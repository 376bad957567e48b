"""Operator actions: each in the audit log; fork, resolve and cancel fence and key what they
move; a resume of a finished run does nothing."""

from __future__ import annotations

import pytest

from surefoot import FakeClock
from surefoot.durable import App, CrashPlan, SimulatedCrash, Worker, current_run
from surefoot.errors import RunFailedError


def actions(app: App, run_id: str) -> list[str]:
    """The audit log's actions of one run, in order."""
    return [a.action for a in app.show(run_id).audit]


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


def test_fork_runs_later_effects_under_its_own_key(app: App) -> None:
    """A fork replays the effects before the fork point and runs later ones under new keys."""
    keys: list[tuple[str, str | None]] = []

    @app.step(effect=True)
    def send(n: int, *, key: str | None = None) -> int:
        keys.append((current_run().run_id, key))
        return n

    @app.workflow
    def flow() -> int:
        return send(1) + send(2)

    assert app.start(flow, run_id="f").result(timeout=10) == 3
    assert app.fork("f", "2", new_run_id="f2").result(timeout=10) == 3
    assert keys == [("f", "f:1"), ("f", "f:2"), ("f2", "f2:2")]


def test_resolve_is_one_transaction_and_spends_no_claim(app: App) -> None:
    """After resolve() the run goes on even with max_claims=1: resolve claims nothing itself."""
    sent: list[str] = []

    @app.step(effect=True)
    def email(to: str) -> str:
        sent.append(to)
        return f"sent to {to}"

    @app.workflow
    def flow() -> str:
        return email("ann") + "!"

    app.crash = CrashPlan("after_effect")
    with pytest.raises(SimulatedCrash):
        app.start(flow, run_id="m").result(timeout=10)
    app.crash = None
    with pytest.raises(RunFailedError):
        app.resume("m").result(timeout=10)
    assert app.show("m").run.status == "needs_attention"
    app.configure(max_claims=1)
    h = app.resolve("m", "1", "sent to ann")
    run = app.show("m").run
    assert (run.status, run.claims, run.owner) == ("pending", 0, None)
    assert [s.status for s in app.show("m").steps] == ["done"]
    assert h.result(timeout=10) == "sent to ann!"
    assert sent == ["ann"]


def test_cancel_while_a_worker_executes_stops_the_run(app: App, clock: FakeClock) -> None:
    """A run cancelled mid-step keeps its status; its later steps never run."""
    ran: list[str] = []

    @app.step
    def first() -> str:
        ran.append("first")
        assert app.cancel("c", reason="changed my mind") is True
        return "1"

    @app.step
    def second() -> str:
        ran.append("second")
        return "2"

    @app.workflow
    def flow() -> str:
        return first() + second()

    app.enqueue(flow, run_id="c")
    Worker(app).run_once(timeout=10)
    detail = app.show("c")
    assert ran == ["first"]
    assert detail.run.status == "cancelled"
    assert detail.steps == []  # the zombie's write was refused
    assert [a.action for a in detail.audit][-2:] == ["cancel", "lease_lost"]
