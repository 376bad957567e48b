"""What a first real user hit in `surefoot worker` and `runs`: one clear line, exit 1.

(What they hit in the demo agent's chaos run is the lab's: tests/lab/test_lab_chaos_cli.py.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from surefoot.cli import main
from surefoot.durable import App, Worker

SRC = str(Path(__file__).resolve().parents[3] / "src")


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run the CLI in-process; (exit code, stdout, stderr)."""
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(autouse=True)
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """Wide tables, so cells are not cut in the captured output."""
    monkeypatch.setenv("COLUMNS", "200")


@pytest.fixture
def journal(tmp_path: Path) -> str:
    """A journal with 'done' (succeeded) and 'wait' (sleeping in wait_for('approve'))."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    app = App(url, poll=0.01)

    @app.workflow
    async def ask() -> Any:
        return await app.wait_for("approve")

    app.enqueue(ask, run_id="done")
    app.enqueue(ask, run_id="wait")
    app.signal("done", "approve", "yes")
    w = Worker(app)
    while w.run_once(timeout=10):
        pass
    assert app.show("done").run.status == "succeeded"
    assert app.show("wait").run.status == "sleeping"
    app.close()
    return url


# -- 1. worker: a permanent error at start is not an outage ---------------------------------


def test_worker_on_a_text_file_exits_1_with_one_line(tmp_path: Path) -> None:
    """`worker --db sqlite:///notes.txt` stops at once (exit 1, one line), file untouched."""
    notes = tmp_path / "notes.txt"
    notes.write_text("shopping: milk, eggs\n" * 20)
    (tmp_path / "wapp.py").write_text("from surefoot import durable\napp = durable.App()\n")
    cmd = ["worker", "--db", "sqlite:///notes.txt", "--app", "wapp:app", "--idle-exit", "1"]
    proc = subprocess.run(
        [sys.executable, "-c", "from surefoot.cli import main; main()", *cmd],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": SRC},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "file is not a database" in lines[0], proc.stderr
    assert "backing off" not in proc.stderr
    assert notes.read_text() == "shopping: milk, eggs\n" * 20


# -- 3. signals to ended runs --------------------------------------------------------------


def test_signal_to_a_finished_run_says_it_ended_and_exits_1(
    journal: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`runs signal` on a succeeded run: 'has ended (succeeded)', exit 1, nothing stored."""
    code, out, err = run_cli(capsys, "runs", "signal", "done", "approve", '"ok"', "--db", journal)
    assert code == 1 and "sent" not in out
    assert err.startswith("surefoot: error:") and "has ended (succeeded)" in err
    audit = [a.action for a in App(journal).show("done").audit]
    assert audit == ["created", "signal", "claimed"]  # the first (delivered) signal only


def test_signal_no_wait_takes_now_is_queued_and_said_so(
    journal: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A signal the sleeping run does not wait for is kept, and the CLI says what it waits for."""
    code, out, _ = run_cli(capsys, "runs", "signal", "wait", "other", "--db", journal)
    assert code == 0 and "queued" in out and "'approve'" in out
    code, out, _ = run_cli(capsys, "runs", "signal", "wait", "approve", '"y"', "--db", journal)
    assert code == 0 and "signal 'approve' sent to wait" in out


# -- 7. read-only commands create nothing ----------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["runs", "list"],
        ["runs", "show", "r"],
        ["runs", "signal", "r", "approve"],
        ["runs", "cancel", "r"],
    ],
)
def test_runs_commands_on_a_missing_sqlite_file_create_nothing(
    args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A typo in --db is one line ('no database at …; check the path'), exit 1, no file."""
    typo = tmp_path / "typo.db"
    code, _, err = run_cli(capsys, *args, "--db", f"sqlite:///{typo}")
    assert code == 1 and "no database at" in err and "check the path" in err
    assert err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


# -- 8. numbers that make no sense are refused ----------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["runs", "list", "--limit", "0"],
        ["runs", "list", "--limit", "-1"],
        ["runs", "show", "done", "--width", "-5"],
    ],
)
def test_limit_and_width_must_be_at_least_1(
    args: list[str], journal: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """--limit 0/-1 and --width -5 are usage errors (exit 2), not an empty or full table."""
    code, out, err = run_cli(capsys, *args, "--db", journal)
    assert code == 2 and out == "" and "x>=1" in err


# -- 9. --app naming a missing attribute ------------------------------------------------------


def test_app_with_a_missing_attribute_names_it(
    journal: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """--app surefoot:app says the module has no attribute 'app' and how to point at one."""
    code, _, err = run_cli(capsys, "runs", "list", "--db", journal, "--app", "surefoot:app")
    assert code == 1
    assert "module 'surefoot' has no attribute 'app'" in err
    assert "pass --app package.module:attribute" in err and "NoneType" not in err


# -- option values that would spin, never end, or lie: refused in one line -------------------


@pytest.mark.parametrize(
    ("option", "value"),
    [("--poll", "0"), ("--poll", "-1"), ("--poll", "nan"), ("--idle-exit", "-1")],
)
def test_worker_refuses_a_poll_or_idle_exit_that_cannot_work(
    capsys: pytest.CaptureFixture[str], journal: str, option: str, value: str
) -> None:
    """`--poll 0` would spin on the CPU and `--idle-exit -1` means nothing: one line, exit 2."""
    code, _, err = run_cli(
        capsys, "worker", "--db", journal, "--app", "surefoot.durable:App", option, value
    )
    assert code == 2
    assert f"Invalid value for '{option}'" in err and repr(value) in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "spec", ["429:retry-after=-1", "429:retry-after-ms=-5", "slow=-1", "503:retry-after=nan"]
)
def test_fake_provider_refuses_a_negative_wait_in_a_fault(
    capsys: pytest.CaptureFixture[str], spec: str
) -> None:
    """A negative or NaN wait in --fault is refused, naming the spec, before serving."""
    code, out, err = run_cli(capsys, "fake-provider", "--fault", spec)
    assert code == 2 and "listening" not in out
    assert "Invalid value for '--fault'" in err and spec in err, err


def test_fake_provider_on_a_port_in_use_says_so_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--port of a port something already listens on: one line naming it, no traceback."""
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code, out, err = run_cli(capsys, "fake-provider", "--port", str(port))
    assert code == 2 and "listening" not in out
    assert "Invalid value for '--port'" in err and str(port) in err and "in use" in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize("command", [["resume", "r1"], ["retry", "r1"], ["fork", "r1", "1"]])
def test_a_negative_timeout_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    # --timeout -5 was taken: the command then gave up at once and reported the run's status
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    App(db).close()
    with pytest.raises(SystemExit) as info:
        main(["runs", *command, "--db", db, "--timeout", "-5"])
    assert info.value.code == 2
    assert "-5" in capsys.readouterr().err
