"""``handle.result()`` for a run another worker executes wakes on the commit that ends it
(SQLite: ``journal.waking.wait_until``), instead of sleeping its poll interval between looks."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from surefoot import durable
from surefoot.durable import _handle
from surefoot.durable._worker import Worker


def _app(url: str, poll: float) -> tuple[durable.App, Any]:
    app = durable.App(url, poll=poll)

    @app.step
    def double(x: int) -> int:
        return 2 * x

    @app.workflow
    def flow(x: int) -> int:
        return double(x) + 1

    return app, flow


def test_result_of_a_run_on_another_worker_waits_on_commits_not_the_poll(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    starter, flow = _app(url, poll=60.0)  # a sleep of the poll would outlast the test
    worker_app, _ = _app(url, poll=0.05)
    slept: list[float] = []
    real_sleep = _handle.time.sleep  # the module time: every short sleep goes on as it was

    def no_long_sleep(seconds: float) -> None:
        if seconds >= 1.0:
            slept.append(seconds)
            raise AssertionError(f"slept {seconds} s instead of waiting for the commit")
        real_sleep(seconds)

    monkeypatch.setattr(_handle.time, "sleep", no_long_sleep)
    looks: list[int] = []
    wait_until = starter.journal.waking.wait_until  # type: ignore[attr-defined]

    def counted(ready: Any, timeout: float) -> bool:
        looks.append(1)
        return bool(wait_until(ready, timeout))

    monkeypatch.setattr(starter.journal.waking, "wait_until", counted)
    stop = threading.Event()
    w = Worker(worker_app)
    t = threading.Thread(target=w.run, args=(stop,))
    t.start()
    try:
        handles = [starter.enqueue(flow, i, run_id=f"r{i}") for i in range(3)]
        assert [h.result(timeout=30) for h in handles] == [1, 3, 5]
    finally:
        stop.set()
        t.join(10)
    assert slept == [] and looks  # it waited on the journal, never slept the poll
    starter.close()
    worker_app.close()


def test_a_sqlite_worker_wakes_on_an_enqueue_from_another_app_not_its_poll(
    tmp_path: Path,
) -> None:
    """A worker whose poll is 60 s claims a run another App enqueues when its commit lands
    (``journal.waking.wait_for_work``), well inside the poll."""
    url = f"sqlite:///{tmp_path / 'w.db'}"
    starter, flow = _app(url, poll=0.05)
    worker_app, _ = _app(url, poll=60.0)
    woke: list[bool] = []
    wait_for_work = worker_app.journal.waking.wait_for_work  # type: ignore[attr-defined]

    def counted(timeout: float) -> bool:
        got = bool(wait_for_work(timeout))
        woke.append(got)
        return got

    worker_app.journal.waking.wait_for_work = counted  # type: ignore[attr-defined]
    stop = threading.Event()
    t = threading.Thread(target=Worker(worker_app).run, args=(stop,))
    t.start()
    try:
        for i in range(3):
            h = starter.enqueue(flow, i, run_id=f"w{i}")
            assert h.result(timeout=20) == 2 * i + 1  # 20 s: a third of the worker's poll
    finally:
        stop.set()
        t.join(70)
    assert woke.count(True) >= 3, woke
    starter.close()
    worker_app.close()


def test_result_of_a_run_executing_here_raises_at_its_timeout_while_a_step_runs(
    tmp_path: Path,
) -> None:
    """``result(timeout=…)`` of a run this app executes gives up at the timeout, while its
    step still runs: ``TimeoutError_``, the run goes on and a later ``result()`` has it.
    (The timeout was caught as one of the poll's own timeouts, a ``TimeoutError`` too since
    Python 3.11, and the call waited for the run's end.)"""
    from surefoot.errors import TimeoutError_

    release = threading.Event()
    app = durable.App(f"sqlite:///{tmp_path / 'r.db'}", poll=0.01)

    @app.step
    def held() -> int:
        release.wait(10)  # the test lets it go; before the fix result() waited this out
        return 1 if release.is_set() else -1

    @app.workflow
    def flow() -> int:
        return held()

    try:
        handle = app.start(flow, run_id="r")
        with pytest.raises(TimeoutError_, match=r"did not finish within 0\.2 s"):
            handle.result(timeout=0.2)
        assert app.show("r").run.status == "running"
        release.set()
        assert handle.result(timeout=10) == 1
    finally:
        release.set()
        app.close()
