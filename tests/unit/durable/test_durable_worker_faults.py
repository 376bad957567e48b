"""Workers under faults: journal outages, NOTIFY wake-ups, poison runs, waits under gather."""

from __future__ import annotations

import asyncio
import logging
import random
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from surefoot import FakeClock, storage
from surefoot.durable import App, Worker
from surefoot.errors import ConfigError, StoreUnavailableError
from surefoot.resilience import Backoff
from surefoot.storage.sqlite._journal import MIGRATIONS

APPROVE = "approve"


def _until(cond: Callable[[], bool], timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


def _count_wakes(app: App) -> dict[str, int]:
    """Count waits ended by a NOTIFY and wait slices that timed out, around wait_for_work."""
    counts = {"notified": 0, "slices": 0}
    real = app.journal.waking.wait_for_work  # type: ignore[attr-defined]

    def wait(timeout: float) -> bool:
        got = bool(real(timeout))
        counts["notified" if got else "slices"] += 1
        return got

    app.journal.waking.wait_for_work = wait  # type: ignore[attr-defined]
    return counts


def _serve(w: Worker) -> tuple[threading.Event, threading.Thread]:
    stop = threading.Event()
    t = threading.Thread(target=w.run, args=(stop,), daemon=True)
    t.start()
    return stop, t


@pytest.fixture
def real_app(db_url: str) -> Iterator[App]:
    """An app on real time (workers serve in a thread)."""
    a = App(db_url, poll=0.05, lease=5, worker_id=f"w-{uuid.uuid4().hex[:6]}")
    yield a
    a.close()


# -- 1. a journal outage --------------------------------------------------------------


def test_worker_backs_off_through_an_outage_and_keeps_working(
    real_app: App, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Claims failing with StoreUnavailableError do not end the worker: it backs off, logs
    one line when the outage starts and one when it ends, then runs the queued run."""
    app = real_app
    calls: list[str] = []

    @app.step
    def work(x: int) -> int:
        calls.append("work")
        return x * 2

    @app.workflow
    def wf(x: int) -> int:
        return work(x)

    journal = app.journal
    real_claim = journal.claim
    failures = {"left": 4}

    def flaky(*args: Any, **kwargs: Any) -> Any:
        if failures["left"] > 0:
            failures["left"] -= 1
            raise StoreUnavailableError(app.url, "the database went away (test)")
        return real_claim(*args, **kwargs)

    monkeypatch.setattr(journal, "claim", flaky)
    h = app.enqueue(wf, 21, run_id="outage")
    w = Worker(app, backoff=Backoff(0.001, 0.02, "full"), rng=random.Random(7))
    caplog.set_level(logging.WARNING, logger="surefoot.durable")
    stop, t = _serve(w)
    try:
        assert _until(lambda: app.journal.get_run("outage").status == "succeeded", 10)
    finally:
        stop.set()
        t.join(timeout=10)
    assert not t.is_alive()
    assert h.result(timeout=1) == 42 and calls == ["work"]
    assert w.outages == 1 and w.failed_claims == 4
    lines = [r.getMessage() for r in caplog.records if r.name == "surefoot.durable"]
    assert sum("is unavailable" in m for m in lines) == 1
    assert sum("answers again" in m for m in lines) == 1


def test_worker_still_stops_on_a_schema_error(tmp_path: Path) -> None:
    """A database from a newer surefoot is not an outage: the worker fails clearly."""
    from surefoot.errors import SchemaVersionError

    path = tmp_path / "new.db"
    con = sqlite3.connect(path)
    con.executescript(
        "CREATE TABLE surefoot_schema (component TEXT PRIMARY KEY, version INTEGER NOT NULL);"
        "INSERT INTO surefoot_schema VALUES ('durable', 99);"
    )
    con.close()
    app = App(f"sqlite:///{path}", poll=0.01)
    try:
        with pytest.raises(SchemaVersionError):
            Worker(app).run(threading.Event(), idle_exit=5)
    finally:
        app.close()


# -- 2. idle workers wake on NOTIFY ---------------------------------------------------


def test_workers_wake_on_notify_despite_a_long_poll(pg_url: str) -> None:
    """On PostgreSQL a worker polling every 30 s picks up a run enqueued while it is idle,
    and one enqueued while it is busy with a free slot, within seconds; stop is prompt."""
    url = f"{pg_url}?schema=sf_t_{uuid.uuid4().hex[:12]}"
    app = App(url, poll=30, lease=5, worker_id="notify-worker")
    release = threading.Event()

    @app.step
    def hold(x: int) -> int:
        release.wait(15)
        return x

    @app.workflow
    def slow(x: int) -> int:
        return hold(x)

    @app.step
    def quick(x: int) -> int:
        return x + 1

    @app.workflow
    def fast(x: int) -> int:
        return quick(x)

    counts = _count_wakes(app)
    full_poll = int(app.poll / 0.5)  # timed-out 0.5 s slices that make up one poll interval
    w = Worker(app, concurrency=2)
    stop, t = _serve(w)

    def slices_until(cond: Callable[[], bool]) -> int:
        """Timed-out wait slices the worker spent before ``cond`` held (bounded wait)."""
        before = counts["slices"]
        assert _until(cond, 2 * app.poll)  # generous: a poll-driven pickup also fits
        return counts["slices"] - before

    try:
        assert _until(lambda: counts["slices"] >= 1, 10)  # the worker has claimed nothing, waits
        app.enqueue(fast, 1, run_id="idle-1")
        idle = slices_until(lambda: app.journal.get_run("idle-1").status == "succeeded")
        app.enqueue(slow, 2, run_id="busy-hold")
        slices_until(lambda: app.journal.get_run("busy-hold").status == "running")
        app.enqueue(fast, 3, run_id="busy-2")
        busy = slices_until(lambda: app.journal.get_run("busy-2").status == "succeeded")
        assert counts["notified"] >= 2  # woken by NOTIFY, not by the poll running out
        assert idle < full_poll and busy < full_poll
        assert app.journal.get_run("busy-hold").status == "running"  # still held: the slot was free
        release.set()
        slices_until(lambda: app.journal.get_run("busy-hold").status == "succeeded")
    finally:
        release.set()
        stop.set()
        t.join(timeout=5)
        alive = t.is_alive()
        st: Any = storage.open(url)
        app.close()
        st.db.drop_schema()
        st.close()
    assert not alive  # stop is noticed within a wait slice, not after the 30 s poll


# -- 3. a run that kills its worker every time ----------------------------------------


def test_a_run_claimed_past_max_claims_needs_attention(app: App, clock: FakeClock) -> None:
    """After max_claims claims with no suspension the run is parked, not run, and audited;
    retry resets the count and the run finishes."""
    app.configure(max_claims=3)
    calls: list[str] = []

    @app.step
    def work() -> str:
        calls.append("work")
        return "ok"

    @app.workflow
    def poison() -> str:
        return work()

    app.enqueue(poison, run_id="p")
    for i in range(3):  # three workers claim it and die before writing anything
        now = clock.now()
        got = app.journal.claim(
            f"dead-{i}", now=now, lease_until=now + app.lease, workflows=app.registered(), limit=1
        )
        assert [r for r, _ in got] == ["p"]
        clock.advance(app.lease + 1)
    assert app.journal.get_run("p").claims == 3
    w = Worker(app)
    assert w.run_once(timeout=10) == 1
    info = app.show("p")
    assert info.run.status == "needs_attention" and calls == []
    parked = [a for a in info.audit if a.action == "needs_attention"]
    assert len(parked) == 1
    detail = parked[0].detail
    assert detail["reason"] == "max_claims" and detail["claims"] == 4
    assert detail["max_claims"] == 3 and "runs retry" in detail["why"]
    app.retry("p")
    assert app.journal.get_run("p").claims == 0
    w.run_once(timeout=10)
    assert app.journal.get_run("p").status == "succeeded" and calls == ["work"]


def test_suspending_resets_the_claim_count(app: App, clock: FakeClock) -> None:
    """A run that sleeps many times is claimed once per wake, never parked by max_claims."""
    app.configure(max_claims=1)

    @app.workflow
    async def napper() -> int:
        for _ in range(3):
            await app.sleep(60)
        return 3

    app.enqueue(napper, run_id="n")
    w = Worker(app)
    for _ in range(3):
        assert w.run_once(timeout=10) == 1
        assert app.journal.get_run("n").status == "sleeping"
        clock.advance(61)
    w.run_once(timeout=10)
    assert app.journal.get_run("n").status == "succeeded"


def test_max_claims_must_be_a_positive_int() -> None:
    """max_claims=0 is a clear ConfigError naming the value."""
    with pytest.raises(ConfigError, match="max_claims must be an int >= 1, got 0"):
        App("sqlite://", max_claims=0)


def test_a_schema_1_database_is_migrated_and_keeps_its_runs(tmp_path: Path) -> None:
    """A journal written before the claim counter gains it (migration 2) and every later
    migration; its runs still run."""
    url = f"sqlite:///{tmp_path / 'old.db'}"
    st: Any = storage.open(url)
    st.db.migrate("durable", MIGRATIONS[:1])
    with st.db.write() as c:
        c.execute(
            "INSERT INTO durable_runs(run_id, workflow, version, structure_hash, args, "
            "strategy, status, created_at, updated_at) VALUES ('old', 'wf', '1', 'h', "
            "'[[5], {}]', 'journal_keys', 'pending', 0, 0)"
        )
    st.close()
    app = App(url, clock=FakeClock(), poll=0.01)

    @app.workflow
    def wf(x: int) -> int:
        return x + 1

    try:
        assert app.journal.get_run("old").claims == 0
        Worker(app).run_once(timeout=10)
        assert app.handle("old").result(timeout=1) == 6
        con = sqlite3.connect(tmp_path / "old.db")
        assert con.execute("SELECT version FROM surefoot_schema").fetchone() == (len(MIGRATIONS),)
        con.close()
    finally:
        app.close()


# -- 4. describe names a wait after its signal -----------------------------------------


def test_describe_names_waits_after_constant_signals(app: App) -> None:
    """A literal or module-constant signal name names the wait; a computed one leaves
    ``wait_for``; the structure hash does not change with the naming."""

    @app.workflow
    async def two(kind: str) -> None:
        await app.wait_for("confirm")
        await app.wait_for(APPROVE)
        await app.wait_for(f"{kind}-done")

    assert [s.name for s in app.describe(two)] == ["confirm", "approve", "wait_for"]
    assert all(s.kind == "wait" for s in app.describe(two))


# -- 6. two waits under one gather ------------------------------------------------------


def test_two_waits_under_gather_each_keep_their_deadline(app: App, clock: FakeClock) -> None:
    """Both waits journal their deadline; the run wakes at the earlier one, whichever of
    them suspended first."""

    @app.workflow
    async def both() -> list[Any]:
        a, b = await asyncio.gather(
            app.wait_for("x", timeout=100, default="no-x"),
            app.wait_for("y", timeout=50, default="no-y"),
        )
        return [a, b]

    t0 = clock.now()
    h = app.enqueue(both, run_id="g")
    w = Worker(app)
    w.run_once(timeout=10)
    run = app.journal.get_run("g")
    assert run.status == "sleeping" and run.wake_at == t0 + 50
    waiting = {s.name: s.result for s in app.show("g").steps}
    assert waiting == {"signal:x": {"deadline": t0 + 100}, "signal:y": {"deadline": t0 + 50}}
    clock.advance(51)
    w.run_once(timeout=10)
    assert (
        app.journal.get_run("g").wake_at == t0 + 100
    )  # y timed out; x still waits its own deadline
    app.signal("g", "x", "yes")
    w.run_once(timeout=10)
    assert h.result(timeout=1) == ["yes", "no-y"]


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


def test_worker_stops_on_a_damaged_schema_record(tmp_path: Path) -> None:
    """A journal whose surefoot_schema row says fewer migrations than its tables hold (a
    damaged record) stops the worker with CorruptionError, not the StoreUnavailableError
    ("already exists" / "duplicate column") an outage is retried on (#27)."""
    from surefoot.errors import CorruptionError

    path = tmp_path / "damaged.db"
    st = storage.open(f"sqlite:///{path}")
    st.journal()
    st.close()
    with sqlite3.connect(path) as con:
        con.execute("UPDATE surefoot_schema SET version = 2 WHERE component = 'durable'")
    con.close()
    app = App(f"sqlite:///{path}", poll=0.01)
    try:
        with pytest.raises(CorruptionError, match="says version 2"):
            Worker(app).run(threading.Event(), idle_exit=5)
    finally:
        app.close()
