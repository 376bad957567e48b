"""Fixtures for the durable tests: an app on a fresh SQLite file with a FakeClock."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from surefoot import FakeClock
from surefoot.durable import App


@pytest.fixture
def clock() -> FakeClock:
    """Virtual time for timers and leases."""
    return FakeClock()


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    """A fresh SQLite journal file."""
    return f"sqlite:///{tmp_path / 'runs.db'}"


@pytest.fixture
def app(db_url: str, clock: FakeClock) -> Iterator[App]:
    """An app on its own journal; closed after the test."""
    a = App(db_url, clock=clock, poll=0.01, worker_id="test-worker")
    yield a
    a.close()
