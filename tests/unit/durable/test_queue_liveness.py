"""Liveness covers queued runs: a dead holder's queued runs move at once, within the
queue's limits (concurrency across workers and per worker, rate), fenced by the epoch.

The dead holder is another journal of this process that held its liveness lock and let go
of it without the clean-up a closing worker does (as a killed process leaves it). The
crash test with real processes killed by pid is tests/crash/test_liveness_kill.py.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

from surefoot import FakeClock
from surefoot.durable import App

LEASE = 600.0


def _die(journal: Any, worker_id: str, seen_by: Any) -> None:
    """Let go of ``worker_id``'s liveness lock as a killed process does (no clean-up),
    and wait until ``seen_by`` sees it gone (a server ends a closed session promptly, not
    at once)."""
    lv = journal.liveness.locks
    if lv.kind == "flock":
        os.close(lv._held.pop(worker_id))  # the file stays, unlocked
    else:
        lv._conn.close()  # the server ends the session and drops its advisory lock
        lv._conn = None
        lv._held.clear()
    end = time.monotonic() + 30
    while not seen_by.liveness.locks.dead({worker_id}):
        assert time.monotonic() < end, f"{worker_id}'s lock was never released"
        time.sleep(0.01)


@pytest.fixture
def holder(db_url: str, clock: FakeClock) -> Iterator[App]:
    """The app of worker ``w1``, which will die holding runs."""
    a = App(db_url, clock=clock, poll=0.01, worker_id="w1", lease=LEASE)
    yield a
    a.close()


def _setup(app: App, holder: App, **limits: Any) -> list[str]:
    """A queue with ``limits`` and six runs in it, on both apps; ``w1`` holds liveness
    and claims what the limits let it: the ids it holds."""
    for a in (app, holder):

        @a.workflow
        def flow(i: int) -> int:
            return i

        a.queue("q", **limits)
    for i in range(6):
        holder.enqueue("flow", i, queue="q", run_id=f"r{i}")
    now = holder.clock.now()
    assert holder.journal.liveness.hold("w1", now=now)
    got = holder.journal.queues.claim(
        "q", "w1", now=now, lease_until=now + LEASE, workflows=holder.registered(), limit=10
    )
    return sorted(r for r, _ in got)


def _orphans(app: App, limit: int = 10, **queues: Any) -> list[str]:
    now = app.clock.now()
    got = app.journal.liveness.claim_orphans(
        app.worker_id,
        now=now,
        lease_until=now + LEASE,
        workflows=app.registered(),
        limit=limit,
        queues=queues or {"q": None},
    )
    return sorted(r for r, _ in got)


def _taken_over(app: App, run_id: str) -> list[dict[str, Any]]:
    return [e.detail for e in app.show(run_id).audit if e.action == "taken_over"]


def test_a_dead_holders_queued_runs_move_at_once_within_the_global_limit(
    app: App, holder: App
) -> None:
    """Limit 2: the dead holder's two runs are taken over (their slots are free), and
    nothing beyond them; each takeover names the dead holder and the lease not waited."""
    held = _setup(app, holder, concurrency=2)
    assert held == ["r0", "r1"]
    assert _orphans(app) == []  # alive: its runs stay where they are
    _die(holder.journal, "w1", app.journal)
    assert _orphans(app) == held
    running = app.list_runs(status="running")
    assert sorted(r.run_id for r in running) == held
    assert {r.owner for r in running} == {"test-worker"}
    (detail,) = _taken_over(app, "r0")
    assert detail["holder_dead"]["holder"] == "w1"
    assert detail["holder_dead"]["lease_until"] > app.clock.now() + LEASE / 2
    assert _orphans(app) == []  # the limit is full again


def test_the_takers_own_limit_and_the_rate_still_hold(app: App, holder: App) -> None:
    """worker_concurrency=1 lets the taker take one of the two orphans; a rate already
    spent does not stop a takeover (not a new start) and starts nothing new."""
    held = _setup(app, holder, concurrency=3, rate=(2, 60.0))
    assert held == ["r0", "r1"]  # the rate allowed two starts
    _die(holder.journal, "w1", app.journal)
    assert _orphans(app, q=1) == ["r0"]  # this worker's own limit: one
    assert _orphans(app, q=1) == []
    assert _orphans(app) == ["r1"]  # no own limit: the other one, and no new start
    running = sorted(r.run_id for r in app.list_runs(status="running"))
    assert running == held  # the rate forbids a third start; both orphans moved
    assert len(app.list_runs(status="pending")) == 4


def test_a_run_taken_back_by_its_restarted_holder_is_not_taken_and_counts(
    app: App, holder: App
) -> None:
    """An orphan seen under an epoch that moved on (its holder restarted and took it back)
    is neither taken over nor counted free: the limit holds."""
    held = _setup(app, holder, concurrency=2)
    now = app.clock.now()
    rows = {r: app.journal.get_run(r) for r in held}
    stale = [(r, row.epoch, "w1", float(row.lease_until)) for r, row in rows.items() if row]
    for r in held:  # the holder, restarted under its id, takes its runs back
        holder.journal.claim("w1", now=now, lease_until=now + LEASE, workflows=[], limit=1,
                             run_id=r, force=True)  # fmt: skip
    got = app.journal.queues.claim(
        "q",
        "test-worker",
        now=now,
        lease_until=now + LEASE,
        workflows=app.registered(),
        limit=10,
        orphans=stale,
        how="flock",
    )
    assert got == []
    assert {r.owner for r in app.list_runs(status="running")} == {"w1"}


def test_queued_orphans_of_an_undeclared_queue_are_left(app: App, holder: App) -> None:
    """A worker takes over only runs of the queues it declares (their limits are its)."""
    _setup(app, holder, concurrency=2)
    _die(holder.journal, "w1", app.journal)
    assert _orphans(app, other=None) == []
    assert {r.owner for r in app.list_runs(status="running")} == {"w1"}
