"""CLI actions with effects beyond the command are opt-in: server restarts, new journals."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from surefoot import storage
from surefoot.cli import main
from surefoot.durable import App

SRC = str(Path(__file__).resolve().parents[3] / "src")
APP = "from surefoot import durable\napp = durable.App()\n"


@pytest.fixture(autouse=True)
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """Wide tables, so cells are not cut in the captured output."""
    monkeypatch.setenv("COLUMNS", "200")


def journal_missing(url: str) -> str | None:
    """The CLI's check (imported here so the other tests run on a surefoot without it)."""
    from surefoot.cli._worker import journal_missing as check

    return check(url)


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run the CLI in-process; (exit code, stdout, stderr)."""
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def _worker(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "wapp.py").write_text(APP)
    cmd = ["worker", "--app", "wapp:app", "--idle-exit", "0.5", *args]
    return subprocess.run(
        [sys.executable, "-c", "from surefoot.cli import main; main()", *cmd],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": SRC},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_worker_refuses_a_missing_sqlite_file_and_creates_nothing(tmp_path: Path) -> None:
    """`worker --db sqlite:///typo.db`: exit 1, one line naming the file and --create; no file."""
    proc = _worker(tmp_path, "--db", "sqlite:///typo.db")
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "'typo.db' does not exist" in lines[0] and "--create" in lines[0]
    assert not (tmp_path / "typo.db").exists()


def test_worker_create_makes_the_journal_and_says_so(tmp_path: Path) -> None:
    """With --create the worker creates the journal, says so on stderr, and serves it."""
    proc = _worker(tmp_path, "--db", "sqlite:///new.db", "--create")
    assert proc.returncode == 0, proc.stderr
    assert "created a new, empty journal at sqlite:///new.db" in proc.stderr
    assert journal_missing(f"sqlite:///{tmp_path / 'new.db'}") is None


def test_worker_refuses_a_sqlite_file_without_a_journal(tmp_path: Path) -> None:
    """An existing database with other tables (no surefoot journal) is refused, untouched."""
    other = tmp_path / "other.db"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE invoices (id INTEGER)")
    con.commit()
    con.close()
    before = other.read_bytes()
    proc = _worker(tmp_path, "--db", "sqlite:///other.db")
    assert proc.returncode == 1 and "has no surefoot journal" in proc.stderr
    assert "invoices" in proc.stderr and other.read_bytes() == before


def test_worker_serves_a_journal_an_app_created(tmp_path: Path) -> None:
    """A journal that exists (created by an App) is served without --create."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    App(url).journal  # noqa: B018 - opening creates it
    assert journal_missing(url) is None
    proc = _worker(tmp_path, "--db", "sqlite:///runs.db")
    assert proc.returncode == 0, proc.stderr
    assert "created" not in proc.stderr


def test_journal_missing_on_postgres_schemas(pg_url: str) -> None:
    """A PostgreSQL schema without surefoot's tables is missing; after an App opened it, not."""
    url = f"{pg_url}?schema=sf_wcheck_{uuid.uuid4().hex[:8]}"
    assert "has no surefoot tables" in (journal_missing(url) or "")
    app = App(url)
    try:
        app.journal  # noqa: B018 - opening creates surefoot's tables
        assert journal_missing(url) is None
    finally:
        app.close()
        st: Any = storage.open(url)
        st.db.drop_schema()
        st.close()
