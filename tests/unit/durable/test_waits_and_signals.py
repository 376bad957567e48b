"""Waits and signals: sleep in seconds, several waits named together under gather, a signal
sent while the run suspends, to an ended run, or to a sync workflow."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from surefoot import FakeClock
from surefoot.durable import App, Worker, current_run
from surefoot.errors import JournalError, RunFailedError


def _two_waits(app: App) -> Any:
    @app.workflow
    async def both() -> list[Any]:
        a, b = await asyncio.gather(app.wait_for("a"), app.wait_for("b"))
        return [a, b]

    return both


def test_signal_for_any_wait_under_gather_wakes_the_run(app: App) -> None:
    """Two waits suspend together; a signal for the second one makes the run due at once."""
    flow = _two_waits(app)
    h = app.enqueue(flow, run_id="g")
    w = Worker(app)
    assert w.run_once(timeout=10) == 1
    assert app.show("g").run.waiting_for == "a, b"
    app.signal("g", "b", 2)
    assert w.run_once(timeout=10) == 1  # woke for "b" (no timeout, so no timer would)
    assert h.status() == "sleeping" and app.show("g").run.waiting_for == "a"
    app.signal("g", "a", 1)
    assert w.run_once(timeout=10) == 1
    assert h.result(timeout=1) == [1, 2]


def test_wait_name_with_separator_is_refused(app: App) -> None:
    """A signal name containing the header's separator is a clear error."""

    @app.workflow
    def bad() -> None:
        app.wait_for("a\x1fb")

    with pytest.raises(RunFailedError, match="signal name"):
        app.start(bad, run_id="sep").result(timeout=10)


def test_signal_sent_while_the_run_suspends_is_not_left_for_the_poll(pg_url: str) -> None:
    """On PostgreSQL a run that suspends with its signal already queued is due at once:
    a worker polling every 30 s finishes it within seconds."""
    import time
    import uuid

    from surefoot import storage

    url = f"{pg_url}?schema=sf_t_{uuid.uuid4().hex[:12]}"
    app = App(url, poll=30, lease=5, worker_id="notify-sleeper")

    @app.step
    async def poke() -> None:  # runs after the wait looked for "go" and found none
        app.signal(current_run().run_id, "go", "now")

    @app.workflow
    async def racy() -> Any:
        got, _ = await asyncio.gather(app.wait_for("go"), poke())
        return got

    counts = {"notified": 0, "slices": 0}
    real = app.journal.waking.wait_for_work  # type: ignore[attr-defined]

    def wait(timeout: float) -> bool:  # count waits ended by NOTIFY and slices timed out
        got = bool(real(timeout))
        counts["notified" if got else "slices"] += 1
        return got

    app.journal.waking.wait_for_work = wait  # type: ignore[attr-defined]
    w = Worker(app, concurrency=2)
    stop = threading.Event()
    t = threading.Thread(target=w.run, args=(stop,), daemon=True)
    t.start()
    try:
        end = time.monotonic() + 10
        while counts["slices"] < 1 and time.monotonic() < end:
            time.sleep(0.02)  # until the worker is idle, waiting on NOTIFY
        app.enqueue(racy, run_id="race")
        before = counts["slices"]
        end = time.monotonic() + 2 * app.poll  # generous: a poll-driven pickup also fits
        while time.monotonic() < end and app.journal.get_run("race").status != "succeeded":
            time.sleep(0.02)
        assert app.journal.get_run("race").status == "succeeded"
        # finished before the worker's timed-out 0.5 s slices added up to one 30 s poll
        assert counts["slices"] - before < int(app.poll / 0.5)
        assert sorted(s.name for s in app.show("race").steps) == ["poke", "signal:go"]
    finally:
        stop.set()
        t.join(timeout=5)
        st: Any = storage.open(url)
        app.close()
        st.db.drop_schema()
        st.close()


def test_signal_for_the_second_wait_sent_while_suspending_makes_the_run_due(app: App) -> None:
    """A signal for any of several waits that lands while the run suspends wakes it at once."""

    @app.step
    async def poke() -> None:  # runs after both waits looked and found nothing
        app.signal(current_run().run_id, "b", 2)

    @app.workflow
    async def racy() -> Any:
        a, b, _ = await asyncio.gather(app.wait_for("a", default=0), app.wait_for("b"), poke())
        return [a, b]

    h = app.enqueue(racy, run_id="r2")
    w = Worker(app)
    assert w.run_once(timeout=10) == 1
    assert w.run_once(timeout=10) == 1  # due at once for "b", not at a deadline (none)
    assert app.show("r2").run.waiting_for == "a"
    app.signal("r2", "a", 1)
    assert w.run_once(timeout=10) == 1
    assert h.result(timeout=1) == [1, 2]


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
    audit = [a.action for a in app.show("a").audit]
    assert audit == ["created", "signal", "claimed"]  # the refused one: no trace


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
