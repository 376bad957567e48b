"""Streamed OpenAI Agents SDK runs on surefoot: ``runner.run(..., stream=True)`` and
``runner.run_streamed``. The model is the SDK's own ScriptedModel (no network), streaming
the text deltas each test scripts; readers follow them with ``handle.stream()``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")  # never export traces from tests
if os.environ.get("SUREFOOT_REQUIRE_SERVICES") == "1":
    import agents  # noqa: F401 - CI installs surefoot[openai-agents]
pytest.importorskip("agents", reason="surefoot[openai-agents] is not installed")

from agents import Agent, function_tool
from agents.testing.model import ModelStep, ScriptedModel, assistant_message, function_call
from openai.types.responses import Response, ResponseCompletedEvent, ResponseTextDeltaEvent

from surefoot import durable

MODEL = "openai_agents.model"
TOOL_RUNS: list[str] = []


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    TOOL_RUNS.append(city)
    return f"sunny in {city}"


def text_stream(pieces: list[str], response_id: str = "resp-1") -> ModelStep:
    """A scripted turn that streams ``pieces`` as text deltas, then completes with a message
    holding their concatenation."""
    message = assistant_message("".join(pieces))

    async def events(call: Any) -> Any:
        for n, piece in enumerate(pieces):
            yield ResponseTextDeltaEvent(
                type="response.output_text.delta",
                item_id="msg",
                output_index=0,
                content_index=0,
                delta=piece,
                logprobs=[],
                sequence_number=n,
            )
        done = Response(
            id=response_id,
            created_at=0,
            model="scripted-model",
            object="response",
            output=[message],
            tool_choice="none",
            tools=[],
            top_p=None,
            parallel_tool_calls=False,
            status="completed",
        )
        yield ResponseCompletedEvent(
            type="response.completed", response=done, sequence_number=len(pieces)
        )

    return ModelStep.stream(events)


PIECES = ["It is ", "sunny ", "in ", "Oslo", "."]


def _script() -> ScriptedModel:
    return ScriptedModel(
        [[function_call("weather", {"city": "Oslo"}, call_id="c1")], text_stream(PIECES)]
    )


def _model_positions(app: durable.App, run_id: str) -> list[Any]:
    return [s for s in app.show(run_id).steps if s.name == MODEL]


def test_a_streamed_run_publishes_each_text_delta_and_journals_the_same_text(
    tmp_path: Path,
) -> None:
    from surefoot.integrations.openai_agents import DurableRunner

    TOOL_RUNS.clear()
    model = _script()
    app = durable.App(f"sqlite:///{tmp_path / 'runs.db'}")
    runner = DurableRunner(app)
    agent = Agent(name="w", instructions="Weather.", model=model, tools=[weather])

    @app.workflow
    async def ask(q: str) -> str:
        result = await runner.run(agent, q, stream=True)
        return str(result.final_output)

    handle = app.start(ask, "weather in Oslo?", run_id="s1")
    events = list(handle.stream())
    assert handle.result(timeout=30) == "It is sunny in Oslo."
    steps = _model_positions(app, "s1")
    assert len(steps) == 2 and all(s.status == "done" for s in steps)
    last = steps[-1].pos
    tokens = [e.data for e in events if e.kind == "token" and e.pos == last]
    assert tokens == PIECES  # each delta, in order, as its own token
    journalled = steps[-1].result["output"][0]["content"][0]["text"]
    assert durable.step_texts(events)[last] == journalled == "It is sunny in Oslo."
    assert all(c.streamed for c in model.calls)  # the SDK's stream_response was used
    assert TOOL_RUNS == ["Oslo"]

    # a fork from the last turn replays the first turn and the tool from the journal: the
    # fork's stream carries tokens of the re-run turn only, nothing of the replayed one
    model.extend([text_stream(PIECES)])
    forked = app.fork("s1", last)
    assert forked.result(timeout=30) == "It is sunny in Oslo."
    fork_events = list(forked.stream())
    assert {e.pos for e in fork_events} == {last}
    assert [e.data for e in fork_events if e.kind == "token"] == PIECES
    assert TOOL_RUNS == ["Oslo"] and len(model.calls) == 3
    app.close()


def test_run_streamed_gives_the_sdk_stream_events_and_the_durable_stream(
    tmp_path: Path,
) -> None:
    from surefoot.integrations.openai_agents import DurableRunner

    TOOL_RUNS.clear()
    model = _script()
    app = durable.App(f"sqlite:///{tmp_path / 'runs.db'}")
    runner = DurableRunner(app)
    agent = Agent(name="w", instructions="Weather.", model=model, tools=[weather])
    seen: list[str] = []

    @app.workflow
    async def ask(q: str) -> str:
        result = runner.run_streamed(agent, q)
        async for event in result.stream_events():
            if event.type == "raw_response_event" and event.data.type.endswith("text.delta"):
                seen.append(event.data.delta)
        return f"{result.final_output} ({result.context_wrapper.usage.requests} requests)"

    handle = app.start(ask, "weather in Oslo?", run_id="s2")
    assert handle.result(timeout=30) == "It is sunny in Oslo. (2 requests)"
    assert seen == PIECES  # the SDK's own stream, live, from inside the step
    events = list(handle.stream())
    last = _model_positions(app, "s2")[-1]
    assert [e.data for e in events if e.kind == "token" and e.pos == last.pos] == PIECES
    assert durable.step_texts(events)[last.pos] == "It is sunny in Oslo."
    assert TOOL_RUNS == ["Oslo"]

    # replayed turns yield no deltas again: the fork's SDK stream has the re-run turn only
    seen.clear()
    model.extend([text_stream(PIECES)])
    forked = app.fork("s2", last.pos)
    assert forked.result(timeout=30) == "It is sunny in Oslo. (2 requests)"
    assert seen == PIECES and TOOL_RUNS == ["Oslo"]
    app.close()


def test_a_stream_that_fails_midway_is_retried_after_a_marker(tmp_path: Path) -> None:
    from surefoot.integrations.openai_agents import DurableRunner

    cut = ModelStep.stream(_cut_stream)
    model = ScriptedModel([cut, text_stream(["Hello, ", "world."])])
    app = durable.App(f"sqlite:///{tmp_path / 'runs.db'}")
    runner = DurableRunner(app, model_retry=2)
    agent = Agent(name="g", instructions="Greet.", model=model)

    @app.workflow
    async def greet() -> str:
        return str((await runner.run(agent, "hi", stream=True)).final_output)

    handle = app.start(greet, run_id="s3")
    assert handle.result(timeout=30) == "Hello, world."
    events = list(handle.stream())
    kinds = [(e.kind, e.attempt, e.data) for e in events if e.kind in ("token", "retry")]
    assert kinds == [
        ("token", 1, "Hel"),
        ("retry", 2, None),
        ("token", 2, "Hello, "),
        ("token", 2, "world."),
    ]
    assert list(durable.step_texts(events).values()) == ["Hello, world."]
    app.close()


async def _cut_stream(call: Any) -> Any:
    yield ResponseTextDeltaEvent(
        type="response.output_text.delta",
        item_id="msg",
        output_index=0,
        content_index=0,
        delta="Hel",
        logprobs=[],
        sequence_number=0,
    )
    raise ConnectionError("the model's stream was cut")


@pytest.mark.parametrize(
    ("events", "reason"),
    [
        (["response.output_text.delta", "response.failed"], "reported 'response.failed'"),
        (["response.output_text.delta"], "ended without response.completed"),
    ],
)
def test_a_stream_that_fails_or_never_completes_fails_the_step(
    events: list[str], reason: str
) -> None:
    """The step fails (and surefoot's retry policy decides), rather than journalling a turn
    the model never finished."""
    import asyncio
    from types import SimpleNamespace

    from surefoot.integrations.openai_agents._streaming import StreamedTurnError, streamed_call

    class Inner:
        async def stream_response(self, *a: Any, **k: Any) -> Any:
            for kind in events:
                yield SimpleNamespace(type=kind, delta="x")

    forwarded: list[Any] = []
    call = streamed_call(Inner(), (), {}, lambda r: {}, forwarded.append)
    with pytest.raises(StreamedTurnError, match=reason):
        asyncio.run(call())
    assert [e.type for e in forwarded] == ["response.output_text.delta"]
