"""Leases and fencing: every journal write is conditional on the writer's epoch."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from surefoot import FakeClock
from surefoot.durable import App, Worker
from surefoot.errors import LeaseLostError, StoreUnavailableError
from surefoot.storage.runs import StepWrite


def test_stale_epoch_write_is_refused(app: App, clock: FakeClock) -> None:
    """After a takeover, the old holder's step write changes nothing and is reported."""

    @app.workflow
    def flow() -> None:
        return None

    app.enqueue(flow, run_id="z")
    j = app.journal
    (first,) = j.claim(
        "A", now=clock.now(), lease_until=clock.now() + 5, workflows=app.registered(), limit=5
    )
    assert (
        j.claim(
            "B", now=clock.now(), lease_until=clock.now() + 5, workflows=app.registered(), limit=5
        )
        == []
    )
    clock.advance(6)
    (second,) = j.claim(
        "B", now=clock.now(), lease_until=clock.now() + 5, workflows=app.registered(), limit=5
    )
    assert second[1] == first[1] + 1
    late = StepWrite(
        "z", first[1], "1", "s", "pure", "done", "1", None, 1, clock.now(), clock.now()
    )
    fresh = StepWrite(
        "z", second[1], "2", "s", "pure", "done", "2", None, 1, clock.now(), clock.now()
    )
    assert j.commit([late, fresh]) == [False, True]
    assert [s.pos for s in j.steps("z")] == ["2"]


def test_zombie_worker_stops_at_its_next_write(app: App, clock: FakeClock) -> None:
    """A worker whose lease was taken over gets LeaseLostError and writes nothing more."""
    gate = threading.Event()
    release = threading.Event()
    done: list[str] = []

    @app.step
    async def slow() -> str:
        gate.set()
        await asyncio.to_thread(release.wait, 10)
        done.append("slow")
        return "late"

    @app.step
    async def next_step() -> str:
        done.append("next")
        return "n"

    @app.workflow
    async def flow() -> str:
        await slow()
        return await next_step()

    h = app.enqueue(flow, run_id="zz")
    w = Worker(app)
    w.claim()
    assert gate.wait(10)
    clock.advance(app.lease + 1)  # the lease expires while the step is stuck
    other = app.journal.claim(
        "other", now=clock.now(), lease_until=clock.now() + 60, workflows=app.registered(), limit=1
    )
    assert other and other[0][0] == "zz"
    release.set()
    w.run_once(timeout=10)
    assert done == ["slow"]  # it finished its call, but its write was refused
    assert app.journal.steps("zz") == []
    audit = [a.action for a in app.show("zz").audit]
    assert "lease_lost" in audit
    assert h.status() == "running"  # still the other worker's


def test_cancel_fences_the_holder(app: App, clock: FakeClock) -> None:
    """Cancelling bumps the epoch, so the worker that held the run cannot write."""

    @app.workflow
    def flow() -> None:
        return None

    app.enqueue(flow, run_id="c")
    ((_, epoch),) = app.journal.claim(
        "A", now=clock.now(), lease_until=clock.now() + 5, workflows=app.registered(), limit=1
    )
    assert app.cancel("c", reason="test") is True
    rec = StepWrite("c", epoch, "1", "s", "pure", "done", "1", None, 1, clock.now(), clock.now())
    assert app.journal.commit([rec]) == [False]
    assert app.show("c").run.status == "cancelled"
    assert app.cancel("c") is False


def test_lease_lost_error_carries_facts() -> None:
    """LeaseLostError names the run and the refused epoch."""
    err = LeaseLostError("r", 3)
    assert err.run_id == "r" and err.epoch == 3
    with pytest.raises(LeaseLostError, match="epoch 3"):
        raise err


def test_blocking_step_keeps_its_lease(tmp_path: Path) -> None:
    """A sync step that blocks the event loop longer than the lease still keeps the run:
    heartbeats run on their own thread."""
    app = App(f"sqlite:///{tmp_path / 'r.db'}", lease=1.0, poll=0.02, worker_id="blocker")
    entered = threading.Event()

    @app.step
    def block() -> str:
        entered.set()
        time.sleep(1.5)
        return "done"

    @app.workflow
    async def flow() -> str:
        return block()

    h = app.start(flow, run_id="b")
    assert entered.wait(10)
    time.sleep(1.2)  # past the lease: only heartbeats can have kept it
    now = time.time()
    stolen = app.journal.claim(
        "thief", now=now, lease_until=now + 5, workflows=app.registered(), limit=1
    )
    assert stolen == []
    assert h.result(timeout=10) == "done"
    assert [a.action for a in app.show("b").audit if a.action == "lease_lost"] == []
    app.close()


def test_journal_outage_abandons_the_run_instead_of_failing_it(
    app: App, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A journal write that fails (database locked past the timeout) is not the workflow's
    error: the run is left as it stands and resumes once the journal is back."""
    calls: list[int] = []

    @app.step
    async def work(i: int) -> int:
        calls.append(i)
        return i

    @app.workflow
    async def flow() -> int:
        return await work(1) + await work(2)

    real = app.journal.commit
    seen: list[int] = []

    def flaky(records: list[Any]) -> list[bool]:
        seen.append(1)
        if len(seen) == 2:  # the second step's write
            raise StoreUnavailableError(app.url, "database is locked")
        return real(records)

    monkeypatch.setattr(app.journal, "commit", flaky)
    h = app.enqueue(flow, run_id="down")
    w = Worker(app)
    w.run_once(timeout=10)
    info = h.info()
    assert info.status == "running" and info.error is None  # not failed, not compensated
    clock.advance(app.lease + 1)
    w.run_once(timeout=10)
    assert h.result(timeout=1) == 3
    assert calls == [1, 2, 2]  # only the step whose write was lost ran again
