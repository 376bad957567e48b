"""Named queues: concurrency per worker and across workers, rate, priority, dedup."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from surefoot import FakeClock
from surefoot.durable import App, Worker
from surefoot.errors import ConfigError


def _claim(app: App, clock: FakeClock, owner: str, limit: int = 10, **kw: Any) -> list[str]:
    now = clock.now()
    got = app.journal.queues.claim(
        "q",
        owner,
        now=now,
        lease_until=now + app.lease,
        workflows=app.registered(),
        limit=limit,
        **kw,
    )
    return [r for r, _ in got]


def _flow(app: App) -> Any:
    @app.workflow
    def flow(i: int) -> int:
        return i

    return flow


def test_global_concurrency_holds_across_owners(app: App, clock: FakeClock) -> None:
    """Two runs of a queue limited to 2 execute at once, whoever claims; expired leases
    free their slots only to be taken over, never added to."""
    flow = _flow(app)
    app.queue("q", concurrency=2)
    for i in range(5):
        app.enqueue(flow, i, queue="q")
    assert len(_claim(app, clock, "w1")) == 2
    assert _claim(app, clock, "w2") == []
    clock.advance(app.lease + 1)  # w1 died: its two runs are taken over, no more
    assert len(_claim(app, clock, "w2")) == 2
    assert _claim(app, clock, "w3") == []
    running = [r for r in app.list_runs(status="running") if r.owner == "w2"]
    assert len(running) == 2


def test_worker_concurrency_limits_each_worker(app: App, clock: FakeClock) -> None:
    """worker_concurrency=1 gives each worker one run of the queue at a time."""
    flow = _flow(app)
    app.queue("q", concurrency=2, worker_concurrency=1)
    for i in range(4):
        app.enqueue(flow, i, queue="q")
    assert len(_claim(app, clock, "w1")) == 1
    assert _claim(app, clock, "w1") == []
    assert len(_claim(app, clock, "w2")) == 1
    assert _claim(app, clock, "w3") == []  # the global limit of 2 is reached


def test_rate_limit_counts_starts_per_period(app: App, clock: FakeClock) -> None:
    """rate=(3, 60): three runs start per 60 s, even when the first ones finished."""
    flow = _flow(app)
    app.queue("q", rate=(3, 60.0))
    for i in range(7):
        app.enqueue(flow, i, queue="q")
    assert Worker(app).run_once(timeout=10) == 3
    assert Worker(app).run_once(timeout=10) == 0
    clock.advance(61)
    assert Worker(app).run_once(timeout=10) == 3
    assert len(app.list_runs(status="succeeded")) == 6
    assert len(app.list_runs(status="pending")) == 1


def test_priority_lower_first_then_oldest(app: App, clock: FakeClock) -> None:
    """Runs leave a queue by priority (lower first), then in the order they came."""
    flow = _flow(app)
    app.queue("q")
    for rid, prio in [("a", 5), ("b", 0), ("c", 1), ("d", 0)]:
        app.enqueue(flow, 0, queue="q", priority=prio, run_id=rid)
        clock.advance(1)
    order = [_claim(app, clock, "w", limit=1) for _ in range(4)]
    assert order == [["b"], ["d"], ["c"], ["a"]]


def test_dedup_id_returns_the_unfinished_holder(app: App, clock: FakeClock) -> None:
    """While a run with dedup id x is unfinished, enqueuing x again returns it; after
    it finished, x starts a new run."""
    flow = _flow(app)
    app.queue("q")
    first = app.enqueue(flow, 1, queue="q", dedup_id="x")
    again = app.enqueue(flow, 2, queue="q", dedup_id="x")
    assert again.run_id == first.run_id
    assert len(app.list_runs()) == 1
    Worker(app).run_once(timeout=10)
    assert first.result(timeout=5) == 1
    third = app.enqueue(flow, 3, queue="q", dedup_id="x")
    assert third.run_id != first.run_id
    assert len(app.list_runs()) == 2


def test_ordinary_claims_leave_queued_runs_alone(app: App, clock: FakeClock) -> None:
    """The claim of un-queued runs never takes a run that waits in a queue."""
    flow = _flow(app)
    app.queue("q", concurrency=1)
    app.enqueue(flow, 1, queue="q")
    now = clock.now()
    got = app.journal.claim("w", now=now, lease_until=now + 5, workflows=app.registered(), limit=10)
    assert got == []


def test_queued_runs_finish_through_a_worker(app: App, clock: FakeClock) -> None:
    """A worker runs queued runs to the end, within the limit, until none is left."""
    flow = _flow(app)
    app.queue("q", concurrency=2)
    handles = [app.enqueue(flow, i, queue="q") for i in range(5)]
    w = Worker(app)
    claimed = [w.run_once(timeout=10) for _ in range(4)]
    assert claimed == [2, 2, 1, 0]
    assert [h.result(timeout=5) for h in handles] == [0, 1, 2, 3, 4]
    (view,) = app.queues()
    assert view["queue"] == "q" and view["concurrency"] == 2
    assert view["runs"] == {"succeeded": 5}


def test_bad_queue_use_is_refused(app: App) -> None:
    """An undeclared queue, a dedup id without a queue, a bad limit: clear errors."""
    flow = _flow(app)
    with pytest.raises(ConfigError, match="not declared"):
        app.enqueue(flow, 1, queue="nope")
    with pytest.raises(ConfigError, match="needs a queue"):
        app.enqueue(flow, 1, dedup_id="x")
    with pytest.raises(ConfigError, match="concurrency"):
        app.queue("bad", concurrency=0)
    with pytest.raises(ConfigError, match="rate"):
        app.queue("bad", rate=(1, 0))
    app.queue("q")
    with pytest.raises(ConfigError, match="twice"):
        app.queue("q")


class Service:
    """Counts calls executing at once (what a rate-limited API would see)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.peak = 0
        self.calls = 0

    def call(self) -> None:
        with self.lock:
            self.now += 1
            self.calls += 1
            self.peak = max(self.peak, self.now)
        time.sleep(0.02)
        with self.lock:
            self.now -= 1


def _worker_app(url: str, i: int, service: Service) -> App:
    app = App(url, poll=0.01, worker_id=f"w{i}", lease=5.0)

    @app.step
    def hit(n: int) -> int:
        service.call()
        return n

    @app.workflow
    def job(n: int) -> int:
        return hit(n) + hit(n)

    app.queue("api", concurrency=3)
    return app


def test_ten_workers_never_exceed_a_global_limit_of_three(db_url: str) -> None:
    """Ten workers (own apps, own connections) share a queue limited to 3: the service
    never sees more than 3 runs' calls at once, and every run finishes once."""
    service = Service()
    apps = [_worker_app(db_url, i, service) for i in range(10)]
    handles = [apps[0].enqueue("job", n, queue="api") for n in range(24)]
    stop = threading.Event()
    threads = [
        threading.Thread(target=Worker(a, concurrency=4).run, args=(stop,), daemon=True)
        for a in apps
    ]
    try:
        for t in threads:
            t.start()
        assert [h.result(timeout=120) for h in handles] == [2 * n for n in range(24)]
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=10)
        for a in apps:
            a.close()
    assert service.calls == 48
    assert 1 <= service.peak <= 3
