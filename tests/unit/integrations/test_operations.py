"""The shared core of the framework integrations (surefoot.integrations._operations):
digests that bind an approval to one call, effect keys from the run and the tool call's id,
and the steps units run in. Standard library only: no framework needed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from surefoot import durable
from surefoot.errors import ConfigError
from surefoot.integrations import _approvals as ans
from surefoot.integrations import _operations as ops


@pytest.fixture
def app(tmp_path: Path) -> Iterator[durable.App]:
    a = durable.App(f"sqlite:///{tmp_path / 'runs.db'}", poll=0.01)
    yield a
    a.close()


def test_the_digest_names_the_run_the_call_the_tool_and_the_exact_arguments() -> None:
    d = ops.call_digest("r1", "c1", "pay", {"to": "ann", "amount": 1})
    assert d == ops.call_digest("r1", "c1", "pay", {"amount": 1, "to": "ann"})  # key order
    assert d == ops.call_digest("r1", "c1", "pay", '{"amount": 1, "to": "ann"}')  # JSON text
    others = [
        ops.call_digest("r2", "c1", "pay", {"to": "ann", "amount": 1}),
        ops.call_digest("r1", "c2", "pay", {"to": "ann", "amount": 1}),
        ops.call_digest("r1", "c1", "refund", {"to": "ann", "amount": 1}),
        ops.call_digest("r1", "c1", "pay", {"to": "ann", "amount": 2}),
    ]
    assert d not in others and len(set(others)) == 4
    assert len(d) == 32


def test_effect_keys_come_from_the_run_and_the_tool_call_id_and_tell_reused_ids_apart() -> None:
    calls = ops.ToolCalls("r1")
    assert [calls.effect_key(c) for c in ("a", "b", "a")] == ["r1:a", "r1:b", "r1:a#2"]
    again = ops.ToolCalls("r1")  # a replay: the same keys in the same order
    assert [again.effect_key(c) for c in ("a", "b", "a")] == ["r1:a", "r1:b", "r1:a#2"]


def test_an_operation_keeps_its_kind(app: durable.App) -> None:
    steps = ops.OperationSteps(app)
    first = steps.step("agent__call_tool:pay", effect=True)
    assert steps.step("agent__call_tool:pay", effect=True) is first
    assert ops.OperationSteps(app).step("agent__call_tool:pay", effect=True) is first
    with pytest.raises(ConfigError, match="keeps its kind"):
        steps.step("agent__call_tool:pay", effect=False)


def test_a_unit_runs_as_a_journalled_step_with_its_effect_key(app: durable.App) -> None:
    steps = ops.OperationSteps(app)
    pay = steps.step("agent__call_tool:pay", effect=True)
    seen: list[str] = []

    async def body() -> dict[str, Any]:
        seen.append(ops.current_effect_key())
        return {"paid": True}

    @app.workflow
    async def flow() -> Any:
        return await pay(body, "r:c1")

    assert app.start(flow, run_id="r").result(timeout=10) == {"paid": True}
    assert seen == ["r:c1"]
    (row,) = app.show("r").steps
    assert (row.name, row.kind, row.result) == ("agent__call_tool:pay", "effect", {"paid": True})


def test_approve_refuses_a_call_nobody_asked_about_and_needs_a_name(app: durable.App) -> None:
    @app.workflow
    async def flow() -> Any:
        calls = [("approval", "c1", "pay", {"a": 1})]
        (d,) = await ans.await_answers(app, ops.OperationSteps(app), calls)
        assert isinstance(d, ans.Decision)
        return [d.approved, d.by]

    h = app.start(flow, run_id="w")
    for _ in range(500):
        if ans.pending_approvals(app, "w"):
            break
        time.sleep(0.01)
    (req,) = ans.pending_approvals(app, "w")
    with pytest.raises(ConfigError, match="by="):
        ans.approve(app, "w", req.digest, by=" ")
    with pytest.raises(ConfigError, match="no tool call waiting"):
        ans.approve(app, "w", ops.call_digest("w", "c1", "pay", {"a": 2}), by="ann")
    assert ans.approve(app, "w", req.digest, by="ann")
    assert ans.pending_approvals(app, "w") == []
    assert h.result(timeout=10) == [True, "ann"]
