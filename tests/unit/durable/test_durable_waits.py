"""Durable timers and signals: the run suspends, holds nothing, and resumes when due."""

from __future__ import annotations

import asyncio
import threading

from surefoot import FakeClock
from surefoot.durable import App, Worker


async def _tasks() -> int:
    return len(asyncio.all_tasks())


def _sleepy(app: App, calls: list[str]) -> object:
    @app.step
    async def before() -> str:
        calls.append("before")
        return "b"

    @app.step
    async def after() -> str:
        calls.append("after")
        return "a"

    @app.workflow
    async def nap() -> str:
        await before()
        await app.sleep(hours=24)
        return await after()

    return nap


def test_many_runs_suspending_together_hold_no_thread(app: App) -> None:
    """Runs stepping together commit on the writer's one thread (the loop keeps running the
    others meanwhile); sleeping runs hold no thread: a second burst of runs adds none."""
    nap = _sleepy(app, [])
    worker = Worker(app, concurrency=20)
    app.executor.loop()
    threads = threading.active_count()
    counts = []
    for burst in range(2):
        for i in range(20):
            app.enqueue(nap, run_id=f"t{burst}-{i}")
        assert worker.run_once(timeout=30) == 20
        counts.append(threading.active_count())
    assert [r.status for r in app.list_runs(limit=50)] == ["sleeping"] * 40
    writer = app.executor.writer
    assert writer is not None and writer.batches < 40 * 2  # records shared commits
    assert counts == [threads + 1, threads + 1]  # the writer's thread, once per app


def test_timer_suspends_and_holds_nothing(app: App, clock: FakeClock) -> None:
    """At the timer the run is sleeping with no task, thread or worker slot held."""
    calls: list[str] = []
    nap = _sleepy(app, calls)
    h = app.enqueue(nap, run_id="t")
    worker = Worker(app)
    loop = app.executor.loop()
    threads = threading.active_count()
    assert worker.run_once(timeout=10) == 1
    info = app.show("t").run
    assert info.status == "sleeping" and info.owner is None
    assert info.wake_at == clock.now() + 24 * 3600
    assert app.executor.active == {}
    assert threading.active_count() == threads
    assert asyncio.run_coroutine_threadsafe(_tasks(), loop).result() == 1  # only the probe
    assert worker.run_once(timeout=10) == 0  # not due yet: nothing to claim
    clock.advance(24 * 3600)
    assert worker.run_once(timeout=10) == 1
    assert h.result(timeout=1) == "a"
    assert calls == ["before", "after"]


def test_embedded_result_waits_out_the_timer(app: App, clock: FakeClock) -> None:
    """handle.result() of a started run sleeps on the clock and finishes the run itself."""
    calls: list[str] = []
    nap = _sleepy(app, calls)
    t0 = clock.now()
    assert app.start(nap, run_id="e").result() == "a"
    assert clock.now() - t0 >= 24 * 3600
    assert calls == ["before", "after"]


def test_sync_workflow_sleeps_too(app: App, clock: FakeClock) -> None:
    """A sync workflow's app.sleep() suspends the same way."""

    @app.workflow
    def flow() -> float:
        app.sleep(60)
        return clock.now()

    h = app.enqueue(flow, run_id="s")
    w = Worker(app)
    w.run_once(timeout=10)
    assert h.status() == "sleeping"
    clock.advance(61)
    w.run_once(timeout=10)
    assert h.status() == "succeeded"


def _approval(app: App) -> object:
    @app.workflow
    async def approve(doc: str) -> list[object]:
        first = await app.wait_for("approve", timeout=3600)
        second = await app.wait_for("approve", timeout=60, default="timed out")
        return [doc, first, second]

    return approve


def test_signal_delivered_exactly_once(app: App, clock: FakeClock) -> None:
    """A signal wakes the waiting run and is consumed by one wait only."""
    flow = _approval(app)
    h = app.enqueue(flow, "d", run_id="s")
    w = Worker(app)
    w.run_once(timeout=10)
    assert app.show("s").run.waiting_for == "approve"
    assert app.signal("s", "approve", {"by": "ann"}) is True
    w.run_once(timeout=10)  # consumes it, then waits for the second one
    assert h.status() == "sleeping"
    clock.advance(61)
    w.run_once(timeout=10)
    assert h.result(timeout=1) == ["d", {"by": "ann"}, "timed out"]
    steps = app.show("s").steps
    assert [s.name for s in steps] == ["signal:approve", "signal:approve"]


def test_signal_sent_before_the_wait_is_kept(app: App) -> None:
    """A signal that arrives before the run waits is delivered when it gets there."""
    flow = _approval(app)
    h = app.enqueue(flow, "d", run_id="early")
    app.signal("early", "approve", 1)
    app.signal("early", "approve", 2)
    Worker(app).run_once(timeout=10)
    assert h.result(timeout=1) == ["d", 1, 2]


def test_signal_id_deduplicates(app: App) -> None:
    """The same signal_id sent twice is delivered once."""
    flow = _approval(app)
    app.enqueue(flow, "d", run_id="dup")
    assert app.signal("dup", "approve", 1, signal_id="s1") is True
    assert app.signal("dup", "approve", 1, signal_id="s1") is False


def test_wait_timeout_returns_default(app: App, clock: FakeClock) -> None:
    """With no signal, the wait ends at its timeout with the default."""
    flow = _approval(app)
    h = app.enqueue(flow, "d", run_id="late")
    w = Worker(app)
    w.run_once(timeout=10)
    clock.advance(3601)
    w.run_once(timeout=10)
    clock.advance(61)
    w.run_once(timeout=10)
    assert h.result(timeout=1) == ["d", None, "timed out"]


def test_waiting_on_a_running_run_does_not_move_the_fake_clock(app: App, clock: FakeClock) -> None:
    """result() polls a run executing elsewhere in real time: virtual time stays put, so
    leases and timeouts on the FakeClock do not run out while the run works."""
    gate = threading.Event()

    @app.step
    async def slow() -> int:
        await asyncio.to_thread(gate.wait, 5)
        return 1

    @app.workflow
    async def flow() -> int:
        return await slow()

    app.enqueue(flow, run_id="w")
    Worker(app).claim()
    timer = threading.Timer(0.3, gate.set)
    timer.start()
    t0 = clock.now()
    assert app.handle("w").result(timeout=10) == 1
    assert clock.now() == t0
    timer.join()
