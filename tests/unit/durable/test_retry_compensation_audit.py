"""Engine gaps found while building the agent, lab and CLI, each now fixed and tested here."""

from __future__ import annotations

from pathlib import Path

import pytest

from surefoot import FakeClock
from surefoot.durable import App
from surefoot.errors import RunFailedError
from surefoot_lab.agent import AgentServices, build_agent, start_agent


def test_retry_does_not_audit_a_replayed_compensation_again(tmp_path: Path) -> None:
    """After retry, the audit log says 'compensated' once per compensation actually run."""
    clock = FakeClock()
    app = App(f"sqlite:///{tmp_path / 'runs.db'}", clock=clock, poll=0.01, worker_id="gap")
    svc = AgentServices(
        tmp_path / "ledger.db", clock=clock, fail_publish={"news"}, fail_unpublish={"blog"}
    )
    wf = build_agent(app, svc)["1"]
    with pytest.raises(RunFailedError):
        start_agent(app, wf, "q", run_id="s", channels=["blog", "social", "news"]).result(
            timeout=10
        )
    svc.fail_unpublish.clear()
    with pytest.raises(RunFailedError):
        app.retry("s").result(timeout=10)
    undone = [c["step"] for c in svc.ledger.calls("s", service="unpublish")]
    assert undone == ["social", "blog"]  # each post was taken down once
    actions = [a.action for a in app.show("s").audit]
    app.close()
    assert actions.count("compensated") == len(undone)
