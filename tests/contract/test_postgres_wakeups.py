"""PostgreSQL wake-ups: a new run's NOTIFY makes one idle worker claim, not all of them,
and that worker serves the run (its workflow), and is alive.

Workers in threads of this process, each with its own app (its own connections and
listener) on one scratch schema, poll interval far longer than the test, so every claim is
one a notification or a freed slot caused. Counts, not times.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from tests.contract._backends import backend_url

from surefoot import durable

RUNS = 40


def _app(url: str, worker_id: str) -> tuple[durable.App, durable.Workflow]:
    app = durable.App(url, lease=30.0, poll=60.0, worker_id=worker_id)

    @app.step
    async def work(i: int) -> int:
        await asyncio.sleep(0.005)
        return i

    @app.workflow
    async def one(i: int) -> int:
        return await work(i)

    return app, one


def test_a_new_run_wakes_one_claimer(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    url = backend_url("postgresql", tmp_path, request, "wake")
    client, one = _app(url, "client")
    client.journal  # noqa: B018 - migrate before the workers start (a read creates nothing)
    apps = [_app(url, f"w{i}")[0] for i in range(4)]
    workers = [durable.Worker(a, concurrency=2) for a in apps]
    stop = threading.Event()
    threads = [threading.Thread(target=w.run, args=(stop,)) for w in workers]
    for t in threads:
        t.start()
    try:
        end = time.monotonic() + 60
        while len([w for w in client.workers() if w.seen_at >= time.time()]) < 4:
            assert time.monotonic() < end, "the workers did not start"
            time.sleep(0.02)
        for i in range(RUNS):  # one at a time: every worker is idle when a run is announced
            h = client.enqueue(one, i, run_id=f"n{i}")
            while h.status() != "succeeded":  # not a fixed pause: under load a run takes longer
                assert time.monotonic() < end, f"run n{i} did not finish"
                time.sleep(0.005)
        while client.count_runs(status="succeeded").get("succeeded", 0) < RUNS:
            assert time.monotonic() < end, "the runs did not finish"
            time.sleep(0.02)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
        for a in apps:
            a.close()
        client.close()
    claims = sum(w.claims for w in workers)
    empty = sum(w.empty_claims for w in workers)
    print(f"claims {claims}, empty {empty}, per worker {[w.claims for w in workers]}")
    assert claims - empty >= 1
    # before: each run woke 4 idle workers and all claimed (~3 empty claims a run, ~120);
    # now one claims per run: the 4 first claims as the workers start, a few races
    assert empty <= 4 + RUNS // 8


def _serving_app(
    url: str, worker_id: str, workflows: set[str], queues: tuple[str, ...] = ()
) -> durable.App:
    """An app of ``worker_id`` serving the workflows named (``a`` and/or ``b``) and taking
    part in the named ``queues``."""
    app = durable.App(url, lease=30.0, poll=600.0, worker_id=worker_id)
    for q in queues:
        app.queue(q, concurrency=4)

    @app.step
    async def work(i: int) -> int:
        await asyncio.sleep(0.002)
        return i

    if "a" in workflows:

        @app.workflow
        async def a(i: int) -> int:
            return await work(i)

    if "b" in workflows:

        @app.workflow
        async def b(i: int) -> int:
            return await work(i)

    return app


def _claimed_one_by_one(client: durable.App, names: list[str], queue: str | None = None) -> None:
    """Enqueue runs of ``names`` one at a time (in ``queue``); each must leave ``pending``
    long before the poll (600 s) could explain it: only its notification can have woken a
    claimer."""
    for i, name in enumerate(names):
        h = client.enqueue(name, i, run_id=f"{name}{i}", queue=queue)
        end = time.monotonic() + 20
        while h.status() == "pending":
            assert time.monotonic() < end, f"run {h.run_id} was not claimed on its notification"
            time.sleep(0.005)
        while h.status() != "succeeded":  # (the client's own poll is the test's 600 s)
            assert time.monotonic() < end, f"run {h.run_id} did not finish"
            time.sleep(0.005)


def _live(app: durable.App) -> set[str]:
    return {w.worker_id for w in app.workers() if w.seen_at >= time.time()}


def _serve(
    url: str,
    served: dict[str, set[str]],
    names: list[str],
    queues: dict[str, tuple[str, ...]] | None = None,
    queue: str | None = None,
) -> tuple[list[durable.Worker], dict[str, durable.Worker]]:
    client = _serving_app(url, "client", {"a", "b"}, (queue,) if queue else ())
    client.journal  # noqa: B018 - migrate before the workers start (a read creates nothing)
    apps = [_serving_app(url, w, wf, (queues or {}).get(w, ())) for w, wf in served.items()]
    workers = {a.worker_id: durable.Worker(a, concurrency=2) for a in apps}
    stop = threading.Event()
    threads = [threading.Thread(target=w.run, args=(stop,)) for w in workers.values()]
    for t in threads:
        t.start()
    try:
        end = time.monotonic() + 60
        while not set(served) <= _live(client) or not all(x.claims for x in workers.values()):
            assert time.monotonic() < end, "the workers did not start"  # (and claimed once)
            time.sleep(0.02)
        before = {w: (x.claims, x.empty_claims) for w, x in workers.items()}
        _claimed_one_by_one(client, names, queue)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
        for a in apps:
            a.close()
        client.close()
    for w, x in workers.items():  # only the claims the runs' notifications caused
        x.claims -= before[w][0]
        x.empty_claims -= before[w][1]
    return list(workers.values()), workers


def test_workers_serving_disjoint_workflows_each_claim_their_own_runs(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """w-a serves ``a``, w-b serves ``b``: each notified run is claimed at once by the
    worker that serves it, and the other does not claim for it (before: every run woke
    both, and the one not serving it claimed nothing, once per run)."""
    url = backend_url("postgresql", tmp_path, request, "wake")
    names = ["a", "b"] * (RUNS // 2)
    _, by_id = _serve(url, {"w-a": {"a"}, "w-b": {"b"}}, names)
    claims = {w: (x.claims, x.empty_claims) for w, x in by_id.items()}
    print(f"claims, empty claims per worker: {claims}")
    assert sum(x.claims - x.empty_claims for x in by_id.values()) >= RUNS // 2
    assert sum(x.empty_claims for x in by_id.values()) <= RUNS // 8


def test_a_run_is_claimed_on_its_notification_by_a_worker_that_serves_it(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """w-ab serves ``a`` and ``b``, w-b only ``b``, and a killed worker (advertised for
    three leases more, its liveness lock gone) served both: every ``a`` run is claimed on
    its notification (before: w-b or the dead worker ranked first for about two runs in
    three, claimed nothing, and the run waited for the 600 s poll)."""
    url = backend_url("postgresql", tmp_path, request, "wake")
    ghost = _serving_app(url, "ghost", {"a", "b"})
    journal: Any = ghost.journal
    now = time.time()
    assert journal.liveness.hold("ghost", now=now)
    journal.register_worker("ghost", ghost.registered(), now=now + 3600)
    journal.liveness.close()  # its process is gone: the lock with it, the row stays
    end = time.monotonic() + 30
    while "ghost" in journal.liveness.serving(now=time.time()):
        assert time.monotonic() < end, "the ghost's lock was never released"
        time.sleep(0.01)
    try:
        _, by_id = _serve(url, {"w-ab": {"a", "b"}, "w-b": {"b"}}, ["a"] * (RUNS // 2))
    finally:
        ghost.close()
    claims = {w: (x.claims, x.empty_claims) for w, x in by_id.items()}
    print(f"claims, empty claims per worker: {claims}")
    assert by_id["w-b"].claims == 0  # it serves no ``a`` run: never woken to claim one
    assert by_id["w-ab"].claims - by_id["w-ab"].empty_claims >= RUNS // 4


def test_a_queued_run_is_claimed_on_its_notification_by_a_worker_in_its_queue(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """w-q and w-n both serve ``a``; only w-q declares the queue ``q``. Every ``a`` run
    enqueued in ``q`` is claimed on its notification by w-q (before: w-n ranked first for
    about half of them, skipped a queue it does not take part in, and the run waited for
    the 600 s poll), and w-n never claims for one."""
    url = backend_url("postgresql", tmp_path, request, "wake")
    _, by_id = _serve(
        url, {"w-q": {"a"}, "w-n": {"a"}}, ["a"] * (RUNS // 2), queues={"w-q": ("q",)}, queue="q"
    )
    claims = {w: (x.claims, x.empty_claims) for w, x in by_id.items()}
    print(f"claims, empty claims per worker: {claims}")
    assert by_id["w-n"].claims == 0
    assert by_id["w-q"].claims - by_id["w-q"].empty_claims >= RUNS // 4


def test_result_of_a_run_on_another_worker_wakes_on_its_end(
    tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``handle.result()`` of runs another worker executes returns when each run's end is
    announced (migration 8's NOTIFY), not after the starter's 60 s poll."""
    from surefoot.durable import _handle

    url = backend_url("postgresql", tmp_path, request, "ends")
    starter, one = _app(url, "client")
    worker_app, _ = _app(url, "w0")
    worker_app.poll = 0.05
    real_sleep = _handle.time.sleep

    def no_long_sleep(seconds: float) -> None:
        if seconds >= 1.0:
            raise AssertionError(f"slept {seconds} s instead of waiting for the run's end")
        real_sleep(seconds)

    monkeypatch.setattr(_handle.time, "sleep", no_long_sleep)
    stop = threading.Event()
    t = threading.Thread(target=durable.Worker(worker_app).run, args=(stop,))
    t.start()
    try:
        for i in range(3):
            assert starter.enqueue(one, i, run_id=f"e{i}").result(timeout=20) == i
    finally:
        stop.set()
        t.join(10)
    assert starter.journal.waking._end.received >= 1  # type: ignore[attr-defined]
    starter.close()
    worker_app.close()
