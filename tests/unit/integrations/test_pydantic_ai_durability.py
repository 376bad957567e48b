"""SurefootDurability end to end, in one process: the agent's model is PydanticAI's
FunctionModel (a script of tool calls; no server), and what it and the tools received is
counted in lists the test reads. The crash tests with real processes are in
tests/crash/test_pydantic_ai_kill.py."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

if os.environ.get("SUREFOOT_REQUIRE_SERVICES") == "1":
    import pydantic_ai.durable_exec  # noqa: F401 - CI installs surefoot[pydantic-ai]
pytest.importorskip("pydantic_ai.durable_exec", reason="surefoot[pydantic-ai] is not installed")

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from surefoot import durable
from surefoot.durable import CrashPlan, SimulatedCrash
from surefoot.errors import ConfigError
from surefoot.integrations.pydantic_ai import (
    SurefootDurability,
    approve,
    call_digest,
    current_effect_key,
    enqueue,
    pending_approvals,
    start,
)


@pytest.fixture
def app(tmp_path: Path) -> Iterator[durable.App]:
    a = durable.App(f"sqlite:///{tmp_path / 'runs.db'}", poll=0.01, worker_id="t")
    yield a
    a.close()


def _turn(messages: list[ModelMessage]) -> int:
    """How many model responses the history holds already (0 on the first request)."""
    return sum(isinstance(m, ModelResponse) for m in messages)


def scripted(turns: list[list[ToolCallPart]], calls: list[int]) -> FunctionModel:
    """A model that answers turn i with ``turns[i]`` (tool calls), then with text."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        n = _turn(messages)
        calls.append(n)
        if n < len(turns):
            return ModelResponse(parts=list(turns[n]))
        return ModelResponse(parts=[TextPart(f"done after {n} turns")])

    return FunctionModel(model)


def steps(app: durable.App, run_id: str) -> list[tuple[str, str, str]]:
    return [(s.pos, s.name, s.kind) for s in app.show(run_id).steps]


def test_a_run_is_a_workflow_whose_model_requests_and_tool_calls_are_steps(
    app: durable.App,
) -> None:
    """Each model request and tool call is one journalled step; starting the finished run
    again returns its result without calling the model or the tool."""
    calls: list[int] = []
    looked: list[str] = []
    model = scripted([[ToolCallPart("lookup", {"city": "Paris"}, tool_call_id="c1")]], calls)
    agent = Agent(model, name="geo", capabilities=[SurefootDurability(app)])

    @agent.tool_plain
    def lookup(city: str) -> str:
        looked.append(city)
        return f"{city} is in France"

    out = start(agent, "where is Paris?", run_id="r1").result(timeout=30)
    assert out == "done after 1 turns"
    assert [(name, kind) for _, name, kind in steps(app, "r1")] == [
        ("geo__operations", "pure"),
        ("geo__model.request", "pure"),
        ("geo__function_toolset__<agent>.call_tool:lookup", "pure"),
        ("geo__model.request", "pure"),
    ]
    assert calls == [0, 1] and looked == ["Paris"]
    assert start(agent, "where is Paris?", run_id="r1").result(timeout=30) == out
    assert calls == [0, 1] and looked == ["Paris"]  # nothing ran again


def test_an_enqueued_run_waits_for_a_worker_and_keeps_its_history(app: durable.App) -> None:
    """``enqueue`` records the run (and the history it continues) for a worker."""
    from pydantic_ai.messages import ModelRequest, UserPromptPart

    seen: list[int] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(len(messages))
        return ModelResponse(parts=[TextPart(f"{len(messages)} messages")])

    agent = Agent(FunctionModel(model), name="q", capabilities=[SurefootDurability(app)])
    earlier = [ModelRequest(parts=[UserPromptPart("hello")]), ModelResponse(parts=[TextPart("hi")])]
    handle = enqueue(agent, "and now?", run_id="q1", message_history=earlier)
    assert handle.status() == "pending" and seen == []
    assert durable.Worker(app).run_once(timeout=30) == 1
    assert handle.result(timeout=10) == "3 messages" and seen == [3]


def test_an_engine_url_is_refused_with_what_to_use_instead() -> None:
    app = durable.App("temporal://127.0.0.1:7233?task_queue=q")
    with pytest.raises(ConfigError, match="TemporalDurability"):
        Agent(scripted([], []), name="t", capabilities=[SurefootDurability(app)])


def test_outside_a_run_the_agent_runs_as_without_the_capability(app: durable.App) -> None:
    calls: list[int] = []
    agent = Agent(scripted([], calls), name="plain", capabilities=[SurefootDurability(app)])
    try:
        assert agent.run_sync("hi").output == "done after 0 turns"
    finally:
        # run_sync runs on asyncio.get_event_loop(): a loop made for this thread and never
        # closed, left to the garbage collector when a later asyncio.run replaces it (an
        # "unclosed event loop" ResourceWarning in whichever test that is).
        asyncio.get_event_loop_policy().get_event_loop().close()
        asyncio.set_event_loop(None)
    with pytest.raises(ConfigError, match="holds no durable journal"):
        app.list_runs()  # nothing was journalled: not even the journal was created


def test_an_effect_tool_gets_a_key_from_the_run_and_the_tool_call_id_again_on_resume(
    app: durable.App,
) -> None:
    """Killed after the effect acted and before its result was journalled: the resumed
    run calls it again with the same key (the service dedups it), and the model requests
    that finished are not repeated."""
    calls: list[int] = []
    keys: list[str] = []
    posted: dict[str, str] = {}
    model = scripted([[ToolCallPart("post", {"text": "hello"}, tool_call_id="call-7")]], calls)
    agent = Agent(model, name="poster", capabilities=[SurefootDurability(app)])

    @agent.tool_plain(metadata={"surefoot": {"effect": True}})
    def post(text: str) -> str:
        key = current_effect_key()
        keys.append(key)
        posted.setdefault(key, text)  # the service deduplicates by key
        return f"posted {text}"

    name = "poster__function_toolset__<agent>.call_tool:post"
    app.crash = CrashPlan("after_effect", step=name)
    handle = start(agent, "post hello", run_id="e1")
    with pytest.raises(SimulatedCrash):
        handle.result(timeout=30)
    app.crash = None
    assert keys == ["e1:call-7"] and calls == [0]
    assert app.resume("e1").result(timeout=30) == "done after 1 turns"
    assert keys == ["e1:call-7", "e1:call-7"]  # the same key on the rerun
    assert posted == {"e1:call-7": "hello"}  # one effect
    assert calls == [0, 1]  # the first request was replayed, not sent again
    kinds = {name: kind for _, name, kind in steps(app, "e1")}
    assert kinds[name] == "effect"


def test_current_effect_key_outside_an_effect_tool_says_how_to_declare_one() -> None:
    with pytest.raises(ConfigError, match="effect"):
        current_effect_key()


def _parallel_agent(app: durable.App, done: list[str]) -> Agent[None, str]:
    parts = [ToolCallPart("wait", {"n": n}, tool_call_id=f"w{n}") for n in (3, 2, 1)]
    agent = Agent(scripted([parts], []), name="par", capabilities=[SurefootDurability(app)])

    @agent.tool_plain
    async def wait(n: int) -> int:
        await asyncio.sleep(n * 0.05)
        done.append(f"w{n}")
        return n

    return agent


def _tool_positions(app: durable.App, run_id: str) -> list[tuple[str, Any]]:
    def order(pos: str) -> list[int]:
        return [int(x) for x in pos.split(".")]

    rows = sorted(app.show(run_id).steps, key=lambda s: order(s.pos))
    return [(s.pos, s.result["result"]) for s in rows if "wait" in s.name]


def test_parallel_tool_calls_are_journalled_in_the_order_the_model_asked(
    app: durable.App, tmp_path: Path
) -> None:
    """Three calls in one response finish in reverse order; their steps take positions in
    the order the model asked. Crashed right after the first one to finish was journalled,
    the resumed run finds it at its position and journals the other two where an
    uninterrupted run does."""
    done: list[str] = []
    control = durable.App(f"sqlite:///{tmp_path / 'control.db'}", poll=0.01)
    try:
        start(_parallel_agent(control, done), "go", run_id="p1").result(timeout=30)
        expected = _tool_positions(control, "p1")
    finally:
        control.close()
    assert done == ["w1", "w2", "w3"]  # they finished in reverse order
    assert [n for _, n in expected] == [3, 2, 1]  # journalled in the order asked

    done.clear()
    agent = _parallel_agent(app, done)
    app.crash = CrashPlan("after_journal", step="par__function_toolset__<agent>.call_tool:wait")
    with pytest.raises(SimulatedCrash):
        start(agent, "go", run_id="p1").result(timeout=30)
    assert done[0] == "w1"
    app.crash = None
    assert app.resume("p1").result(timeout=30) == "done after 1 turns"
    assert _tool_positions(app, "p1") == expected


def _approval_agent(app: durable.App, ran: list[tuple[str, int]]) -> Agent[None, str]:
    parts = [
        ToolCallPart("transfer", {"to": "ann", "amount": 10}, tool_call_id="t1"),
        ToolCallPart("transfer", {"to": "bob", "amount": 99}, tool_call_id="t2"),
    ]
    agent = Agent(scripted([parts], []), name="bank", capabilities=[SurefootDurability(app)])

    @agent.tool_plain(requires_approval=True)
    def transfer(to: str, amount: int) -> str:
        ran.append((to, amount))
        return f"sent {amount} to {to}"

    return agent


def test_an_approval_releases_exactly_the_call_it_names(app: durable.App) -> None:
    """Two calls wait for approval as signals bound to a digest of the call: an approval
    of one never releases the other, a digest of other arguments is refused, a decision
    is given once, and each decision is in the audit log."""
    ran: list[tuple[str, int]] = []
    handle = start(_approval_agent(app, ran), "pay", run_id="b1")
    for _ in range(1000):
        if len(pending_approvals(app, "b1")) == 2 and handle.status() == "sleeping":
            break
        time.sleep(0.01)
    waiting = pending_approvals(app, "b1")
    assert [(w.tool, w.args) for w in waiting] == [
        ("transfer", {"to": "ann", "amount": 10}),
        ("transfer", {"to": "bob", "amount": 99}),
    ]
    ann, bob = waiting
    assert ann.digest == call_digest("b1", "t1", "transfer", {"amount": 10, "to": "ann"})
    assert app.show("b1").run.status == "sleeping" and ran == []  # holding no worker

    # the same call id with other arguments is another call: refused, nothing sent
    forged = call_digest("b1", "t2", "transfer", {"to": "bob", "amount": 99_999})
    with pytest.raises(ConfigError, match="no tool call waiting"):
        approve(app, "b1", forged, by="mallory")

    # approving bob's call does not release ann's: the run still waits, nothing ran
    assert approve(app, "b1", bob.digest, by="ann", approved=False, reason="too much")
    app.resume("b1")
    assert ran == []
    assert [w.digest for w in pending_approvals(app, "b1")] == [ann.digest]
    assert not approve(app, "b1", bob.digest, by="eve")  # decided once; the first stands

    assert approve(app, "b1", ann.digest, by="carol")
    assert app.resume("b1").result(timeout=30) == "done after 1 turns"
    assert ran == [("ann", 10)]  # bob's transfer was denied
    audit = [
        (a.actor, a.action, a.detail)
        for a in app.show("b1").audit
        if a.action in ("approval", "denial")
    ]
    assert [(actor, action, d["tool_call_id"], d["approved"]) for actor, action, d in audit] == [
        ("ann", "denial", "t2", False),
        ("carol", "approval", "t1", True),
    ]
    assert audit[0][2]["reason"] == "too much"


def test_pending_approvals_show_secrets_redacted_as_the_logs_do(app: durable.App) -> None:
    """The listing masks what surefoot's logs mask (a secret-named argument, a key inside
    text); the digest binds the real arguments, and the tool runs with them."""
    ran: list[str] = []
    args = {"to": "ann", "password": "hunter2", "memo": "token=abc123"}
    agent = Agent(
        scripted([[ToolCallPart("login", args, tool_call_id="g1")]], []),
        name="gate",
        capabilities=[SurefootDurability(app)],
    )

    @agent.tool_plain(requires_approval=True)
    def login(to: str, password: str, memo: str) -> str:
        ran.append(password)
        return "in"

    handle = start(agent, "log in", run_id="g")
    for _ in range(1000):
        if pending_approvals(app, "g") and handle.status() == "sleeping":
            break
        time.sleep(0.01)
    (call,) = pending_approvals(app, "g")
    assert (call.tool, call.tool_call_id) == ("login", "g1")
    assert call.args == {"to": "ann", "password": "[redacted]", "memo": "token=[redacted]"}
    assert call.digest == call_digest("g", "g1", "login", args)
    assert approve(app, "g", call.digest, by="ann")
    assert app.resume("g").result(timeout=30) == "done after 1 turns"
    assert ran == ["hunter2"]


# The persisted names: changing one strands every run in flight. Never update these pins
# as part of a rename unless migrating in-flight runs is intended and reviewed.
PINNED = [
    "approval.request",
    "bank__function_toolset__<agent>.call_tool:lookup",
    "bank__function_toolset__<agent>.call_tool:pay",
    "bank__function_toolset__<agent>.call_tool:transfer",
    "bank__model.request",
    "bank__operations",
    "signal:approve:<digest>",
]
PINNED_OPERATIONS = [
    "bank__function_toolset__<agent>.call_tool:lookup",
    "bank__function_toolset__<agent>.call_tool:pay [effect]",
    "bank__function_toolset__<agent>.call_tool:transfer [approval]",
    "bank__model.request",
]


def _bank(app: durable.App, *, pay_is_effect: bool = True) -> Agent[None, str]:
    turns = [
        [ToolCallPart("lookup", {"who": "ann"}, tool_call_id="l1")],
        [ToolCallPart("pay", {"to": "ann"}, tool_call_id="p1")],
        [ToolCallPart("transfer", {"to": "ann", "amount": 1}, tool_call_id="t1")],
    ]
    agent = Agent(scripted(turns, []), name="bank", capabilities=[SurefootDurability(app)])

    @agent.tool_plain
    def lookup(who: str) -> str:
        return f"{who}: ok"

    @agent.tool_plain(metadata={"surefoot": {"effect": pay_is_effect}})
    def pay(to: str) -> str:
        return f"paid {to} with key {current_effect_key() if pay_is_effect else None}"

    @agent.tool_plain(requires_approval=True)
    def transfer(to: str, amount: int) -> str:
        return f"sent {amount} to {to}"

    return agent


def _wait_status(app: durable.App, run_id: str, status: str) -> None:
    for _ in range(2000):
        if app.show(run_id).run.status == status:
            return
        time.sleep(0.01)
    raise AssertionError(f"{run_id} is {app.show(run_id).run.status}, not {status}")


def test_the_persisted_operation_names_are_pinned(app: durable.App) -> None:
    """Every step name an agent with a tool, an effect and an approval journals, and the
    operations it records at its start."""
    agent = _bank(app)
    start(agent, "go", run_id="n1")
    _wait_status(app, "n1", "sleeping")
    (waiting,) = pending_approvals(app, "n1")
    approve(app, "n1", waiting.digest, by="ann")
    assert app.resume("n1").result(timeout=30) == "done after 3 turns"
    names = {s.name for s in app.show("n1").steps}
    names = {"signal:approve:<digest>" if n.startswith("signal:approve:") else n for n in names}
    assert sorted(names) == PINNED
    assert app.show("n1").steps[0].result == PINNED_OPERATIONS
    kinds = {s.name: s.kind for s in app.show("n1").steps}
    assert kinds["bank__function_toolset__<agent>.call_tool:pay"] == "effect"


def test_with_an_event_handler_model_requests_stream_and_each_event_is_a_step(
    app: durable.App,
) -> None:
    """PydanticAI's TestModel (it streams); the handler's calls are steps, pinned too."""
    from pydantic_ai.models.test import TestModel

    seen: list[str] = []

    async def handler(ctx: Any, events: Any) -> None:
        async for event in events:
            seen.append(type(event).__name__)

    cap = SurefootDurability(app, event_stream_handler=handler)
    agent = Agent(TestModel(), name="ev", capabilities=[cap])

    @agent.tool_plain
    def ping() -> str:
        return "pong"

    assert start(agent, "hi", run_id="ev1").result(timeout=30) == '{"ping":"pong"}'
    assert sorted({s.name for s in app.show("ev1").steps}) == [
        "ev__event_stream_handler",
        "ev__function_toolset__<agent>.call_tool:ping",
        "ev__model.request_stream",
        "ev__operations",
    ]
    assert "FunctionToolCallEvent" in seen and "FunctionToolResultEvent" in seen


def test_a_run_replayed_under_a_changed_agent_stops_for_attention(
    app: durable.App, tmp_path: Path
) -> None:
    """The run waits for approval; the agent's code changes (``pay`` is no longer an
    effect); resumed under the new code the run stops in needs_attention with
    StepMismatchError naming what changed, and nothing of it runs again."""
    start(_bank(app), "go", run_id="v1")
    _wait_status(app, "v1", "sleeping")
    (waiting,) = pending_approvals(app, "v1")
    approve(app, "v1", waiting.digest, by="ann")
    app.close()

    changed = durable.App(app.url, poll=0.01, worker_id="t2")
    try:
        _bank(changed, pay_is_effect=False)
        changed.resume("v1")
        _wait_status(changed, "v1", "needs_attention")
        error = changed.show("v1").run.error
        assert "StepMismatchError" in error["type"]
        assert "call_tool:pay [effect]" in error["message"]
    finally:
        changed.close()


def test_the_model_sdk_does_not_retry_surefoots_retry_policy_does(app: durable.App) -> None:
    """Over the real OpenAI SDK against surefoot's FakeProvider: a 503 then a reply. The
    SDK sends each request once (its retries are off inside a run); the model request
    step makes the second attempt, journalled with attempts=2."""
    from openai import AsyncOpenAI
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from surefoot.resilience import Backoff, RetryPolicy
    from surefoot.testing import FakeProvider, Status

    with FakeProvider() as fp:
        fp.script(Status(503))
        client = AsyncOpenAI(base_url=fp.openai_url, api_key="sk-test", max_retries=2)
        model = OpenAIChatModel("fake", provider=OpenAIProvider(openai_client=client))
        policy = RetryPolicy(max_attempts=3, backoff=Backoff(base=0.01, cap=0.02))
        agent = Agent(model, name="sdk", capabilities=[SurefootDurability(app, model_retry=policy)])
        result = start(agent, "hello", run_id="s1").result(timeout=30)
        assert result == fp.text_for("openai", fp.received[-1].messages)
        assert [r.fault for r in fp.received] == ["503", "ok"]
        assert [r.retry_count for r in fp.received] == [0, 0]  # two first tries, no SDK retry

        @app.workflow
        async def close_client() -> None:  # on the loop the client's connections live on
            await client.close()

        app.start(close_client).result(timeout=10)
    (req,) = [s for s in app.show("s1").steps if s.name == "sdk__model.request"]
    assert req.attempts == 2


def test_a_replay_emits_no_span_for_work_it_did_not_execute(app: durable.App) -> None:
    """PydanticAI's own OpenTelemetry spans: crashed before its tool ran, the run is
    resumed; the resumed execution replays the first model request from the journal and
    exports no ``chat`` span for it, only for the request it makes."""
    pytest.importorskip("opentelemetry.sdk", reason="surefoot[otel] is not installed")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from pydantic_ai import InstrumentationSettings

    exported = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exported))
    calls: list[int] = []
    model = scripted([[ToolCallPart("ping", {}, tool_call_id="c1")]], calls)
    agent = Agent(model, name="sp", capabilities=[SurefootDurability(app)])
    agent.instrument = InstrumentationSettings(tracer_provider=provider)

    @agent.tool_plain
    def ping() -> str:
        return "pong"

    app.crash = CrashPlan("before_step", step="sp__function_toolset__<agent>.call_tool:ping")
    with pytest.raises(SimulatedCrash):
        start(agent, "go", run_id="s1").result(timeout=30)
    app.crash = None
    assert [s.name for s in exported.get_finished_spans()].count("chat function:model:") == 1
    exported.clear()
    assert app.resume("s1").result(timeout=30) == "done after 1 turns"
    assert calls == [0, 1]  # the resumed execution made one request
    names = [s.name for s in exported.get_finished_spans()]
    assert names.count("chat function:model:") == 1  # not 2: the replayed one has none
    assert names.count("execute_tool ping") == 1 and names.count("invoke_agent sp") == 1
    provider.shutdown()


def test_agent_runs_of_one_workflow_get_their_own_ids_and_effect_keys(app: durable.App) -> None:
    """A workflow holding two agent runs (a conversation) whose model reuses a tool call
    id: each agent run has its own id, so the effect keys differ; replayed, the same."""
    keys: list[str] = []
    model = scripted([[ToolCallPart("post", {"text": "x"}, tool_call_id="same")]], [])
    agent = Agent(model, name="conv", capabilities=[SurefootDurability(app)])

    @agent.tool_plain(metadata={"surefoot": {"effect": True}})
    def post(text: str) -> str:
        keys.append(current_effect_key())
        return "ok"

    @app.workflow
    async def chat() -> list[str]:
        first = await agent.run("one")
        second = await agent.run("two")  # a fresh history: the model calls `post` again
        return [first.run_id, second.run_id]

    assert app.start(chat, run_id="w").result(timeout=30) == ["w", "w:2"]
    assert keys == ["w:same", "w:2:same"]
    names = [s.name for s in app.show("w").steps]
    assert names.count("conv__operations") == 1  # checked once per run, not per agent run


def test_an_external_call_waits_for_its_result_delivered_by_digest(app: durable.App) -> None:
    """A tool that defers its call (``CallDeferred``) waits, holding no worker, for the
    result ``deliver`` hands it under the call's digest; the model gets that result."""
    from pydantic_ai.exceptions import CallDeferred
    from pydantic_ai.messages import ToolReturnPart

    from surefoot.integrations.pydantic_ai import deliver, pending_results

    got: list[Any] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if _turn(messages) == 0:
            return ModelResponse(parts=[ToolCallPart("render", {"doc": "q3"}, tool_call_id="x1")])
        returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        got.extend(p.content for p in returns)
        return ModelResponse(parts=[TextPart("rendered")])

    agent = Agent(FunctionModel(model), name="ext", capabilities=[SurefootDurability(app)])

    @agent.tool_plain
    def render(doc: str) -> str:
        raise CallDeferred  # made by another system, which delivers the result

    start(agent, "render q3", run_id="x")
    _wait_status(app, "x", "sleeping")
    assert pending_approvals(app, "x") == []
    (call,) = pending_results(app, "x")
    assert (call.tool, call.args, call.kind) == ("render", {"doc": "q3"}, "external")
    with pytest.raises(ConfigError, match="no tool call waiting"):
        deliver(app, "x", call_digest("x", "x1", "render", {"doc": "q4"}), "pdf", by="svc")
    assert deliver(app, "x", call.digest, {"pages": 3}, by="renderer")
    assert app.resume("x").result(timeout=30) == "rendered"
    assert got == [{"pages": 3}]
    (entry,) = [a for a in app.show("x").audit if a.action == "external_result"]
    assert entry.actor == "renderer" and entry.detail["tool_call_id"] == "x1"
