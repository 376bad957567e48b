"""``surefoot lab chaos``: the demo agent in real workers, SIGKILLed; server restarts and
kills are checked, never assumed, and bad paths are refused before anything runs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from surefoot.errors import ConfigError
from surefoot_lab.durable import scaleout

LabCLI = Callable[..., tuple[int, str, str]]  # the lab_cli fixture (tests/lab/conftest.py)


@pytest.fixture(autouse=True)
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """Wide tables, so cells are not cut in the captured output."""
    monkeypatch.setenv("COLUMNS", "200")


def _fake_chaos(
    calls: list[dict[str, Any]],
    *,
    kills: int = 1,
    restart: str = "not requested",
    failed: bool = False,
) -> Any:
    """A chaos_run stand-in: every run completed cleanly, with ``kills`` SIGKILLs and the
    given server-restart outcome."""

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
        rep = SimpleNamespace(results=[r], kills=kills, elapsed=1.0, params={})
        return SimpleNamespace(
            report=rep, restart=restart, restart_failed=failed, inconsistent=[], problems=[]
        )

    return chaos_run


def test_chaos_does_not_restart_the_server_unless_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lab_cli: LabCLI
) -> None:
    """Without --restart-server the harness is told restart=False; with it, restart=True."""
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(
        "surefoot_lab.durable.scaleout.chaos_run",
        _fake_chaos(calls, restart="not requested", failed=False),
    )
    args = ["chaos", "--db", "postgresql://u@127.0.0.1:5432/db", "--runs", "3"]
    assert lab_cli(*args)[0] == 0
    assert calls[-1]["restart"] is False
    monkeypatch.setattr(
        "surefoot_lab.durable.scaleout.chaos_run",
        _fake_chaos(calls, restart="restarted in 1.0 s (pg_ctlcluster)", failed=False),
    )
    assert lab_cli(*args, "--restart-server")[0] == 0
    assert calls[-1]["restart"] is True


def test_a_failed_server_restart_fails_the_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lab_cli: LabCLI
) -> None:
    """--restart-server whose restart failed: exit 1, the failure in the table and on stderr."""
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(
        "surefoot_lab.durable.scaleout.chaos_run",
        _fake_chaos(calls, restart="restart failed (1): permission denied", failed=True),
    )
    out_json = tmp_path / "r.json"
    code, out, err = lab_cli(
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


def test_old_restart_flag_is_refused_with_the_new_name(lab_cli: LabCLI) -> None:
    """`--restart` (the old, default-on flag) exits 1 naming --restart-server."""
    code, _, err = lab_cli("chaos", "--db", "sqlite:///x.db", "--restart")
    assert code == 1 and "--restart-server" in err


def test_chaos_without_a_kill_fails_and_asks_for_an_in_flight_kill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lab_cli: LabCLI
) -> None:
    """--max-kills > 0 asks the harness to kill in flight; 0 kills then is exit 1, said so."""
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr("surefoot_lab.durable.scaleout.chaos_run", _fake_chaos(calls, kills=0))
    db = f"sqlite:///{tmp_path / 'c.db'}"
    args = ["chaos", "--db", db, "--workers", "2", "--runs", "10", "--no-restart"]
    code, out, err = lab_cli(*args, "--max-kills", "2")
    assert code == 1 and calls[0]["kill_in_flight_first"] is True
    assert "0 of at most 2" in out and "no worker was SIGKILLed" in err
    monkeypatch.setattr("surefoot_lab.durable.scaleout.chaos_run", _fake_chaos(calls, kills=1))
    assert lab_cli(*args, "--max-kills", "2")[0] == 0
    monkeypatch.setattr("surefoot_lab.durable.scaleout.chaos_run", _fake_chaos(calls, kills=0))
    assert lab_cli(*args, "--max-kills", "0")[0] == 0  # none allowed, none needed
    assert calls[-1]["kill_in_flight_first"] is False


def test_chaos_refuses_a_json_path_in_a_missing_folder_before_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lab_cli: LabCLI
) -> None:
    """--json into a folder that does not exist: one line, exit 1, nothing run."""
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr("surefoot_lab.durable.scaleout.chaos_run", _fake_chaos(calls, kills=1))
    bad = tmp_path / "nonexistent" / "dir" / "x.json"
    code, _, err = lab_cli("chaos", "--db", f"sqlite:///{tmp_path / 'c.db'}", "--json", str(bad))
    assert code == 1 and calls == []
    assert err.count("\n") == 1 and "does not exist" in err and "nonexistent" in err


def test_a_short_real_chaos_run_kills_a_worker(tmp_path: Path, lab_cli: LabCLI) -> None:
    """A real 6-run SQLite chaos run with --max-kills 1 SIGKILLs one worker and passes."""
    out = tmp_path / "out.json"
    db = f"sqlite:///{tmp_path / 'c.db'}"
    code, _, err = lab_cli(
        *["chaos", "--db", db, "--workers", "2", "--runs", "6", "--max-kills", "1"],
        *["--no-restart", "--time-limit", "60", "--json", str(out)],
    )
    got = json.loads(out.read_text())
    assert code == 0, err
    assert got["kills"] == 1 and got["completed"] == 6 and got["inconsistent_runs"] == []


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
