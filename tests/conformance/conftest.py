"""The engines the conformance suite runs on: the embedded journal (SQLite) and Temporal.

Temporal's dev server is started once per session on a free loopback port (in memory) and
stopped by pid; each test gets its own task queue. Without surefoot[temporal] the Temporal
half skips with the reason (and fails under SUREFOOT_REQUIRE_SERVICES=1).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _conformance_support import Harness

ENGINES = ["sqlite", pytest.param("temporal", marks=pytest.mark.temporal)]


@pytest.fixture(scope="session")
def temporal_server(temporal_bin: str) -> Iterator[Any]:
    """One Temporal dev server for the session, on loopback, stopped by pid afterwards."""
    from surefoot.engines.temporal import DevServer

    server = DevServer(None, binary=temporal_bin).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    """The engine under test, with a journal file or a task queue of this test only."""
    if request.param == "sqlite":
        h = Harness("sqlite", f"sqlite:///{tmp_path / 'runs.db'}")
    else:
        server = request.getfixturevalue("temporal_server")
        queue = f"cf-{uuid.uuid4().hex[:10]}"
        h = Harness(
            "temporal", f"temporal://{server.address}?task_queue={queue}&heartbeat=2&sticky=1"
        )
    try:
        yield h
    finally:
        h.close()
