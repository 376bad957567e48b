"""Resuming a run whose in-process holder was SIGKILLed: ``app.resume`` and ``surefoot runs
resume`` take it over at once through the holder's liveness lock, as workers do, instead
of waiting out its lease in silence; a live holder's lease is waited for, and said so.

A child process ``start()``s the run in-process (lease 60 s) and is SIGKILLed inside its
second step. No timing is asserted: the lease is far longer than each bounded wait, so
waiting it out would fail the test; the audit and the epoch say how the run moved.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.contract._backends import backend_url

from surefoot.errors import JournalError

pytestmark = pytest.mark.crash

HERE = Path(__file__).parent
SRC = HERE.parent.parent / "src"
sys.path.insert(0, str(HERE))

import resume_app  # noqa: E402


def _env(calls: Path) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(SRC)])}
    env["SUREFOOT_CALLS"] = str(calls)
    env.pop("SUREFOOT_CRASH", None)
    return env


def _calls(path: Path) -> list[str]:
    return [line.split()[0] for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh journal: a SQLite file (lock files) or a PostgreSQL schema (advisory locks)."""
    return backend_url(request.param, tmp_path, request, "resume")


@pytest.fixture
def killed(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, Path, Any]]:
    """Run ``r`` of ``two`` started in a child process (worker id ``doomed``), SIGKILLed
    inside step ``hang``: (url, the calls file, the run's row just before the kill)."""
    calls = tmp_path / "calls.txt"
    monkeypatch.setenv("SUREFOOT_CALLS", str(calls))
    env = {**_env(calls), "SUREFOOT_HANG": "1"}
    code = f"import resume_app; resume_app.main({url!r}, 'r', 'doomed')"
    child = subprocess.Popen([sys.executable, "-c", code], env=env)
    try:
        end = time.monotonic() + 60
        while _calls(calls) != ["first", "hang"]:
            assert child.poll() is None, "the child ended before its step hung"
            assert time.monotonic() < end, "the child never reached step hang"
            time.sleep(0.02)
        resume_app.app.configure(url=url, worker_id="operator-host")
        before = resume_app.app.show("r").run
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
        yield url, calls, before
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=10)
        resume_app.app.close()


def _check_taken_over_at_once(app: Any, before: Any) -> None:
    d = app.show("r")
    assert d.run.status == "succeeded" and d.run.result == 2
    assert d.run.epoch == before.epoch + 1 == 2
    taken = [e for e in d.audit if e.action == "taken_over"]
    assert [(e.detail["previous_epoch"], e.detail["reason"]) for e in taken] == [(1, "holder_dead")]
    assert taken[0].detail["holder_dead"]["holder"] == "doomed"
    assert taken[0].at < before.lease_until  # its lease was not waited out
    resumed = [e for e in d.audit if e.action == "resume"]
    assert [(e.actor, e.detail["from"]) for e in resumed] == [("operator", "running")]


def test_app_resume_takes_a_killed_in_process_holders_run_at_once(
    killed: tuple[str, Path, Any], caplog: pytest.LogCaptureFixture
) -> None:
    _, calls, before = killed
    app = resume_app.app
    assert (before.status, before.owner, before.epoch) == ("running", "doomed", 1)
    assert before.lease_until > time.time() + 30  # the lease has most of its 60 s to go
    with caplog.at_level(logging.WARNING, logger="surefoot"):
        handle = app.resume("r")
        assert handle.result(timeout=20) == 2  # 20 s: waiting the lease would fail
    assert not [r for r in caplog.records if "resume_waits" in r.getMessage()]
    _check_taken_over_at_once(app, before)
    assert _calls(calls) == ["first", "hang", "hang"]  # step first was not run again


def test_cli_resume_takes_a_killed_in_process_holders_run_at_once(
    killed: tuple[str, Path, Any],
) -> None:
    url, calls, before = killed
    argv = [sys.executable, "-m", "surefoot", "runs", "resume", "r", "--db", url,
            "--app", "resume_app:app", "--timeout", "20", "--json"]  # fmt: skip
    out = subprocess.run(argv, env=_env(calls), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"run_id": "r", "action": "resumed", "status": "succeeded"}
    assert "waits" not in out.stderr
    _check_taken_over_at_once(resume_app.app, before)
    assert _calls(calls) == ["first", "hang", "hang"]


def test_resume_of_a_live_holders_run_says_how_long_it_waits(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The holder is alive (stopped, not killed): resume does not take the run; it warns
    with the lease left, or refuses with ``wait_for_lease=False``; the CLI says so too."""
    calls = tmp_path / "calls.txt"
    monkeypatch.setenv("SUREFOOT_CALLS", str(calls))
    env = {**_env(calls), "SUREFOOT_HANG": "1"}
    code = f"import resume_app; resume_app.main({url!r}, 'r', 'alive')"
    child = subprocess.Popen([sys.executable, "-c", code], env=env)
    app = resume_app.app
    try:
        end = time.monotonic() + 60
        while _calls(calls) != ["first", "hang"]:
            assert child.poll() is None and time.monotonic() < end
            time.sleep(0.02)
        os.kill(child.pid, signal.SIGSTOP)  # alive, holding its lock, renewing nothing
        app.configure(url=url, worker_id="operator-host")
        with pytest.raises(JournalError, match=r"held by worker 'alive'.*lease runs out in"):
            app.resume("r", wait_for_lease=False)
        with caplog.at_level(logging.WARNING, logger="surefoot"):
            handle = app.resume("r")
        waits = [r for r in caplog.records if r.getMessage().startswith("resume_waits")]
        assert len(waits) == 1
        fields = waits[0].surefoot  # type: ignore[attr-defined]
        assert fields["holder"] == "alive" and 30 < fields["lease_left_s"] <= 60
        assert handle.status() == "running"
        row = app.show("r").run
        assert (row.owner, row.epoch) == ("alive", 1)  # not taken: its holder lives
        argv = [sys.executable, "-m", "surefoot", "runs", "resume", "r", "--db", url,
                "--app", "resume_app:app", "--timeout", "0.5"]  # fmt: skip
        out = subprocess.run(argv, env=_env(calls), capture_output=True, text=True, timeout=60)
        assert out.returncode == 1
        assert "held by worker 'alive'" in out.stderr and "lease runs out in" in out.stderr
        assert "was not resumed within --timeout 0.5 s" in out.stderr
        assert app.show("r").run.epoch == 1
    finally:
        os.kill(child.pid, signal.SIGCONT)
        child.kill()
        child.wait(timeout=10)
        app.close()
