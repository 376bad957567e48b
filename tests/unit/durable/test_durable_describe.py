"""describe(), timers until a date, and replaying finished runs."""

from __future__ import annotations

import datetime as dt

from surefoot import FakeClock
from surefoot.durable import App, Worker


def test_describe_reads_kinds_compensations_and_key_plans(app: App) -> None:
    """describe() lists each step as pure, effect or wait, from the code, in code order."""

    def refund(order: str, *, key: str) -> None:
        return None

    @app.step
    async def quote(order: str) -> int:
        return 3

    @app.step(effect=True, compensate=refund)
    async def charge(order: str, *, key: str | None) -> str:
        return "ok"

    @app.step(effect=True)
    async def notify(order: str) -> None:
        return None

    @app.workflow
    async def buy(order: str) -> None:
        await quote(order)
        await app.wait_for("confirm")
        await charge(order)
        await notify(order)

    specs = {s.name: s for s in app.describe(buy)}
    assert list(specs) == ["quote", "confirm", "charge", "notify"]
    assert specs["quote"].kind == "pure" and specs["confirm"].kind == "wait"
    assert specs["charge"].kind == "effect" and specs["charge"].compensate == "refund"
    assert specs["charge"].takes_key and "run_id" in specs["charge"].key_plan
    assert not specs["notify"].takes_key and "needs_attention" in specs["notify"].key_plan
    assert app.describe("buy") == app.describe(buy)


def test_sleep_until_a_datetime(app: App, clock: FakeClock) -> None:
    """sleep_until(datetime) wakes at that moment on the app's clock."""
    when = dt.datetime.fromtimestamp(clock.now() + 90, tz=dt.UTC)

    @app.workflow
    async def later() -> float:
        await app.sleep_until(when)
        return 1.0

    h = app.enqueue(later, run_id="u")
    w = Worker(app)
    w.run_once(timeout=10)
    assert h.info().wake_at == when.timestamp()
    clock.advance(89)
    assert w.run_once(timeout=10) == 0
    clock.advance(1)
    w.run_once(timeout=10)
    assert h.result(timeout=1) == 1.0


def test_finished_run_is_never_executed_again(app: App) -> None:
    """Resuming or restarting a finished run returns its result and writes nothing."""
    calls: list[int] = []

    @app.step
    def once() -> int:
        calls.append(1)
        return 7

    @app.workflow
    def flow() -> int:
        return once()

    assert app.start(flow, run_id="f").result(timeout=10) == 7
    db = app.journal.wrapped.db  # type: ignore[attr-defined]
    before = (db.commits, [s.pos for s in app.show("f").steps])
    for _ in range(3):
        assert app.resume("f").result(timeout=10) == 7
        assert app.start(flow, run_id="f").result(timeout=10) == 7
    assert (db.commits, [s.pos for s in app.show("f").steps]) == before
    assert calls == [1]
