"""``surefoot runs``: list, show, signal, resume, cancel, retry and fork from the command line."""

from __future__ import annotations

import json
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from surefoot.cli import main
from surefoot.durable import App, CrashPlan, SimulatedCrash
from surefoot.errors import RunFailedError
from surefoot_lab.agent import AgentServices, build_agent, start_agent


@pytest.fixture
def db(tmp_path: Path) -> str:
    """A journal with three agent runs: ok (succeeded), wait (at approve), saga (attention)."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    app = App(url, poll=0.01, worker_id="seed")
    svc = AgentServices(tmp_path / "ledger.db", fail_publish={"news"}, fail_unpublish={"blog"})
    wf = build_agent(app, svc)["1"]
    start_agent(app, wf, "q", run_id="ok").result(timeout=10)
    start_agent(app, wf, "q", run_id="wait", auto_approve=False)
    with pytest.raises(RunFailedError):
        start_agent(app, wf, "q", run_id="saga", channels=["blog", "news"]).result(timeout=10)
    app.resume("wait")
    for _ in range(500):
        if app.show("wait").run.status == "sleeping":
            break
        time.sleep(0.01)
    app.close()
    return url


@pytest.fixture
def app_ref(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A module 'name:app' with the agent registered, importable by --app."""
    name = f"runs_app_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent(
            f"""
            from surefoot import durable
            from surefoot_lab import agent
            app = durable.App(poll=0.01)
            services = agent.AgentServices({str(tmp_path / "ledger.db")!r})
            workflow = agent.build_agent(app, services)["1"]
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield f"{name}:app"
    sys.modules.pop(name, None)


@pytest.fixture(autouse=True)
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """Wide tables, so cells are not cut in the captured output."""
    monkeypatch.setenv("COLUMNS", "200")


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """Run the CLI; return its stdout."""
    main(list(args))
    return capsys.readouterr().out


def cli_json(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    """Run the CLI with --json; return the parsed output."""
    return json.loads(cli(capsys, *args, "--json"))


def test_list_shows_every_run_with_its_status(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    """list prints a table of runs; --json gives the same runs, filterable by status."""
    out = cli(capsys, "runs", "list", "--db", db)
    for rid, status in (("ok", "succeeded"), ("wait", "sleeping"), ("saga", "needs_attention")):
        assert rid in out and status in out
    rows = cli_json(capsys, "runs", "list", "--db", db)
    assert {r["run_id"]: r["status"] for r in rows} == {
        "ok": "succeeded",
        "wait": "sleeping",
        "saga": "needs_attention",
    }
    only = cli_json(capsys, "runs", "list", "--db", db, "--status", "sleeping")
    assert [r["run_id"] for r in only] == ["wait"]


def test_show_prints_steps_timings_version_lease_and_audit(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """show prints the header, every step with its timing, and the audit of the failed undo."""
    out = cli(capsys, "runs", "show", "saga", "--db", db)
    assert "research_agent version 1" in out and "epoch 1" in out
    for text in ("plan", "publish", "7.undo", "unpublish", "compensation_failed"):
        assert text in out
    assert "needs_attention" in out and "PublishError" in out
    d = cli_json(capsys, "runs", "show", "saga", "--db", db)
    assert d["run"]["status"] == "needs_attention"
    assert [s["name"] for s in d["steps"]][:5] == ["plan", "search", "read", "summarize", "draft"]
    assert all(s["finished_at"] >= s["started_at"] for s in d["steps"])
    attention = next(a for a in d["audit"] if a["action"] == "needs_attention")["detail"]
    assert [u["pos"] for u in attention["not_undone"]] == ["7"]
    waiting = cli(capsys, "runs", "show", "wait", "--db", db)
    assert "signal 'approve'" in waiting
    assert "no live worker offers research_agent version 1" in waiting  # stranded, visibly


def test_signal_then_resume_finishes_the_waiting_run(
    db: str, app_ref: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A person approves from the CLI; resume --app executes the run to the end, here."""
    out = cli(capsys, "runs", "signal", "wait", "approve", '{"approved": true}', "--db", db)
    assert "sent" in out
    res = cli_json(capsys, "runs", "resume", "wait", "--db", db, "--app", app_ref)
    assert res == {"run_id": "wait", "action": "resumed", "status": "succeeded"}
    steps = cli_json(capsys, "runs", "show", "wait", "--db", db)["steps"]
    assert steps[5]["result"] == {"v": {"approved": True}}


def test_retry_sends_the_attention_run_back_and_a_fixed_app_finishes_the_rollback(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """retry moves needs_attention to pending; with the fix, the rollback completes."""
    res = cli_json(capsys, "runs", "retry", "saga", "--db", db, "--reason", "blog is back")
    assert res["status"] == "pending"
    app = App(db, poll=0.01, worker_id="fixed")
    svc = AgentServices(tmp_path / "ledger.db", fail_publish={"news"})
    build_agent(app, svc)
    with pytest.raises(RunFailedError) as info:
        app.resume("saga").result(timeout=10)
    assert info.value.status == "failed"
    assert [p["removed_at"] is not None for p in svc.ledger.posts("saga")] == [True]
    app.close()
    audit = cli_json(capsys, "runs", "show", "saga", "--db", db)["audit"]
    assert [a["action"] for a in audit][-5:] == [
        "retry",
        "claimed",  # written by the claim that resume made, in the claim's transaction
        "resume",
        "compensated",
        "failed",
    ]


def test_cancel_and_fork(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    """cancel ends a waiting run (once); fork copies a run's journal before the given step."""
    assert cli_json(capsys, "runs", "cancel", "wait", "--db", db)["status"] == "cancelled"
    with pytest.raises(SystemExit) as info:
        main(["runs", "cancel", "wait", "--db", db])
    assert info.value.code == 1
    assert "already ended" in capsys.readouterr().err
    res = cli_json(capsys, "runs", "fork", "ok", "4", "--db", db, "--new-id", "ok2")
    assert res["run_id"] == "ok2" and res["status"] == "pending"
    d = cli_json(capsys, "runs", "show", "ok2", "--db", db)
    assert [s["name"] for s in d["steps"]] == ["plan", "search", "read"]
    assert d["run"]["forked_from"] == "ok"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["runs", "show", "nope"], "no run with id 'nope'"),
        (["runs", "signal", "wait", "approve", "{yes"], "PAYLOAD must be JSON"),
        (["runs", "resume", "wait"], "pass --app"),
        (["runs", "retry", "ok"], "only runs that need attention or failed"),
    ],
)
def test_bad_input_is_one_clear_line(
    db: str, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    """Unknown runs, bad JSON, a missing --app and a wrong state exit 1 with one line."""
    with pytest.raises(SystemExit) as info:
        main([*args, "--db", db])
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_resolve_records_an_effect_of_unknown_outcome(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A keyless effect cut off by a crash waits for a person; resolve records its result."""
    url = f"sqlite:///{tmp_path / 'resolve.db'}"
    app = App(url, poll=0.01, worker_id="solo")
    sent: list[str] = []

    @app.step(effect=True)
    def email(to: str) -> str:
        sent.append(to)
        return f"mail to {to}"

    @app.workflow
    def notify(to: str) -> str:
        return email(to)

    app.crash = CrashPlan("after_effect", step="email")
    with pytest.raises(SimulatedCrash):
        app.start(notify, "ann", run_id="n").result(timeout=10)
    app.crash = None
    with pytest.raises(RunFailedError):
        app.resume("n").result(timeout=10)
    res = cli_json(capsys, "runs", "resolve", "n", "1", '"mail to ann"', "--db", url)
    assert res["status"] == "pending"
    assert app.resume("n").result(timeout=10) == "mail to ann"
    assert sent == ["ann"]  # the person's answer stood in for a second email
    app.close()


def test_wait_without_app_is_refused(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    """retry/fork --wait must execute the run here, so they need --app; nothing changes."""
    with pytest.raises(SystemExit):
        main(["runs", "retry", "saga", "--wait", "--db", db])
    assert "pass --app" in capsys.readouterr().err
    assert cli_json(capsys, "runs", "show", "saga", "--db", db)["run"]["status"] == (
        "needs_attention"
    )


def test_retry_wait_exits_1_when_the_retried_run_ends_failed(
    db: str, app_ref: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """retry --wait runs the saga here; its rollback completes and the run ends failed: the
    report is printed, then an error line on stderr and exit 1 (as `engine start --wait`)."""
    with pytest.raises(SystemExit) as info:
        main(["runs", "retry", "saga", "--db", db, "--app", app_ref, "--wait", "--json"])
    assert info.value.code == 1
    out, err = capsys.readouterr()
    assert json.loads(out) == {"run_id": "saga", "action": "retried", "status": "failed"}
    assert err.splitlines()[-1].startswith("surefoot: error: run 'saga' ended failed")


def test_resume_exits_1_when_the_run_ends_failed(
    db: str, app_ref: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """resume waits for the run's end: a run that ends failed exits 1, one that succeeds 0."""
    assert cli_json(capsys, "runs", "retry", "saga", "--db", db)["status"] == "pending"
    with pytest.raises(SystemExit) as info:
        main(["runs", "resume", "saga", "--db", db, "--app", app_ref, "--json"])
    assert info.value.code == 1
    out, err = capsys.readouterr()
    assert json.loads(out) == {"run_id": "saga", "action": "resumed", "status": "failed"}
    assert err.splitlines()[-1].startswith("surefoot: error: run 'saga' ended failed")
    res = cli_json(capsys, "runs", "resume", "saga", "--db", db, "--app", app_ref)
    assert res["resumed"] is False  # ended already: nothing resumed, nothing waited for, 0


def test_fork_wait_exits_1_when_the_new_run_ends_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """fork --wait runs the new run here: it ends failed again, so exit 1 after the report."""
    url = f"sqlite:///{tmp_path / 'broken.db'}"
    name = f"broken_app_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent(
            """
            from surefoot import durable
            app = durable.App(poll=0.01)

            @app.step
            def one() -> int:
                return 1

            @app.step
            def boom(x: int) -> int:
                raise ValueError("still broken")

            @app.workflow
            def broken() -> int:
                return boom(one())
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        mod = __import__(name)
        mod.app.configure(url=url)
        with pytest.raises(RunFailedError):
            mod.app.start(mod.broken, run_id="b").result(timeout=10)
        mod.app.close()
        args = ["runs", "fork", "b", "2", "--db", url, "--app", f"{name}:app", "--wait"]
        with pytest.raises(SystemExit) as info:
            main([*args, "--new-id", "b2", "--json"])
    finally:
        sys.modules.pop(name, None)
    assert info.value.code == 1
    out, err = capsys.readouterr()
    assert json.loads(out)["status"] == "failed"
    assert err.splitlines()[-1].startswith("surefoot: error: run 'b2' ended failed")
    assert "still broken" in err.splitlines()[-1]


def test_resume_exits_1_when_the_run_has_not_ended_at_timeout(
    db: str, app_ref: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run waits for a person's approval: at --timeout it has not ended, so resume
    prints its status, then an error line, and exits 1 (as `engine start --wait` does)."""
    args = ["runs", "resume", "wait", "--db", db, "--app", app_ref, "--timeout", "0.3"]
    with pytest.raises(SystemExit) as info:
        main([*args, "--json"])
    assert info.value.code == 1
    out, err = capsys.readouterr()
    assert json.loads(out) == {"run_id": "wait", "action": "resumed", "status": "sleeping"}
    line = err.splitlines()[-1]
    assert line.startswith("surefoot: error: run 'wait' has not ended within --timeout 0.3 s")
    assert cli_json(capsys, "runs", "show", "wait", "--db", db)["run"]["status"] == "sleeping"


@pytest.mark.parametrize("command", ["retry", "fork"])
def test_retry_and_fork_wait_exit_1_when_the_run_still_runs_at_timeout(
    command: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """retry/fork --wait execute the run here; its step is still running when --timeout
    runs out: the report says so (running), then an error line on stderr and exit 1."""
    url = f"sqlite:///{tmp_path / 'slow.db'}"
    name = f"slow_app_{uuid.uuid4().hex[:8]}"
    slow = tmp_path / "slow"
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent(
            f"""
            import asyncio
            import pathlib

            from surefoot import durable

            app = durable.App(poll=0.01)
            SLOW = pathlib.Path({str(slow)!r})

            @app.step
            async def one() -> int:
                return 1

            @app.step
            async def two(x: int) -> int:
                if SLOW.exists():
                    await asyncio.sleep(60)  # cancelled when the command closes its app
                raise ValueError("broken")

            @app.workflow
            async def wf() -> int:
                return await two(await one())
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        mod = __import__(name)
        mod.app.configure(url=url)
        with pytest.raises(RunFailedError):
            mod.app.start(mod.wf, run_id="r").result(timeout=10)
        mod.app.close()
        slow.touch()
        args = ["runs", command, "r", *(["2", "--new-id", "r2"] if command == "fork" else [])]
        with pytest.raises(SystemExit) as info:
            main([*args, "--db", url, "--app", f"{name}:app", "--wait", "--timeout", "0.3"])
    finally:
        sys.modules.pop(name, None)
    assert info.value.code == 1
    out, err = capsys.readouterr()
    run_id = "r2" if command == "fork" else "r"
    assert f"{run_id}: now running" in out
    line = err.splitlines()[-1]
    assert line.startswith(f"surefoot: error: run {run_id!r} has not ended within --timeout 0.3 s")
