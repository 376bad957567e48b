"""Fixtures for the lab tests: the lab's command line run in-process, and, for the tests that
run the demo agent, an app on a fresh journal (SQLite or a PostgreSQL schema of its own) with
a FakeClock, as the durable tests have."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from surefoot import FakeClock, storage
from surefoot.cli import main
from surefoot.durable import App

ANSI = re.compile(r"\x1b\[[0-9;]*m")

LabCLI = Callable[..., tuple[int, str, str]]


@pytest.fixture
def lab_cli(capsys: pytest.CaptureFixture[str]) -> LabCLI:
    """``lab_cli(*args)`` runs ``surefoot lab ARGS`` in-process (the product's CLI, the lab
    found by its entry point): (exit code, stdout without colour codes, stderr)."""

    def run(*args: str) -> tuple[int, str, str]:
        try:
            main(["lab", *args])
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        out = capsys.readouterr()
        return code, ANSI.sub("", out.out), out.err

    return run


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
