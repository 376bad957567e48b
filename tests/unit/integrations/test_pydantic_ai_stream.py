"""A PydanticAI agent's text streamed to the surefoot run's token stream: ``emit_text`` as
the event stream handler of ``SurefootDurability``. The model is PydanticAI's FunctionModel
with a stream function (no server) that streams the text deltas each test scripts."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

if os.environ.get("SUREFOOT_REQUIRE_SERVICES") == "1":
    import pydantic_ai.durable_exec  # noqa: F401 - CI installs surefoot[pydantic-ai]
pytest.importorskip("pydantic_ai.durable_exec", reason="surefoot[pydantic-ai] is not installed")

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models.function import AgentInfo, FunctionModel

from surefoot import durable
from surefoot.durable import SimulatedCrash
from surefoot.integrations.pydantic_ai import SurefootDurability, emit_text, start

PIECES = ["The sky ", "scatters ", "blue ", "light."]
TEXT = "".join(PIECES)
REQUEST = "st__model.request_stream"


@pytest.fixture
def app(tmp_path: Path) -> Iterator[durable.App]:
    a = durable.App(f"sqlite:///{tmp_path / 'runs.db'}", poll=0.01, worker_id="t")
    yield a
    a.close()


def _model(streams: list[int], crash_on: int | None = None) -> FunctionModel:
    def whole(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise AssertionError("with an event stream handler every request streams")

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        streams.append(len(streams))
        for n, piece in enumerate(PIECES):
            yield piece
            if n == 1 and crash_on == len(streams):
                raise SimulatedCrash("mid_stream", "t2", "?", REQUEST)  # the worker dies here

    return FunctionModel(whole, stream_function=stream)


def _request_step(app: durable.App, run_id: str) -> Any:
    (step,) = [s for s in app.show(run_id).steps if s.name == REQUEST]
    return step


def _journalled_text(step: Any) -> str:
    parts = step.result["parts"]
    return "".join(p["content"] for p in parts if p.get("part_kind") == "text")


def test_emit_text_publishes_each_delta_inside_the_request_step_and_passes_events_on(
    app: durable.App,
) -> None:
    streams: list[int] = []
    seen: list[str] = []

    async def mine(ctx: Any, events: Any) -> None:
        async for event in events:
            seen.append(type(event).__name__)

    cap = SurefootDurability(app, event_stream_handler=emit_text(mine))
    agent = Agent(_model(streams), name="st", capabilities=[cap])
    handle = start(agent, "why is the sky blue?", run_id="t1")
    assert handle.result(timeout=30) == TEXT
    events = list(handle.stream())
    step = _request_step(app, "t1")
    tokens = [e.data for e in events if e.kind == "token"]
    # once each: the workflow-side replay of the model's events (PydanticAI dispatches them
    # again after the step) emits nothing
    assert tokens == PIECES and {e.step for e in events} == {REQUEST}
    assert durable.step_texts(events) == {step.pos: TEXT} and _journalled_text(step) == TEXT
    assert "PartDeltaEvent" in seen  # your handler still gets every event
    assert streams == [0]


def test_a_crash_mid_stream_resumes_behind_a_retry_marker_with_the_journalled_text(
    app: durable.App,
) -> None:
    streams: list[int] = []
    cap = SurefootDurability(app, event_stream_handler=emit_text())
    agent = Agent(_model(streams, crash_on=1), name="st", capabilities=[cap])
    handle = start(agent, "why is the sky blue?", run_id="t2")
    with pytest.raises(SimulatedCrash):
        handle.result(timeout=30)
    assert app.resume("t2").result(timeout=30) == TEXT
    events = list(handle.stream())
    kinds = [(e.kind, e.data) for e in events if e.kind in ("token", "retry")]
    assert kinds == [
        ("token", "The sky "),
        ("token", "scatters "),
        ("retry", None),
        *[("token", p) for p in PIECES],
    ]
    step = _request_step(app, "t2")
    assert durable.step_texts(events) == {step.pos: _journalled_text(step)} == {step.pos: TEXT}
    assert streams == [0, 1]
