"""Closing an app waits for the commits other threads have in flight (the group-commit
writer's, a sync workflow's pool thread's): the app closes the journal's connections right
after, and a commit still using one would use a closed SQLite handle (a segfault, seen in
the test suite before the writer's was waited for)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from surefoot.durable._writer import Writer


def test_close_waits_for_the_commit_in_flight() -> None:
    began, finished = threading.Event(), threading.Event()

    def slow_commit(records: list[Any]) -> list[bool]:
        began.set()
        time.sleep(0.3)
        finished.set()
        return [True for _ in records]

    writer = Writer(slow_commit, active=[1, 2])  # two runs executing: commits go to the thread

    async def submit_and_leave() -> None:
        writer.submit(object())  # type: ignore[arg-type]
        while not began.is_set():  # the thread has taken the batch
            await asyncio.sleep(0.001)

    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(submit_and_leave())
    finally:
        loop.close()  # as App.close: the loop is gone before the writer closes
    writer.close()
    assert finished.is_set()  # close returned only after the commit did


def test_close_without_a_commit_sent_has_nothing_to_wait_for() -> None:
    writer = Writer(lambda records: [True for _ in records], active=[])
    writer.close()
    writer.close()  # twice is harmless: no thread was started, nothing is waited for
    assert writer._done is None


def test_closing_the_app_waits_for_a_sync_workflows_commit_in_flight(tmp_path: Any) -> None:
    """A sync workflow runs on a pool thread, which close does not join (it may be in the
    user's code for long); a commit that thread has begun is waited for before the journal's
    connections close under it."""
    from surefoot.durable import App

    app = App(f"sqlite:///{tmp_path / 'c.db'}")

    @app.step
    def double(x: int) -> int:
        return 2 * x

    @app.workflow
    def flow(x: int) -> int:
        return double(x)

    began, finished = threading.Event(), threading.Event()
    journal: Any = app.journal
    real = journal.commit

    def slow_commit(records: list[Any]) -> list[bool]:
        if any(getattr(r, "name", None) == "double" for r in records):  # the step's row
            began.set()
            time.sleep(0.3)  # a commit in flight when close() comes
            out: list[bool] = real(records)
            finished.set()
            return out
        return real(records)  # type: ignore[no-any-return]

    journal.commit = slow_commit
    app.start(flow, 21)
    assert began.wait(10)
    app.close()
    assert finished.is_set()  # close returned only after the step's commit did
