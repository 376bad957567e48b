"""Schedules: cron parsing, one run per tick across workers, catch-up after downtime."""

from __future__ import annotations

import datetime as dt
import threading

import pytest

from surefoot import FakeClock
from surefoot.durable import App, Worker
from surefoot.durable._cron import Cron
from surefoot.durable._schedules import due_ticks, tick_id
from surefoot.errors import ConfigError

UTC = dt.UTC


def _t(*args: int) -> float:
    return dt.datetime(*args, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("expr", "after", "expected"),
    [
        ("*/15 * * * *", (2026, 12, 1, 10, 7), (2026, 12, 1, 10, 15)),
        ("0 3 * * *", (2026, 12, 1, 3, 0), (2026, 12, 2, 3, 0)),
        ("30 9 * * mon-fri", (2026, 12, 5, 12, 0), (2026, 12, 7, 9, 30)),  # Sat -> Mon
        ("0 0 1 jan *", (2026, 6, 1, 0, 0), (2027, 1, 1, 0, 0)),
        ("0 12 13 * 5", (2026, 12, 1, 0, 0), (2026, 12, 4, 12, 0)),  # 13th OR Friday
        ("@hourly", (2026, 12, 1, 10, 59), (2026, 12, 1, 11, 0)),
        ("0 0 29 2 *", (2026, 3, 1, 0, 0), (2028, 2, 29, 0, 0)),
        ("5,10-12 * * * 7", (2026, 12, 6, 10, 10), (2026, 12, 6, 10, 11)),  # 7 = Sunday
    ],
)
def test_cron_next_tick(expr: str, after: tuple[int, ...], expected: tuple[int, ...]) -> None:
    """next_after gives the first matching minute strictly after the given time (UTC)."""
    assert Cron.parse(expr).next_after(_t(*after)) == _t(*expected)


@pytest.mark.parametrize("expr", ["* * * *", "60 * * * *", "* * * * 8", "*/0 * * * *", "a b c d e"])
def test_bad_cron_is_refused(expr: str) -> None:
    """Wrong field counts, out-of-range values and bad steps are ConfigErrors."""
    with pytest.raises(ConfigError, match="cron"):
        Cron.parse(expr)


def test_catchup_policies() -> None:
    """After five missed hourly ticks: latest starts one, all five, skip none; the next
    tick is the first after now either way."""
    cron = Cron.parse("@hourly")
    first, now = _t(2026, 12, 1, 1, 0), _t(2026, 12, 1, 5, 30)
    latest, nxt = due_ticks(cron, first, now, "latest")
    assert latest == [_t(2026, 12, 1, 5, 0)] and nxt == _t(2026, 12, 1, 6, 0)
    assert len(due_ticks(cron, first, now, "all")[0]) == 5
    assert due_ticks(cron, first, now, "skip")[0] == []


def _app(url: str, clock: FakeClock, i: int, seen: list[str]) -> App:
    app = App(url, clock=clock, poll=0.01, worker_id=f"w{i}")

    @app.workflow
    def report(kind: str) -> str:
        seen.append(kind)
        return kind

    app.schedule("nightly", report, cron="0 3 * * *", args=("sales",))
    return app


def test_one_run_per_tick_across_workers(db_url: str) -> None:
    """Four workers fire the same schedule at the same ticks: one run per tick, each
    with the tick in its id, each executed once."""
    clock = FakeClock(start=_t(2026, 12, 1, 2, 0))
    seen: list[str] = []
    apps = [_app(db_url, clock, i, seen) for i in range(4)]
    try:
        workers = [Worker(a) for a in apps]
        for w in workers:  # records the schedule; first tick is 03:00
            w.run_once(timeout=10)
        assert apps[0].list_runs() == []
        for day in range(3):
            clock.advance(24 * 3600 if day else 3600)
            barrier = threading.Barrier(4)

            def go(w: Worker, b: threading.Barrier) -> None:
                b.wait()
                w.run_once(timeout=10)

            threads = [threading.Thread(target=go, args=(w, barrier)) for w in workers]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            for w in workers:
                w.run_once(timeout=10)
        ids = sorted(r.run_id for r in apps[0].list_runs())
        assert ids == [
            "nightly@2026-12-01T03:00:00Z",
            "nightly@2026-12-02T03:00:00Z",
            "nightly@2026-12-03T03:00:00Z",
        ]
        assert seen == ["sales"] * 3
    finally:
        for a in apps:
            a.close()


def test_downtime_starts_only_the_latest_missed_tick(db_url: str) -> None:
    """Three days without a worker, catch-up 'latest': one run, for the latest tick."""
    clock = FakeClock(start=_t(2026, 12, 1, 2, 0))
    seen: list[str] = []
    app = _app(db_url, clock, 0, seen)
    try:
        Worker(app).run_once(timeout=10)
        clock.advance(3 * 24 * 3600 + 7200)  # to 04:00 on 4 December
        w = Worker(app)
        w.run_once(timeout=10)
        w.run_once(timeout=10)
        assert [r.run_id for r in app.list_runs()] == ["nightly@2026-12-04T03:00:00Z"]
        assert tick_id("nightly", _t(2026, 12, 4, 3, 0)) == "nightly@2026-12-04T03:00:00Z"
    finally:
        app.close()


def test_bad_schedules_are_refused(app: App) -> None:
    """A bad catch-up policy, a name with '@' or a name used twice: ConfigError."""

    @app.workflow
    def job() -> None: ...

    with pytest.raises(ConfigError, match="catchup"):
        app.schedule("s", job, cron="@daily", catchup="some")
    with pytest.raises(ConfigError, match="name"):
        app.schedule("a@b", job, cron="@daily")
    app.schedule("s", job, cron="@daily")
    with pytest.raises(ConfigError, match="twice"):
        app.schedule("s", job, cron="@daily")


def test_a_scheduled_run_carries_its_workflows_timeout(db_url: str) -> None:
    """A schedule of a workflow with timeout= starts runs with that deadline."""
    clock = FakeClock(start=_t(2026, 12, 1, 2, 0))
    app = App(db_url, clock=clock, poll=0.01)

    @app.workflow(timeout=600)
    async def job() -> None:
        await app.wait_for("never")

    app.schedule("s", job, cron="@hourly")
    try:
        w = Worker(app)
        w.run_once(timeout=10)
        clock.advance(3600)
        w.run_once(timeout=10)
        (run,) = app.list_runs()
        assert run.deadline_at == run.created_at + 600
    finally:
        app.close()


def test_skip_starts_the_ticks_that_fall_due_on_time(tmp_path: object) -> None:
    """A FakeClock stepped to exactly 08:01:00, 08:02:00 … with run_once after each: skip
    starts one run per tick as all does; only a tick later than the grace is skipped."""
    made: dict[str, list[str]] = {}
    for catchup in ("all", "skip"):
        clock = FakeClock(start=_t(2026, 12, 1, 8, 0, 30))
        app = App(f"sqlite:///{tmp_path}/{catchup}.db", clock=clock, poll=0.2)

        @app.workflow
        def ping() -> str:
            return "pong"

        app.schedule("minutely", ping, cron="* * * * *", catchup=catchup)
        w = Worker(app)
        w.run_once(timeout=10)  # records the schedule; the first tick is 08:01:00
        for minute in (1, 2, 3):
            clock.advance(_t(2026, 12, 1, 8, minute, 0) - clock.now())
            w.run_once(timeout=10)
        # a worker that was down from 08:03 to 08:06:30: the 08:04-08:06 ticks are missed
        clock.advance(_t(2026, 12, 1, 8, 6, 30) - clock.now())
        w.run_once(timeout=10)
        made[catchup] = sorted(r.run_id for r in app.list_runs())
        app.close()
    on_time = [f"minutely@2026-12-01T08:0{m}:00Z" for m in (1, 2, 3)]
    assert made["skip"] == on_time
    assert made["all"] == [*on_time, *(f"minutely@2026-12-01T08:0{m}:00Z" for m in (4, 5, 6))]


def test_a_tick_is_missed_only_past_the_grace() -> None:
    """due_ticks with a grace: a tick at most ``grace`` seconds late is started by skip."""
    cron = Cron.parse("@hourly")
    tick = _t(2026, 12, 1, 5, 0)
    assert due_ticks(cron, tick, tick + 4.9, "skip", grace=5.0)[0] == [tick]
    assert due_ticks(cron, tick, tick + 5.1, "skip", grace=5.0)[0] == []
