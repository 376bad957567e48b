"""A run that failed after its retry policy ran out is retried from its failed step: the
journal of completed steps is kept (they replay, not run), the failed step runs again,
and the ``retry`` audit entry says who, from which status, why and what runs again. From
the API and from ``surefoot runs retry``. The model is a scripted provider stand-in (a
step that raises ``ConnectionError`` while the outage lasts), no real LLM."""

from __future__ import annotations

import json
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from surefoot.cli import main
from surefoot.durable import App
from surefoot.errors import JournalError, RunFailedError


class Outage:
    """Counts calls per step; the provider step fails while ``down``."""

    def __init__(self) -> None:
        self.down = True
        self.calls: dict[str, int] = {}

    def call(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1
        if name == "ask" and self.down:
            raise ConnectionError("503 Service Unavailable")


def define(app: App, svc: Outage) -> Any:
    @app.step
    def plan(q: str) -> str:
        svc.call("plan")
        return f"plan for {q}"

    @app.step(retry=3)
    def ask(p: str) -> str:
        svc.call("ask")
        return f"answer to {p}"

    @app.step
    def report(a: str) -> str:
        svc.call("report")
        return a.upper()

    @app.workflow
    def agent(q: str) -> str:
        return report(ask(plan(q)))

    return agent


@pytest.fixture
def failed(app: App) -> tuple[App, Outage]:
    """Run ``r`` failed at step ``ask`` after 3 attempts (a long provider outage)."""
    svc = Outage()
    wf = define(app, svc)
    with pytest.raises(RunFailedError):
        app.start(wf, "q", run_id="r").result(timeout=10)
    assert app.show("r").run.status == "failed"
    assert svc.calls == {"plan": 1, "ask": 3}
    return app, svc


def test_a_failed_run_is_retried_from_its_failed_step(failed: tuple[App, Outage]) -> None:
    app, svc = failed
    svc.down = False  # the provider is back
    assert app.retry("r", reason="provider back").result(timeout=10) == "ANSWER TO PLAN FOR Q"
    assert svc.calls == {"plan": 1, "ask": 4, "report": 1}  # plan was not run again
    d = app.show("r")
    assert d.run.status == "succeeded" and d.run.error is None
    retry = [e for e in d.audit if e.action == "retry"]
    assert [(e.actor, e.detail) for e in retry] == [
        (
            "operator",
            {"reason": "provider back", "rerun": ["2"], "from": "failed", "worker": "test-worker"},
        )
    ]
    assert [(s.name, s.status) for s in d.steps] == [
        ("plan", "done"),
        ("ask", "done"),
        ("report", "done"),
    ]


def test_a_retried_run_that_fails_again_can_be_retried_again(
    failed: tuple[App, Outage],
) -> None:
    app, svc = failed
    with pytest.raises(RunFailedError):
        app.retry("r", reason="too soon").result(timeout=10)
    assert svc.calls == {"plan": 1, "ask": 6}
    svc.down = False
    assert app.retry("r").result(timeout=10) == "ANSWER TO PLAN FOR Q"
    assert svc.calls == {"plan": 1, "ask": 7, "report": 1}


def test_a_failed_run_whose_effects_were_undone_is_not_retried(app: App) -> None:
    """Its compensations ran: replaying the undone effect as done would be wrong."""
    undone: list[str] = []

    def unbook(x: int) -> None:
        undone.append("unbook")

    @app.step(effect=True, compensate=unbook)
    def book(x: int) -> int:
        return x

    @app.step
    def pay(x: int) -> int:
        raise ValueError("card declined")

    @app.workflow
    def trip() -> int:
        return pay(book(1))

    with pytest.raises(RunFailedError):
        app.start(trip, run_id="t").result(timeout=10)
    assert undone == ["unbook"]
    with pytest.raises(JournalError, match=r"compensations undid effects.*fork"):
        app.retry("t")
    assert app.show("t").run.status == "failed"


@pytest.fixture
def app_ref(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Any]]:
    """A module 'name:app' defining the agent, importable by --app; and the module."""
    name = f"retry_app_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent(
            """
            from surefoot import durable
            from test_retry_failed import Outage, define
            app = durable.App(poll=0.01, worker_id="cli")
            svc = Outage()
            svc.down = False
            workflow = define(app, svc)
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    import importlib

    mod = importlib.import_module(name)
    yield f"{name}:app", mod
    mod.app.close()
    sys.modules.pop(name, None)


def test_cli_retries_a_failed_run_from_its_failed_step(
    tmp_path: Path, app_ref: tuple[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    svc = Outage()
    with App(url, poll=0.01) as first:
        wf = define(first, svc)
        with pytest.raises(RunFailedError):
            first.start(wf, "q", run_id="r").result(timeout=10)
    ref, mod = app_ref
    capsys.readouterr()
    main(["runs", "retry", "r", "--db", url, "--app", ref, "--wait", "--json",
          "--reason", "provider back"])  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert out == {"run_id": "r", "action": "retried", "status": "succeeded"}
    assert svc.calls == {"plan": 1, "ask": 3}  # nothing more ran in the first app
    assert mod.svc.calls == {"ask": 1, "report": 1}  # plan replayed, not run
