"""DurableRunner in one process: what is journalled, under which names, and approvals that
name exactly one call. The model is the SDK's own ScriptedModel (no network)."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")  # never export traces from tests
if os.environ.get("SUREFOOT_REQUIRE_SERVICES") == "1":
    import agents  # noqa: F401 - CI installs surefoot[openai-agents]
pytest.importorskip("agents", reason="surefoot[openai-agents] is not installed")

from agents import Agent, function_tool
from agents.testing.model import ScriptedModel, assistant_message, function_call

from surefoot import durable
from surefoot.errors import ConfigError
from surefoot.integrations.openai_agents import (
    OPERATION_NAMES,
    DurableRunner,
    approval_digest,
    approve,
    idempotency_key,
    pending_approvals,
)

CALLS: list[str] = []


@function_tool
def pay(payee: str, cents: int) -> str:
    """Pay a payee."""
    CALLS.append(f"pay {payee} {cents} {idempotency_key()}")
    return f"paid {payee}"


@function_tool
def balance() -> int:
    """The balance."""
    CALLS.append("balance")
    return 1000


def _app(tmp_path: Path, model: ScriptedModel, **runner: Any) -> tuple[durable.App, Any]:
    app = durable.App(f"sqlite:///{tmp_path / 'runs.db'}")
    run = DurableRunner(app, **runner)
    agent = Agent(name="bank", instructions="Pay.", model=model, tools=[pay, balance])

    @app.workflow
    async def bank(q: str) -> str:
        result = await run.run(agent, q)
        return f"{result.final_output} ({result.context_wrapper.usage.requests} requests)"

    return app, bank


def test_the_operation_names_are_pinned() -> None:
    """Runs in flight replay by these names: a change here strands them."""
    assert OPERATION_NAMES == (
        "openai_agents.model",
        "openai_agents.tool",
        "openai_agents.effect",
    )


def test_model_turns_and_tools_are_journalled_and_effects_keyed_by_call_id(
    tmp_path: Path,
) -> None:
    CALLS.clear()
    model = ScriptedModel(
        [
            [
                function_call("balance", {}, call_id="c1"),
                function_call("pay", {"payee": "ann", "cents": 5}, call_id="c2"),
            ],
            [assistant_message("done")],
        ]
    )
    app, bank = _app(tmp_path, model, effects=["pay"])
    out = app.start(bank, "pay ann", run_id="r1").result(timeout=30)
    assert out == "done (2 requests)"
    steps = [(s.name, s.kind) for s in app.show("r1").steps]
    assert steps.count(("openai_agents.model", "pure")) == 2
    assert ("openai_agents.tool", "pure") in steps and ("openai_agents.effect", "effect") in steps
    assert CALLS == ["balance", "pay ann 5 r1:c2"]
    app.close()


def test_a_replay_asks_the_model_nothing_and_runs_no_tool(tmp_path: Path) -> None:
    """A second execution of a finished journal (a fork from the last step) replays every
    model turn and tool call from the journal."""
    CALLS.clear()
    model = ScriptedModel(
        [
            [function_call("pay", {"payee": "bo", "cents": 7}, call_id="c9")],
            [assistant_message("ok")],
        ]
    )
    app, bank = _app(tmp_path, model, effects=["pay"])
    assert app.start(bank, "pay bo", run_id="r2").result(timeout=30) == "ok (2 requests)"
    last = app.show("r2").steps[-1].pos
    forked = app.fork("r2", last)
    # the fork replays everything before the last model turn; the script has nothing left
    model.extend([[assistant_message("ok")]])
    assert forked.result(timeout=30) == "ok (2 requests)"
    assert CALLS == ["pay bo 7 r2:c9"]  # the fork replayed the effect: not paid again
    assert model.remaining_steps == 0 and len(model.calls) == 3
    app.close()


def test_an_approval_names_one_call_and_never_releases_another(tmp_path: Path) -> None:
    CALLS.clear()
    calls = [
        function_call("pay", {"payee": "ann", "cents": 5}, call_id="a"),
        function_call("pay", {"payee": "eve", "cents": 900}, call_id="b"),
    ]
    model = ScriptedModel([calls, [assistant_message("paid")]])
    app, bank = _app(tmp_path, model, effects=["pay"], approvals=["pay"])
    handle = app.start(bank, "pay both", run_id="r3")
    ann = approval_digest("pay", calls[0].arguments, "a")
    eve = approval_digest("pay", calls[1].arguments, "b")
    deadline = time.monotonic() + 30
    while handle.status() != "sleeping" and time.monotonic() < deadline:
        time.sleep(0.05)  # the run executes on the app's own thread until it sleeps
    waiting = pending_approvals(app, "r3")
    # each waiting call with its tool, arguments and call id, in the order the model asked
    assert [(w.tool, w.args, w.tool_call_id, w.digest) for w in waiting] == [
        ("pay", {"payee": "ann", "cents": 5}, "a", ann),
        ("pay", {"payee": "eve", "cents": 900}, "b", eve),
    ]
    with pytest.raises(ConfigError, match="does not wait for an approval"):
        approve(app, "r3", "0" * 24)
    approve(app, "r3", ann, by="alice")
    with pytest.raises(TimeoutError):
        handle.result(timeout=1.5)
    assert CALLS == ["pay ann 5 r3:a"]  # eve's call still waits
    assert [w.digest for w in pending_approvals(app, "r3")] == [eve]
    approve(app, "r3", eve, approved=False, by="alice", reason="too much")
    assert handle.result(timeout=30) == "paid (2 requests)"
    assert CALLS == ["pay ann 5 r3:a"]  # refused: never ran
    outputs = [
        item
        for call in model.calls
        for item in call.input
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]
    assert any("not approved: too much" in json.dumps(o) for o in outputs)
    signals = [a for a in app.show("r3").audit if "signal" in a.action]
    assert signals, app.show("r3").audit
    app.close()


@function_tool
def wire(payee: str, cents: int, api_key: str, memo: str) -> str:
    """Wire money."""
    CALLS.append(f"wire {payee} {cents}")
    return f"wired {payee}"


def test_pending_approvals_show_the_call_with_secrets_redacted_as_the_logs_do(
    tmp_path: Path,
) -> None:
    """The listing masks what surefoot's logs mask (a secret-named argument, a key inside
    text); the digest still binds the real arguments, so approving it releases that call."""
    CALLS.clear()
    args = {"payee": "ann", "cents": 5, "api_key": "k-123", "memo": "key sk-abcdefghijklmnop"}
    model = ScriptedModel([[function_call("wire", args, call_id="w1")], [assistant_message("ok")]])
    app = durable.App(f"sqlite:///{tmp_path / 'runs.db'}")
    run = DurableRunner(app, approvals=["wire"])
    agent = Agent(name="bank", instructions="Pay.", model=model, tools=[wire])

    @app.workflow
    async def bank(q: str) -> str:
        return str((await run.run(agent, q)).final_output)

    handle = app.start(bank, "wire ann", run_id="r5")
    deadline = time.monotonic() + 30
    while handle.status() != "sleeping" and time.monotonic() < deadline:
        time.sleep(0.05)
    (call,) = pending_approvals(app, "r5")
    assert (call.tool, call.tool_call_id, call.kind) == ("wire", "w1", "approval")
    assert call.args == {
        "payee": "ann",
        "cents": 5,
        "api_key": "[redacted]",
        "memo": "key [redacted]",
    }
    assert call.digest == approval_digest("wire", json.dumps(args), "w1")
    assert call.signal == "approve:" + call.digest
    assert "k-123" not in repr(call) and "sk-abc" not in repr(call)
    approve(app, "r5", call.digest, by="alice")
    assert handle.result(timeout=30) == "ok"
    assert CALLS == ["wire ann 5"]
    app.close()


def test_outside_a_run_the_runner_refuses_and_the_key_too(tmp_path: Path) -> None:
    app = durable.App(f"sqlite:///{tmp_path / 'x.db'}")
    run = DurableRunner(app)
    agent = Agent(name="a", model=ScriptedModel([[assistant_message("x")]]))
    with pytest.raises(ConfigError, match="outside"):
        asyncio.run(run.run(agent, "hi"))
    with pytest.raises(ConfigError, match="outside a tool call"):
        idempotency_key()
    app.close()


def test_an_approval_that_is_not_a_bool_is_refused_and_the_run_keeps_waiting(
    tmp_path: Path,
) -> None:
    # approved="no" is truthy: taken as it came, it was sent, approve() said True, and the run
    # then failed reading it back as a bool. It is refused before anything is sent.
    CALLS.clear()
    call = function_call("pay", {"payee": "ann", "cents": 5}, call_id="a")
    model = ScriptedModel([[call], [assistant_message("paid")]])
    app, bank = _app(tmp_path, model, effects=["pay"], approvals=["pay"])
    handle = app.start(bank, "pay ann", run_id="r4")
    digest = approval_digest("pay", call.arguments, "a")
    deadline = time.monotonic() + 30
    while handle.status() != "sleeping" and time.monotonic() < deadline:
        time.sleep(0.05)
    for bad in ({"approved": "no"}, {"approved": 1}, {"by": 7}, {"reason": None}):
        with pytest.raises(ConfigError, match="approve") as err:
            approve(app, "r4", digest, **bad)
        assert repr(next(iter(bad.values()))) in str(err.value)
    assert [w.digest for w in pending_approvals(app, "r4")] == [digest]  # nothing was sent
    approve(app, "r4", digest, approved=False, by="alice")
    assert handle.result(timeout=30) == "paid (2 requests)"
    assert CALLS == []
    app.close()


def test_a_runner_given_bad_tool_names_or_made_twice_says_so(tmp_path: Path) -> None:
    # effects="pay" was taken letter by letter: pay ran with no intent row and no key
    app = durable.App(f"sqlite:///{tmp_path / 'runs.db'}")
    for kw, needle in (
        ({"effects": "pay"}, "'pay'"),
        ({"approvals": "pay"}, "'pay'"),
        ({"effects": ["pay", 3]}, "3"),
    ):
        with pytest.raises(ConfigError, match="tool names") as err:
            DurableRunner(app, **kw)  # type: ignore[arg-type]
        assert needle in str(err.value)
    runner = DurableRunner(app, effects=["pay"], approvals=None)
    assert runner.effects == {"pay"} and runner.approvals == frozenset()
    # a second runner on the same app said "step name ... is registered twice; pass name="
    with pytest.raises(ConfigError, match="one DurableRunner per App"):
        DurableRunner(app, effects=["balance"])
    app.close()
