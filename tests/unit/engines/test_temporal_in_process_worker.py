"""An in-process Temporal worker (the one app.start runs here) that stops by itself is one
log line, never asyncio's "Task exception was never retrieved"; the next start runs anew."""

from __future__ import annotations

import gc
import logging
from typing import Any

import pytest

pytest.importorskip("temporalio")

from surefoot import durable
from surefoot.engines.temporal import _engine


class DyingWorker:
    """Stands for the SDK's worker: its run() fails at once, as a worker validation does."""

    made = 0

    def __init__(self) -> None:
        DyingWorker.made += 1

    async def run(self) -> None:
        raise RuntimeError("Worker validation failed: something the cluster refused")

    async def shutdown(self) -> None:
        return None


def test_a_worker_that_dies_is_one_line_and_is_replaced(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def client(self: Any) -> object:
        return object()

    monkeypatch.setattr(_engine.TemporalEngine, "client", client)
    monkeypatch.setattr(_engine, "make_worker", lambda *a, **k: DyingWorker())
    DyingWorker.made = 0
    unretrieved: list[str] = []
    asyncio_log = logging.getLogger("asyncio")
    handler = logging.Handler()
    handler.emit = lambda r: unretrieved.append(r.getMessage())  # type: ignore[method-assign]
    asyncio_log.addHandler(handler)
    app = durable.App("temporal://127.0.0.1:1?task_queue=dying")
    engine = _engine.TemporalEngine(app)
    try:
        with caplog.at_level(logging.ERROR, logger="surefoot.engines.temporal"):
            engine.serve_here()
            engine._run(_settle())
            engine.serve_here()  # the dead worker was forgotten: a new one
            engine._run(_settle())
        gc.collect()
    finally:
        engine.close()
        asyncio_log.removeHandler(handler)
    lines = [r.getMessage() for r in caplog.records if r.name == "surefoot.engines.temporal"]
    assert len(lines) == 2 and "Worker validation failed" in lines[0], lines
    assert "\n" not in lines[0]
    assert DyingWorker.made == 2
    assert not [m for m in unretrieved if "never retrieved" in m]


async def _settle() -> None:
    import asyncio

    for _ in range(5):
        await asyncio.sleep(0)
