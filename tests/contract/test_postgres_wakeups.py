"""PostgreSQL wake-ups: a new run's NOTIFY makes one idle worker claim, not all of them.

Four workers in threads of this process, each with its own app (its own connections and
listener) on one scratch schema, poll interval far longer than the test, so every claim is
one a notification or a freed slot caused. Counts, not times.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

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
    client.list_runs(limit=1)  # migrate before the workers start
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
            client.enqueue(one, i, run_id=f"n{i}")
            time.sleep(0.03)
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
