"""The 7-step agent: its steps and kinds, the ledger's counts, approval, the crash window."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from surefoot import FakeClock
from surefoot.durable import App, CrashPlan, SimulatedCrash
from surefoot.errors import ConfigError, RunConflictError, TimeoutError_
from surefoot_lab.agent import (
    STEPS,
    AgentServices,
    Ledger,
    approve,
    build_agent,
    start_agent,
)
from surefoot_lab.agent.chaos import ChaosConfig, repeated_after_journal


@pytest.fixture
def services(tmp_path: Path, clock: FakeClock) -> AgentServices:
    """Fake services recording into a ledger file in tmp_path."""
    return AgentServices(tmp_path / "ledger.db", clock=clock)


def test_clean_run_journals_seven_steps_and_costs_three_model_calls(
    app: App, services: AgentServices
) -> None:
    """One run: seven journalled steps in order, 3 model calls, 2 tool reads, 1 post."""
    wf = build_agent(app, services)["1"]
    out = start_agent(app, wf, "why is the sky blue?", run_id="r").result(timeout=10)
    assert out["status"] == "published" and out["by"] == "auto"
    steps = app.show("r").steps
    assert [s.name for s in steps] == [*STEPS[:5], "signal:approve", "publish"]
    assert [s.kind for s in steps] == ["pure"] * 5 + ["signal", "effect"]
    t = services.ledger.totals()
    assert (t.model_calls, t.tool_calls, t.publish_calls, t.posts) == (3, 2, 1, 1)
    assert t.tokens > 0 and t.cost == pytest.approx(services.llm.cost)
    assert t.calls_by_step == {"draft": 1, "plan": 1, "read": 1, "search": 1, "summarize": 1}


def test_describe_reads_kinds_compensation_and_key_plan(app: App, services: AgentServices) -> None:
    """describe() finds every step of the agent, the wait, and publish's compensation."""
    wf = build_agent(app, services)["1"]
    specs = {s.name: s for s in app.describe(wf)}
    assert [s for s in specs if specs[s].kind == "pure"] == list(STEPS[:5])
    assert specs["publish"].kind == "effect" and specs["publish"].compensate == "unpublish"
    assert specs["publish"].takes_key
    assert [s.kind for s in specs.values()].count("wait") == 1


@pytest.mark.parametrize(("strategy", "posts"), [("journal", 2), ("journal_keys", 1)])
def test_crash_after_publish_duplicates_only_without_key(
    app: App, services: AgentServices, strategy: str, posts: int
) -> None:
    """Crash after publish, before its journal row: a second post without the key, none with."""
    wf = build_agent(app, services)["1"]
    app.crash = CrashPlan("after_effect", step="publish")
    with pytest.raises(SimulatedCrash):
        start_agent(app, wf, "q", run_id="w", strategy=strategy).result(timeout=10)
    app.crash = None
    app.resume("w").result(timeout=10)
    t = services.ledger.totals()
    assert t.publish_calls == 2 and t.posts == posts and t.duplicate_posts == posts - 1
    assert t.model_calls == 3  # every model step was journalled before the crash


def test_publisher_dedups_by_key_only_when_it_honours_keys(tmp_path: Path) -> None:
    """The fake publisher returns the same post for a repeated key, unless told to ignore keys."""
    keyed = AgentServices(tmp_path / "a.db")
    a = asyncio.run(keyed.publish("r", "blog", "x", "r:7"))
    assert asyncio.run(keyed.publish("r", "blog", "x", "r:7")) == a
    assert keyed.ledger.totals().posts == 1
    blind = AgentServices(tmp_path / "b.db", honour_keys=False)
    asyncio.run(blind.publish("r", "blog", "x", "r:7"))
    asyncio.run(blind.publish("r", "blog", "x", "r:7"))
    assert blind.ledger.totals().duplicate_posts == 1


def test_unapproved_run_waits_then_publishes_once_approved(
    app: App, services: AgentServices
) -> None:
    """Without auto-approval the run sleeps at approve, holding nothing, until the signal."""
    wf = build_agent(app, services)["1"]
    h = start_agent(app, wf, "q", run_id="a", auto_approve=False)
    with pytest.raises(TimeoutError_, match="did not finish"):
        h.result(timeout=1)
    info = app.show("a").run
    assert info.status == "sleeping" and info.waiting_for == "approve" and info.owner is None
    assert services.ledger.totals().publish_calls == 0
    assert approve(app, "a", by="ann") is True
    assert approve(app, "a", by="ann") is False  # the same decision is delivered once
    assert app.resume("a").result(timeout=10)["status"] == "published"
    assert services.ledger.totals().posts == 1


def test_rejection_and_timeout_publish_nothing(
    app: App, services: AgentServices, clock: FakeClock
) -> None:
    """A rejected draft, or no decision before the timeout, ends the run without a post."""
    wf = build_agent(app, services)["1"]
    start_agent(app, wf, "q", run_id="no", auto_approve=False)
    approve(app, "no", approved=False)
    assert app.resume("no").result(timeout=10)["status"] == "rejected"
    h = start_agent(app, wf, "q", run_id="late", auto_approve=False, approval_timeout=60)
    with pytest.raises(TimeoutError_, match="did not finish"):
        h.result(timeout=1)  # now suspended at approve, its deadline journalled
    clock.advance(61)
    assert h.result(timeout=10) == {
        "status": "rejected",
        "draft": h.result()["draft"],
        "approval": None,
    }
    assert services.ledger.totals().posts == 0


def test_same_run_id_is_the_same_run_and_other_args_conflict(
    app: App, services: AgentServices
) -> None:
    """Starting a run id twice gives one run (3 model calls); another question is an error."""
    wf = build_agent(app, services)["1"]
    start_agent(app, wf, "q", run_id="same").result(timeout=10)
    start_agent(app, wf, "q", run_id="same", auto_approve=False).result(timeout=10)
    assert services.ledger.totals().model_calls == 3
    with pytest.raises(RunConflictError):
        start_agent(app, wf, "another question", run_id="same")


def test_build_agent_refuses_bad_versions_and_a_second_agent(
    app: App, services: AgentServices
) -> None:
    """An unknown version is a ConfigError; so is a second agent on the same app."""
    with pytest.raises(ConfigError, match="versions"):
        build_agent(app, services, versions=("3",))
    build_agent(app, services)
    with pytest.raises(ConfigError, match="registered twice"):
        build_agent(app, services)


def test_services_from_env_need_the_ledger(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Worker processes configure the services by environment; no ledger is a clear error."""
    monkeypatch.delenv("SUREFOOT_AGENT_LEDGER", raising=False)
    with pytest.raises(ConfigError, match="SUREFOOT_AGENT_LEDGER"):
        AgentServices.from_env()
    monkeypatch.setenv("SUREFOOT_AGENT_LEDGER", str(tmp_path / "l.db"))
    monkeypatch.setenv("SUREFOOT_AGENT_LATENCY", "0.25")
    assert AgentServices.from_env().latency == 0.25
    monkeypatch.setenv("SUREFOOT_AGENT_LATENCY", "soon")
    with pytest.raises(ConfigError, match="SUREFOOT_AGENT"):
        AgentServices.from_env()


def test_repeated_after_journal_counts_calls_after_the_step_row(
    app: App, services: AgentServices, clock: FakeClock
) -> None:
    """A model call received after its step's journal row counts as a recomputed step."""
    wf = build_agent(app, services)["1"]
    start_agent(app, wf, "q", run_id="r").result(timeout=10)
    assert repeated_after_journal(app, services.ledger, ["r"]) == 0
    clock.advance(5)
    services.ledger.record("r", "model", "plan", at=clock.now())
    assert repeated_after_journal(app, services.ledger, ["r"]) == 1


def test_chaos_config_rejects_nonsense(tmp_path: Path) -> None:
    """Unknown strategies, zero runs and an empty kill interval are ConfigErrors."""
    base = {"db": "sqlite://", "ledger": str(tmp_path / "l.db")}
    for bad in (
        {"strategies": ("yolo",)},
        {"runs": 0},
        {"kill_every": (0.0, 1.0)},
        {"time_limit": 0.0},
    ):
        with pytest.raises(ConfigError):
            ChaosConfig(**base, **bad).check()  # type: ignore[arg-type]


def test_ledger_is_shared_by_files(tmp_path: Path) -> None:
    """Two Ledger objects on one file (as in two processes) see each other's records."""
    a, b = Ledger(tmp_path / "l.db"), Ledger(tmp_path / "l.db")
    a.record("r", "model", "plan", at=1.0, tokens=10, cost=0.5)
    b.publish("r", "blog", "text", None, at=2.0)
    t = b.totals()
    assert (t.model_calls, t.tokens, t.cost, t.posts) == (1, 10, 0.5, 1)
    with pytest.raises(ConfigError):
        Ledger("")


def test_forked_agent_run_is_counted_under_its_own_id(app: App, services: AgentServices) -> None:
    """A fork from draft redoes draft and publish under the fork's id and key, not the parent's."""
    wf = build_agent(app, services)["1"]
    start_agent(app, wf, "q", run_id="a").result(timeout=10)
    h = app.fork("a", "5", new_run_id="a2")
    approve(app, "a2")  # the approval comes after the fork point: the fork asks again
    assert h.result(timeout=10)["status"] == "published"
    assert [c["step"] for c in services.ledger.calls("a2", service="model")] == ["draft"]
    assert len(services.ledger.calls("a")) == 6  # five steps and the publish, none more
    ((post,),) = [services.ledger.posts("a2")]
    assert post["key"] == "a2:7"
