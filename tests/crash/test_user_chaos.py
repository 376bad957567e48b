"""`surefoot chaos` against a user's own app: real workers, real SIGKILLs, every run checked.

The passing run must have killed a worker holding a run; the failing ones show the checks
can fail: a workflow whose runs end failed, and logs with a step completed twice.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from surefoot.testing import run_chaos
from surefoot.testing._chaos import steps_done

HERE = Path(__file__).parent
pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")


@pytest.fixture
def app_on_path(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.syspath_prepend(str(HERE))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    return "chaos_user_app:app"


def test_chaos_kills_workers_holding_runs_and_every_run_succeeds(
    tmp_path: Path, app_on_path: str
) -> None:
    report = run_chaos(
        app_on_path,
        "triage",
        db=f"sqlite:///{tmp_path / 'chaos.db'}",
        inputs=list(range(8)),
        workers=2,
        seed=3,
        max_kills=4,
        kill_every=(0.3, 0.6),
        lease=1.0,
        time_limit=90,
        workdir=tmp_path / "logs",
    )
    assert report.problems == []
    assert report.succeeded == 8
    assert report.kills >= 1 and report.kills_holding_a_run >= 1
    assert report.steps_journalled == 8 * 3
    assert report.repeated_steps == []
    assert report.claimed_more_than_once >= 1  # a killed holder's run was claimed again


def test_the_cli_fails_when_runs_fail(tmp_path: Path, app_on_path: str) -> None:
    env = {**os.environ, "CHAOS_APP_FLAKY": "1"}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "surefoot",
            "chaos",
            "--app",
            app_on_path,
            "--workflow",
            "triage",
            "--db",
            f"sqlite:///{tmp_path / 'c.db'}",
            "--runs",
            "2",
            "--input",
            "5",
            "--max-kills",
            "0",
            "--time-limit",
            "60",
            "--json",
            str(tmp_path / "r.json"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 1, out.stdout + out.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["ok"] is False
    assert report["statuses"] != {"succeeded": 2}
    assert "runs did not succeed" in out.stderr


def test_an_unknown_workflow_is_refused_in_one_line(tmp_path: Path, app_on_path: str) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "surefoot",
            "chaos",
            "--app",
            app_on_path,
            "--workflow",
            "nope",
            "--db",
            f"sqlite:///{tmp_path / 'c.db'}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode != 0
    assert "has no workflow 'nope' (it has: triage)" in out.stderr
    assert "Traceback" not in out.stderr


def test_a_step_completed_twice_is_found_in_the_logs(tmp_path: Path) -> None:
    line = {"event": "step_done", "run_id": "r1", "pos": "2", "step": "think"}
    (tmp_path / "worker-0-1.log").write_text(json.dumps(line) + "\nnot json\n")
    (tmp_path / "worker-1-2.log").write_text(
        json.dumps(line) + "\n" + json.dumps({**line, "pos": "3"}) + "\n"
    )
    (tmp_path / "worker-1-3.log").write_text(json.dumps({**line, "run_id": "other"}) + "\n")
    done = steps_done(sorted(tmp_path.glob("*.log")), {"r1"})
    assert done[("r1", "2")] == 2 and done[("r1", "3")] == 1
    assert ("other", "2") not in done


@pytest.mark.parametrize(
    ("given", "needle"),
    [({"inputs": [4, [1, 2, 3]]}, "[1, 2, 3]"), ({"runs": 2}, "no arguments")],
)
def test_an_input_the_workflow_cannot_take_is_refused_before_anything_runs(
    tmp_path: Path, app_on_path: str, given: dict[str, object], needle: str
) -> None:
    # triage(n) given [1, 2, 3], or nothing: every run was enqueued, workers started and
    # SIGKILLed, and the report said only "failed"; now one line names the input first
    from surefoot.durable import App
    from surefoot.errors import ConfigError

    db = f"sqlite:///{tmp_path / 'c.db'}"
    with pytest.raises(ConfigError, match="triage") as err:
        run_chaos(app_on_path, "triage", db=db, workdir=tmp_path, **given)  # type: ignore[arg-type]
    assert needle in str(err.value)
    if (tmp_path / "c.db").exists():
        with App(db) as app:
            assert app.list_runs() == []  # nothing was enqueued


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--json", "/nonexistent-dir/report.json"], "/nonexistent-dir/report.json"),
        (["--kill-every", "0.5:0.1"], "--kill-every '0.5:0.1'"),
    ],
)
def test_a_report_path_or_kill_window_that_cannot_work_is_refused_first(
    tmp_path: Path,
    app_on_path: str,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    needle: str,
) -> None:
    # --json into a missing folder ran the whole chaos, then died with a traceback and no
    # report written; --kill-every 0.5:0.1 was blamed on "kill_every (low, high)"
    from surefoot.cli import main

    db = tmp_path / "c.db"
    with pytest.raises(SystemExit) as info:
        main(["chaos", "--app", app_on_path, "--workflow", "triage", "--db", f"sqlite:///{db}",
              "--input", "1", *args])  # fmt: skip
    assert info.value.code in (1, 2)
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err
    assert not db.exists()  # refused before anything was enqueued


def test_the_journal_url_is_not_on_the_workers_command_lines(
    tmp_path: Path, app_on_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ps shows a process's arguments to every user of the machine: the URL (which may hold a
    password) goes to the workers through their environment."""
    from surefoot.testing import _chaos

    seen: list[tuple[list[str], dict[str, str]]] = []
    real = _chaos.subprocess.Popen

    def spy(cmd: list[str], **kw: object) -> object:
        seen.append((list(cmd), dict(kw["env"])))  # type: ignore[arg-type]
        return real(cmd, **kw)  # type: ignore[call-overload]

    monkeypatch.setattr(_chaos.subprocess, "Popen", spy)
    db = f"sqlite:///{tmp_path / 'c.db'}"
    report = run_chaos(
        app_on_path, "triage", db=db, inputs=[1], workers=1, max_kills=0, time_limit=60,
        workdir=tmp_path / "logs",
    )  # fmt: skip
    assert report.succeeded == 1 and seen
    for cmd, env in seen:
        assert not any(db in arg for arg in cmd), cmd
        assert env["SUREFOOT_DB"] == db
