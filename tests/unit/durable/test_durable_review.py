"""Review fixes: current_run(), waits named together under gather, resolve, cancel, fork keys."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from surefoot import FakeClock
from surefoot.durable import App, CrashPlan, RunContext, SimulatedCrash, Worker, current_run
from surefoot.errors import ConfigError, RunFailedError


def test_current_run_inside_steps_workflow_and_compensation(app: App) -> None:
    """Steps, compensations and workflow code see their run id, step name and position."""
    seen: list[RunContext] = []

    def undo(*, key: str | None = None) -> None:
        seen.append(current_run())

    @app.step
    async def pure() -> str:
        seen.append(current_run())
        return "p"

    @app.step(effect=True, compensate=undo)
    def act(*, key: str | None = None) -> str:
        seen.append(current_run())
        return "a"

    @app.step
    def boom() -> None:
        raise ValueError("no")

    @app.workflow
    async def flow() -> None:
        seen.append(current_run())
        await pure()
        await asyncio.gather(pure(), pure())
        act()
        boom()

    with pytest.raises(RunFailedError):
        app.start(flow, run_id="cr").result(timeout=10)
    where = [(c.run_id, c.step, c.pos, c.attempt) for c in seen]
    assert where == [
        ("cr", None, None, 0),
        ("cr", "pure", "1", 1),
        ("cr", "pure", "2", 1),
        ("cr", "pure", "3", 1),
        ("cr", "act", "4", 1),
        ("cr", "undo", "4.undo", 1),
    ]
    assert seen[4].key == "cr:4" and seen[0].key is None
    assert seen[0].workflow == "flow"


def test_current_run_outside_a_run_is_a_clear_error(app: App) -> None:
    """A step called as a plain function has no run: current_run() says so."""

    @app.step
    def plain() -> str:
        return current_run().run_id

    with pytest.raises(ConfigError, match="only inside a workflow run"):
        plain()


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


def test_signal_sent_while_the_run_suspends_is_not_left_for_the_poll(pg_url: str) -> None:
    """On PostgreSQL a run that suspends with its signal already queued is due at once:
    a worker polling every 30 s finishes it within seconds."""
    import threading
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
    real = app.journal.wait_for_work  # type: ignore[attr-defined]

    def wait(timeout: float) -> bool:  # count waits ended by NOTIFY and slices timed out
        got = bool(real(timeout))
        counts["notified" if got else "slices"] += 1
        return got

    app.journal.wait_for_work = wait  # type: ignore[attr-defined]
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
