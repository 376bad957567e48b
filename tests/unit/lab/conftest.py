"""Fixtures for the lab tests that run the demo agent: an app on a fresh journal (SQLite or a
PostgreSQL schema of its own) with a FakeClock, as the durable tests have."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from surefoot import FakeClock, storage
from surefoot.durable import App


@pytest.fixture
def clock() -> FakeClock:
    """Virtual time for timers and leases."""
    return FakeClock()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh SQLite journal file, or a PostgreSQL schema of this test only (dropped after)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'runs.db'}"
        return
    url = f"{request.getfixturevalue('pg_url')}?schema=sf_t_{uuid.uuid4().hex[:12]}"
    yield url
    st: Any = storage.open(url)
    st.db.drop_schema()
    st.close()


@pytest.fixture
def app(db_url: str, clock: FakeClock) -> Iterator[App]:
    """An app on its own journal; closed after the test."""
    a = App(db_url, clock=clock, poll=0.01, worker_id="test-worker")
    yield a
    a.close()
