"""The agent on a real Temporal dev server: end to end, and its worker or server SIGKILLed."""

from __future__ import annotations

import ast
import asyncio
import sys
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from surefoot.engines.temporal import DevServer
from surefoot.errors import ConfigError, MissingExtraError
from surefoot_lab.agent import STEPS, AgentServices, Ledger
from surefoot_lab.agent import port_temporal as pt

pytestmark = [pytest.mark.crash, pytest.mark.temporal]

LATENCY = 0.1


@pytest.fixture(scope="module")
def server(temporal_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    """One dev server on loopback on free ports for this file, stopped by pid at the end."""
    s = DevServer(tmp_path_factory.mktemp("temporal") / "t.db", binary=temporal_bin)
    s.start()
    try:
        yield s
    finally:
        s.stop()


def _kill(server: DevServer, tmp_path: Path, **kw: Any) -> pt.TemporalKillReport:
    name = f"k-{kw.get('kill_at', 'read')}-{uuid.uuid4().hex[:6]}"
    return pt.kill_temporal_mid_run(
        server, tmp_path / f"{name}.db", run_id=name, latency=LATENCY, timeout=60, **kw
    )


def test_workflow_end_to_end(server: DevServer, tmp_path: Path) -> None:
    """One run publishes once with key workflow_id:activity_id; a repeated signal id is ignored."""
    from temporalio.client import Client
    from temporalio.worker import Worker

    from surefoot_lab.agent._temporal_activities import AgentActivities
    from surefoot_lab.agent._temporal_workflow import AgentInput, Approval, ResearchAgent
    from surefoot_lab.agent.port_temporal import sandbox_runner

    ledger = Ledger(tmp_path / "ledger.db")
    wid, queue = f"e2e-{uuid.uuid4().hex[:6]}", f"q-{uuid.uuid4().hex[:6]}"

    async def main() -> tuple[dict[str, Any], list[str], dict[str, Any]]:
        client = await Client.connect(server.address)
        acts = AgentActivities(AgentServices(ledger))
        worker = Worker(
            client,
            task_queue=queue,
            workflows=[ResearchAgent],
            activities=acts.all(),
            workflow_runner=sandbox_runner(),
            sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
        )
        async with worker:
            h = await client.start_workflow(
                ResearchAgent.run, AgentInput("why?"), id=wid, task_queue=queue
            )
            yes = Approval(approved=True, by="ann", signal_id="approve:ann")
            await h.signal(ResearchAgent.approve, yes)
            await h.signal(ResearchAgent.approve, yes)  # the same id again: not a second one
            result = await h.result()
            seen = await h.query(ResearchAgent.decisions)
            h2 = await client.start_workflow(
                ResearchAgent.run, AgentInput("no?"), id=wid + "-no", task_queue=queue
            )
            await h2.signal(ResearchAgent.approve, Approval(False, "bob", "approve:bob"))
            rejected = await h2.result()
        return result, seen, rejected

    result, seen, rejected = asyncio.run(main())
    assert result["status"] == "published" and result["by"] == "ann"
    assert seen == ["approve:ann"]
    assert rejected["status"] == "rejected" and rejected["by"] == "bob"
    totals = ledger.totals([wid])
    assert totals.model_calls == 3 and totals.tool_calls == 2
    steps = ("draft", "plan", "read", "search", "summarize")
    assert totals.calls_by_step == dict.fromkeys(steps, 1)
    (post,) = ledger.posts(wid)
    assert post["key"] == f"{wid}:6"  # the sixth activity of the run: stable across attempts
    assert result["posts"] == [post["id"]]
    assert ledger.posts(wid + "-no") == []


def test_worker_killed_mid_activity_repeats_no_completed_step(
    server: DevServer, tmp_path: Path
) -> None:
    """A SIGKILLed worker's run completes after restart; completed steps are never called again."""
    r = _kill(server, tmp_path, kill_at="read")
    assert r.status == "COMPLETED"
    assert r.completed_before_kill == ["plan", "search"]
    assert r.repeated_for_completed == 0 and r.repeated_after_completion == 0
    assert r.calls_per_step["plan"] == 1 and r.calls_per_step["search"] == 1
    assert r.in_flight == "read" and r.in_flight_attempts == 2  # at least once: retried
    assert r.posts == 1 and r.duplicate_posts == 0 and r.worker_restarts == 1
    assert r.resumed_in_s is not None and r.result_in_s is not None


def test_publish_killed_after_the_service_acted_posts_once(
    server: DevServer, tmp_path: Path
) -> None:
    """Publish re-runs after a kill in its reply window; the stable key keeps it to one post."""
    r = _kill(server, tmp_path, kill_at="publish", window="reply", reply_latency=3 * LATENCY)
    assert r.status == "COMPLETED"
    assert r.completed_before_kill == ["plan", "search", "read", "summarize", "draft"]
    assert r.calls_per_step["publish"] == 2 and r.in_flight_attempts == 2
    assert r.posts == 1 and r.duplicate_posts == 0
    assert r.model_calls == 3 and r.repeated_for_completed == 0


def test_worker_killed_while_waiting_for_approval(server: DevServer, tmp_path: Path) -> None:
    """Killed while the run waits, approved while no worker runs: it publishes, nothing re-ran."""
    r = _kill(server, tmp_path, kill_at="approve")
    assert r.window == "wait" and r.status == "COMPLETED"
    assert r.completed_before_kill == list(STEPS[:5])
    assert all(n == 1 for n in r.calls_per_step.values())
    assert r.repeated_for_completed == 0 and r.posts == 1


def test_server_killed_and_restarted_on_its_file(server: DevServer, tmp_path: Path) -> None:
    """The server SIGKILLed mid-activity, restarted on its file: the run completes, no repeats."""
    before = server.pid
    r = _kill(server, tmp_path, kill_at="summarize", target="server")
    assert server.pid not in (None, before) and server.answers()
    assert r.status == "COMPLETED" and r.worker_restarts == 0
    assert r.completed_before_kill == ["plan", "search", "read"]
    assert r.repeated_for_completed == 0 and r.repeated_after_completion == 0
    assert r.posts == 1 and r.duplicate_posts == 0


def test_kill_harness_rejects_bad_input(server: DevServer, tmp_path: Path) -> None:
    """An unknown step, target or window, or the server killed during approve, is named."""
    with pytest.raises(ConfigError, match="'nowhere'"):
        pt.kill_temporal_mid_run(server, tmp_path / "l.db", kill_at="nowhere")
    with pytest.raises(ConfigError, match="'moon'"):
        pt.kill_temporal_mid_run(server, tmp_path / "l.db", target="moon")
    with pytest.raises(ConfigError, match="'sideways'"):
        pt.kill_temporal_mid_run(server, tmp_path / "l.db", window="sideways")
    with pytest.raises(ConfigError, match="approve"):
        pt.kill_temporal_mid_run(server, tmp_path / "l.db", kill_at="approve", target="server")


def test_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without temporalio the port raises MissingExtraError naming surefoot[temporal]."""
    from surefoot_lab.durable import _temporal_rows

    monkeypatch.setitem(sys.modules, "temporalio.client", None)  # makes the import fail
    with pytest.raises(MissingExtraError, match=r"surefoot\[temporal\]") as info:
        pt.temporalio_module()
    assert info.value.extra == "temporal"
    assert _temporal_rows.skipped_reason() == str(info.value)


def test_workflow_module_holds_only_definitions() -> None:
    """The sandbox re-imports the workflow module per run: its top level only imports, defines."""
    import surefoot_lab.agent

    source = Path(surefoot_lab.agent.__file__).parent / "_temporal_workflow.py"
    tree = ast.parse(source.read_text())  # read, not imported: this runs without temporalio
    allowed = (ast.Import, ast.ImportFrom, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    for node in tree.body:
        if isinstance(node, ast.With):  # `with workflow.unsafe.imports_passed_through():`
            assert ast.unparse(node.items[0].context_expr).endswith("imports_passed_through()")
            assert all(isinstance(n, ast.ImportFrom | ast.Import) for n in node.body)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            assert isinstance(node.value, ast.Constant | ast.List), ast.unparse(node)
        elif isinstance(node, ast.Expr):
            assert isinstance(node.value, ast.Constant)  # docstrings
        else:
            assert isinstance(node, allowed), ast.unparse(node)
