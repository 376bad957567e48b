"""Durable runs seen from outside: a span per run, step and attempt (one trace across a
suspend and resume), one log line per run event, and claims and takeovers in the audit log."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from surefoot import FakeClock, telemetry
from surefoot.durable import App, Worker
from surefoot.errors import RunFailedError

SECRET = "sk-live-0123456789abcdefghij"


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    a = App(f"sqlite:///{tmp_path / 'runs.db'}", clock=FakeClock(), poll=0.01, worker_id="w1")
    yield a
    a.close()


def by_name(spans: Any, name: str) -> list[Any]:
    return [s for s in spans.get_finished_spans() if s.name == name]


def events(caplog: pytest.LogCaptureFixture, run_id: str) -> list[str]:
    return [
        r.surefoot["event"]
        for r in caplog.records
        if r.name == "surefoot.durable.worker" and r.surefoot.get("run_id") == run_id
    ]


def test_one_span_per_run_step_and_attempt(app: App, spans: Any) -> None:
    """Two steps, the second failing once: 1 run span, 2 step spans, 3 attempt spans, nested."""
    calls = {"n": 0}

    @app.step
    async def plan(q: str) -> str:
        return q + "!"

    @app.step(retry=2)
    async def fetch(q: str) -> str:
        calls["n"] += 1
        if calls["n"] == 1:
            raise ConnectionError("reset")
        return q * 2

    @app.workflow
    async def research(q: str) -> str:
        return await fetch(await plan(q))

    assert app.start(research, "x", run_id="r1").result(timeout=10) == "x!x!"
    (run,) = by_name(spans, "surefoot.run")
    steps = by_name(spans, "surefoot.step")
    attempts = by_name(spans, "surefoot.attempt")
    assert run.attributes["surefoot.run.id"] == "r1"
    assert run.attributes["surefoot.workflow"] == "research"
    assert run.attributes["surefoot.worker"] == "w1"
    assert run.attributes["surefoot.run.status"] == "succeeded"
    assert run.context.trace_id == telemetry.trace_id_of("r1")
    assert [s.attributes["surefoot.step.name"] for s in steps] == ["plan", "fetch"]
    assert all(s.parent.span_id == run.context.span_id for s in steps)
    assert [a.attributes["surefoot.attempt"] for a in attempts] == [1, 1, 2]
    fetch_span = steps[1]
    assert [a.parent.span_id for a in attempts[1:]] == [fetch_span.context.span_id] * 2
    (decision,) = [e for e in attempts[1].events if e.name == "surefoot.retry.decision"]
    assert decision.attributes["surefoot.retry.retry"] is True
    assert decision.attributes["error.type"] == "ConnectionError"


def test_sync_workflow_steps_nest_under_the_run_span(app: App, spans: Any) -> None:
    """A sync workflow runs in a pool thread: its step spans still have the run as parent."""

    @app.step
    def double(x: int) -> int:
        return 2 * x

    @app.workflow
    def flow(x: int) -> int:
        return double(double(x))

    assert app.start(flow, 3, run_id="s1").result(timeout=10) == 12
    (run,) = by_name(spans, "surefoot.run")
    steps = by_name(spans, "surefoot.step")
    assert len(steps) == 2 and all(s.parent.span_id == run.context.span_id for s in steps)


def test_the_trace_is_carried_across_a_suspend_and_resume(app: App, spans: Any) -> None:
    """Suspended at wait_for and resumed by a worker: two run spans in one trace, and only
    the steps that ran get spans (replayed ones do not)."""

    @app.step
    async def before() -> int:
        return 1

    @app.step
    async def after(x: Any) -> str:
        return f"got {x}"

    @app.workflow
    async def approval() -> str:
        await before()
        go = await app.wait_for("go")
        return await after(go)

    app.enqueue(approval, run_id="a1")
    Worker(app).run_once(timeout=10)
    assert app.show("a1").run.status == "sleeping"
    app.signal("a1", "go", "yes")
    Worker(app).run_once(timeout=10)
    assert app.handle("a1").result(timeout=5) == "got yes"
    runs = by_name(spans, "surefoot.run")
    assert [r.attributes["surefoot.run.status"] for r in runs] == ["sleeping", "succeeded"]
    assert {r.context.trace_id for r in runs} == {telemetry.trace_id_of("a1")}
    assert runs[0].parent.span_id == runs[1].parent.span_id  # the same root of the run
    names = [s.attributes["surefoot.step.name"] for s in by_name(spans, "surefoot.step")]
    assert names == ["before", "after"]
    assert all(
        s.context.trace_id == telemetry.trace_id_of("a1") for s in spans.get_finished_spans()
    )


def test_the_worker_logs_one_line_per_run_event(app: App, caplog: pytest.LogCaptureFixture) -> None:
    """claimed, step_done, waiting; then claimed, resumed, step_done, finished: with run id,
    workflow, step and worker; the step's arguments (a key here) are never logged."""

    @app.step
    async def call(api_key: str) -> int:
        return len(api_key)

    @app.workflow
    async def flow(api_key: str) -> int:
        n = await call(api_key)
        await app.wait_for("go")
        return n

    app.enqueue(flow, SECRET, run_id="l1")
    with caplog.at_level(logging.INFO, logger="surefoot"):
        Worker(app).run_once(timeout=10)
        app.signal("l1", "go", None)
        Worker(app).run_once(timeout=10)
    assert events(caplog, "l1") == [
        "claimed",
        "step_done",
        "waiting",
        "claimed",
        "resumed",
        "finished",
    ]
    done = next(r for r in caplog.records if r.surefoot.get("event") == "step_done")
    assert done.surefoot["step"] == "call" and done.surefoot["worker"] == "w1"
    assert done.surefoot["workflow"] == "flow"
    waiting = next(r for r in caplog.records if r.surefoot.get("event") == "waiting")
    assert waiting.surefoot["waiting_for"] == "go"
    assert SECRET not in caplog.text
    runs = [a.action for a in app.show("l1").audit]
    assert runs == ["created", "claimed", "signal", "claimed"]


def test_needs_attention_is_a_warning_line(app: App, caplog: pytest.LogCaptureFixture) -> None:
    """A saga whose undo fails: step_failed and needs_attention lines at WARNING."""

    def unbook(*, key: str | None = None, result: str = "") -> None:
        raise RuntimeError("cannot undo")

    @app.step(effect=True, compensate=unbook, compensate_retry=1)
    def book(*, key: str | None = None) -> str:
        return "b-1"

    @app.step
    def charge() -> None:
        raise ValueError("card declined")

    @app.workflow
    def trip() -> None:
        book()
        charge()

    with caplog.at_level(logging.INFO, logger="surefoot"), pytest.raises(RunFailedError):
        app.start(trip, run_id="t1").result(timeout=10)
    got = [
        (r.levelname, r.surefoot["event"])
        for r in caplog.records
        if r.name == "surefoot.durable.worker"
    ]
    assert ("WARNING", "step_failed") in got and got[-1] == ("WARNING", "needs_attention")
    fam = next(f for f in telemetry.collect() if f.name == "surefoot_steps_total")
    assert fam.value(workflow="trip", kind="effect", outcome="done") == 1
    assert fam.value(workflow="trip", kind="pure", outcome="error") == 1


def test_a_takeover_after_lease_expiry_is_audited_and_logged(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker that claimed and died before writing anything: its claim is in the audit
    log all the same (written by the claim), and after its lease the next claim writes
    taken_over (with the previous epoch) and logs it at WARNING."""

    @app.workflow
    def flow() -> int:
        return 7

    app.enqueue(flow, run_id="k1")
    clock: Any = app.clock
    dead = app.journal.claim(
        "dead-worker",
        now=clock.now(),
        lease_until=clock.now() + 5,
        workflows=app.registered(),
        limit=1,
    )
    assert dead == [("k1", 1)]
    clock.advance(6)  # its lease ran out with the run in flight
    with caplog.at_level(logging.INFO, logger="surefoot"):
        Worker(app).run_once(timeout=10)
    assert app.handle("k1").result(timeout=5) == 7
    audit = app.show("k1").audit
    assert [a.action for a in audit] == ["created", "claimed", "taken_over"]
    assert audit[1].actor == "dead-worker" and audit[1].detail["epoch"] == 1
    assert audit[2].detail["previous_epoch"] == 1 and audit[2].detail["epoch"] == 2
    assert audit[2].detail["worker"] == "w1" and audit[2].actor == "w1"
    assert "stalled past its lease" in audit[2].detail["why"]
    over = next(r for r in caplog.records if r.surefoot.get("event") == "taken_over")
    assert over.levelname == "WARNING" and over.surefoot["previous_epoch"] == 1


def test_a_fenced_late_write_is_logged_and_audited(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker whose lease was taken while its step ran: its write is refused, it logs
    fenced and the audit log says lease_lost."""
    gate, release = threading.Event(), threading.Event()

    @app.step
    async def slow() -> str:
        gate.set()
        await asyncio.to_thread(release.wait, 10)
        return "late"

    @app.workflow
    async def flow() -> str:
        return await slow()

    app.enqueue(flow, run_id="z1")
    w = Worker(app)
    clock: Any = app.clock
    with caplog.at_level(logging.INFO, logger="surefoot"):
        w.claim()
        assert gate.wait(10)
        clock.advance(app.lease + 1)
        assert app.journal.claim(
            "other",
            now=clock.now(),
            lease_until=clock.now() + 60,
            workflows=app.registered(),
            limit=1,
        )
        release.set()
        w.run_once(timeout=10)
    assert "fenced" in events(caplog, "z1")
    assert "lease_lost" in [a.action for a in app.show("z1").audit]
    fam = next(f for f in telemetry.collect() if f.name == "surefoot_run_events_total")
    assert fam.value(workflow="flow", event="fenced") == 1
