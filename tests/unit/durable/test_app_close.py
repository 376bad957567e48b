"""App.close waits for the heartbeat thread before it closes the journal under it."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from surefoot import durable


def test_close_waits_for_a_heartbeat_in_flight(tmp_path: Path) -> None:
    """A beat writing when close() is called finishes before the journal is closed."""
    app = durable.App(f"sqlite:///{tmp_path / 'runs.db'}", lease=0.3, poll=0.01)
    order: list[str] = []
    inside, release = threading.Event(), threading.Event()

    @app.step
    def wait_here() -> str:
        release.wait(10)
        return "done"

    @app.workflow(version="1")
    def wf() -> str:
        return wait_here()

    journal: Any = app.journal
    real_beat = journal.heartbeat

    def slow_beat(*args: Any, **kwargs: Any) -> Any:
        inside.set()
        time.sleep(0.3)  # a beat that takes a while (a busy disk)
        order.append("beat done")
        return real_beat(*args, **kwargs)

    journal.heartbeat = slow_beat
    storage_close = app._storage.close  # type: ignore[attr-defined]

    def recording_close() -> None:
        order.append("storage closed")
        storage_close()

    app._storage.close = recording_close  # type: ignore[attr-defined]
    handle = app.start(wf, run_id="r-1")
    assert inside.wait(10), "the heartbeat never ran"
    release.set()
    handle.result(timeout=10)
    app.close()
    assert order.index("beat done") < order.index("storage closed"), order
