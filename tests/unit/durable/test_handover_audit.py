"""Every way a run in flight changes hands leaves a ``taken_over`` audit entry saying who
took it, from which epoch and why (``reason``): a worker after the lease ran out, an
operator's resume, the same worker id taking it back, an in-process start again.

The run is left in flight by an in-process crash (``CrashPlan``): running, under a lease
nobody renews, never claimed (``start()`` created it running here), as a SIGKILL leaves it.
A ``FakeClock`` moves past the lease; no real time is waited.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from surefoot import FakeClock
from surefoot.durable import App, CrashPlan, SimulatedCrash, Worker

LEASE = 10.0


def _define(app: App, calls: list[str]) -> Any:
    @app.step
    def a() -> str:
        calls.append("a")
        return "a"

    @app.step
    def b(x: str) -> str:
        calls.append("b")
        return x + "b"

    @app.workflow
    def ab() -> str:
        return b(a())

    return ab


@pytest.fixture
def pair(db_url: str, clock: FakeClock) -> Iterator[tuple[App, App, Any, list[str]]]:
    """``first`` crashed in run ``r`` after step ``a`` (left in flight at epoch 1);
    ``second`` is another app (worker id ``second``) on the same journal and clock."""
    calls: list[str] = []
    first = App(db_url, clock=clock, poll=0.01, worker_id="first", lease=LEASE)
    second = App(db_url, clock=clock, poll=0.01, worker_id="second", lease=LEASE)
    wf = _define(first, calls)
    _define(second, calls)
    first.crash = CrashPlan("after_journal", step="a")
    with pytest.raises(SimulatedCrash):
        first.start(wf, run_id="r").result(timeout=10)
    first.crash = None
    row = first.show("r").run
    assert (row.status, row.owner, row.epoch) == ("running", "first", 1)
    yield first, second, wf, calls
    second.close()
    first.close()


def _taken(app: App) -> list[tuple[str, int, int, str]]:
    return [
        (e.actor, e.detail["previous_epoch"], e.detail["epoch"], e.detail["reason"])
        for e in app.show("r").audit
        if e.action == "taken_over"
    ]


def test_a_worker_taking_over_after_the_lease_says_the_lease_expired(
    pair: tuple[App, App, Any, list[str]], clock: FakeClock
) -> None:
    _, second, _, calls = pair
    clock.advance(LEASE + 1)
    assert Worker(second).run_once(timeout=10) == 1
    assert second.show("r").run.status == "succeeded"
    assert _taken(second) == [("second", 1, 2, "lease_expired")]
    why = next(e for e in second.show("r").audit if e.action == "taken_over").detail["why"]
    assert why.endswith("its lease had run out (its worker died or stalled past its lease)")
    assert calls == ["a", "b"]  # the journalled step was not run again


def test_an_operator_resume_says_operator_and_who(
    pair: tuple[App, App, Any, list[str]], clock: FakeClock
) -> None:
    _, second, _, calls = pair
    clock.advance(LEASE + 1)
    assert second.resume("r").result(timeout=10) == "ab"
    assert _taken(second) == [("second", 1, 2, "operator")]
    resume = [e for e in second.show("r").audit if e.action == "resume"]
    assert [(e.actor, e.detail["worker"], e.detail["from"]) for e in resume] == [
        ("operator", "second", "running")
    ]
    assert calls == ["a", "b"]


def test_an_in_process_start_again_elsewhere_says_the_lease_expired(
    pair: tuple[App, App, Any, list[str]], clock: FakeClock
) -> None:
    _, second, wf, calls = pair
    clock.advance(LEASE + 1)
    assert second.start(wf, run_id="r").result(timeout=10) == "ab"
    assert _taken(second) == [("second", 1, 2, "lease_expired")]
    assert calls == ["a", "b"]


def test_the_same_worker_id_taking_its_run_back_says_restarted(
    pair: tuple[App, App, Any, list[str]],
) -> None:
    """No lease waited: the same worker id takes back a run it no longer executes, and
    the entry says so (not that a lease expired)."""
    first, _, wf, calls = pair
    assert first.start(wf, run_id="r").result(timeout=10) == "ab"
    assert _taken(first) == [("first", 1, 2, "restarted")]
    assert calls == ["a", "b"]


def test_a_restarted_worker_taking_its_runs_back_says_restarted(
    pair: tuple[App, App, Any, list[str]],
) -> None:
    first, _, _, calls = pair
    assert Worker(first).run_once(timeout=10) == 0  # taken back at start, not claimed
    assert first.handle("r").result(timeout=10) == "ab"
    assert _taken(first) == [("first", 1, 2, "restarted")]
    assert calls == ["a", "b"]
