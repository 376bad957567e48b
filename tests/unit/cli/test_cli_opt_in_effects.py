"""CLI actions with effects beyond the command are opt-in: server restarts, new journals."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from surefoot import storage
from surefoot.cli import main
from surefoot.durable import App
from surefoot.errors import ConfigError
from surefoot.lab.durable import scaleout

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


def _fake(calls: list[dict[str, Any]], *, restart: str, failed: bool) -> Any:
    """A chaos_run stand-in: a clean run with one kill and the given restart outcome."""

    def chaos_run(url: str, **kw: Any) -> Any:
        calls.append(kw)
        r = SimpleNamespace(
            runs=kw["runs"],
            completed=kw["runs"],
            completion_rate=1.0,
            duplicate_effects=0,
            repeated_after_journal=0,
            repeated_model_calls=0,
        )
        rep = SimpleNamespace(results=[r], kills=1, elapsed=1.0, params={})
        return SimpleNamespace(
            report=rep, restart=restart, restart_failed=failed, inconsistent=[], problems=[]
        )

    return chaos_run


def test_chaos_does_not_restart_the_server_unless_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --restart-server the harness is told restart=False; with it, restart=True."""
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(
        "surefoot.lab.durable.scaleout.chaos_run",
        _fake(calls, restart="not requested", failed=False),
    )
    args = ["chaos", "--db", "postgresql://u@127.0.0.1:5432/db", "--runs", "3"]
    assert run_cli(capsys, *args)[0] == 0
    assert calls[-1]["restart"] is False
    monkeypatch.setattr(
        "surefoot.lab.durable.scaleout.chaos_run",
        _fake(calls, restart="restarted in 1.0 s (pg_ctlcluster)", failed=False),
    )
    assert run_cli(capsys, *args, "--restart-server")[0] == 0
    assert calls[-1]["restart"] is True


def test_a_failed_server_restart_fails_the_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--restart-server whose restart failed: exit 1, the failure in the table and on stderr."""
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(
        "surefoot.lab.durable.scaleout.chaos_run",
        _fake(calls, restart="restart failed (1): permission denied", failed=True),
    )
    out_json = tmp_path / "r.json"
    code, out, err = run_cli(
        capsys,
        "chaos",
        "--db",
        "postgresql://u@127.0.0.1:5432/db",
        "--runs",
        "3",
        "--restart-server",
        "--json",
        str(out_json),
    )
    assert code == 1
    assert "FAILED: restart failed (1): permission denied" in out
    assert "did not happen: restart failed (1): permission denied" in err
    assert '"restart_failed": true' in out_json.read_text()


def test_old_restart_flag_is_refused_with_the_new_name(capsys: pytest.CaptureFixture[str]) -> None:
    """`--restart` (the old, default-on flag) exits 1 naming --restart-server."""
    code, _, err = run_cli(capsys, "chaos", "--db", "sqlite:///x.db", "--restart")
    assert code == 1 and "--restart-server" in err


@pytest.mark.parametrize("url", ["sqlite:///{tmp}/j.db", "postgresql://u@203.0.113.9:5432/db"])
def test_chaos_run_refuses_a_restart_it_cannot_do_before_running(url: str, tmp_path: Path) -> None:
    """restart=True on SQLite or a remote server: ConfigError before any worker starts."""
    with pytest.raises(ConfigError, match="server restart was asked for"):
        scaleout.chaos_run(url.format(tmp=tmp_path), restart=True, workdir=str(tmp_path))
    assert list(tmp_path.iterdir()) == []  # no journal, no ledger


def test_restart_failed_is_true_when_asked_and_not_done() -> None:
    """PostgresChaos.restart_failed: asked and not restarted (failed or not reached)."""
    rep: Any = None
    assert scaleout.PostgresChaos(rep, "not reached", None, [], [], True, False).restart_failed
    assert not scaleout.PostgresChaos(rep, "restarted in 1 s", 3, [], [], True, True).restart_failed
    assert not scaleout.PostgresChaos(rep, "not requested", None).restart_failed


def test_chaos_answer_reports_a_failed_restart() -> None:
    """The lab answer says FAILED and quotes the restart outcome when the restart failed."""
    r = SimpleNamespace(
        runs=3,
        completed=3,
        completion_rate=1.0,
        duplicate_effects=0,
        repeated_after_journal=0,
        repeated_model_calls=0,
    )
    rep: Any = SimpleNamespace(results=[r], kills=2, restarts=2)
    bad = scaleout.PostgresChaos(rep, "restart timed out after 60 s", 1, [], [], True, False)
    good = scaleout.PostgresChaos(rep, "not requested", None)
    assert scaleout.chaos_answer(bad).startswith("FAILED: 3 of 3 runs succeeded")
    assert "did not happen: restart timed out after 60 s" in scaleout.chaos_answer(bad)
    assert scaleout.chaos_answer(good).startswith("Passed: 3 of 3 runs succeeded (100%) with 2")


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
