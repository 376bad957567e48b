"""Sagas: compensations in reverse, journalled; a failing one escalates to a person."""

from __future__ import annotations

import asyncio
import time

import pytest

from surefoot.durable import App
from surefoot.errors import RunFailedError


class Booking:
    """Fake services: what was booked, what was undone, and an undo that can be broken."""

    def __init__(self) -> None:
        self.booked: list[str] = []
        self.undone: list[str] = []
        self.broken: set[str] = set()


def _trip(app: App, svc: Booking) -> object:
    def cancel(item: str, *, key: str, result: str) -> None:
        if item in svc.broken:
            raise ConnectionError(f"cannot cancel {item}")
        svc.undone.append(result)

    @app.step(effect=True, compensate=cancel, compensate_retry=2)
    def book(item: str, *, key: str | None) -> str:
        svc.booked.append(item)
        return f"booking-{item}"

    @app.step
    def pay() -> None:
        raise RuntimeError("card declined")

    @app.workflow
    def trip() -> None:
        book("flight")
        book("hotel")
        book("car")
        pay()

    return trip


def test_failure_compensates_in_reverse(app: App) -> None:
    """Every completed effect is undone, newest first; the run ends failed."""
    svc = Booking()
    trip = _trip(app, svc)
    with pytest.raises(RunFailedError) as info:
        app.start(trip, run_id="t").result(timeout=10)
    assert info.value.status == "failed"
    assert svc.undone == ["booking-car", "booking-hotel", "booking-flight"]
    d = app.show("t")
    undo = [(s.pos, s.kind, s.status) for s in d.steps if s.kind == "compensate"]
    assert undo == [
        ("3.undo", "compensate", "done"),
        ("2.undo", "compensate", "done"),
        ("1.undo", "compensate", "done"),
    ]
    assert d.audit[-1].action == "failed"


def test_failed_compensation_needs_attention_then_retry_resumes(app: App) -> None:
    """A compensation failing for good escalates with an audit of what was and was not undone;
    retry after the fix resumes the rollback without undoing anything twice."""
    svc = Booking()
    svc.broken.add("hotel")
    trip = _trip(app, svc)
    with pytest.raises(RunFailedError) as info:
        app.start(trip, run_id="t").result(timeout=10)
    assert info.value.status == "needs_attention"
    assert svc.undone == ["booking-car"]
    d = app.show("t")
    last = d.audit[-1]
    assert last.action == "needs_attention"
    assert [u["step"] + u["pos"] for u in last.detail["undone"]] == ["book3"]
    assert [u["pos"] for u in last.detail["not_undone"]] == ["2", "1"]
    assert "cannot cancel hotel" in last.detail["failed"]["error"]
    failed = next(s for s in d.steps if s.pos == "2.undo")
    assert failed.status == "error" and failed.attempts == 2
    svc.broken.clear()
    with pytest.raises(RunFailedError) as again:
        app.retry("t", reason="hotel API fixed").result(timeout=10)
    assert again.value.status == "failed"
    assert svc.undone == ["booking-car", "booking-hotel", "booking-flight"]
    assert svc.booked == ["flight", "hotel", "car"]
    assert [a.action for a in app.show("t").audit if a.action == "retry"] == ["retry"]


def test_failure_under_gather_stops_siblings_before_rollback(app: App) -> None:
    """When one branch of a gather fails, branches still running are stopped before the
    rollback, so no effect lands after its compensations ran."""
    booked: list[str] = []
    undone: list[str] = []

    async def unbook(item: str, *, result: str) -> None:
        undone.append(result)

    @app.step(effect=True, compensate=unbook)
    async def book(item: str, *, key: str | None) -> str:
        await asyncio.sleep(0.2 if item == "slow" else 0)
        booked.append(item)
        return item

    @app.step
    async def check() -> None:
        await asyncio.sleep(0.02)
        raise RuntimeError("check failed")

    @app.workflow
    async def flow() -> None:
        await asyncio.gather(book("fast"), book("slow"), check())

    with pytest.raises(RunFailedError):
        app.start(flow, run_id="g").result(timeout=10)
    time.sleep(0.4)  # long enough for the slow branch to have finished, had it gone on
    assert booked == ["fast"]
    assert undone == ["fast"]
    slow = next(s for s in app.show("g").steps if s.pos == "2")
    assert slow.status == "intent"  # it was stopped mid-flight, not left running
