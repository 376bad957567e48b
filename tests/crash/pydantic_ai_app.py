"""A PydanticAI agent durable on surefoot, for tests/crash/test_pydantic_ai_kill.py.

The model is PydanticAI's FunctionModel (a script; no server) and every call it and the
tools receive is appended to a ledger file (one JSON line each, fsynced) outside the
journal, so what was repeated is counted even across a SIGKILL. The script, one model
request per turn:

0. two lookups in parallel (``lookup`` Paris and Rome),
1. ``book`` Paris: an effect; its "service" applies a key once (``effect_applied``),
2. ``publish``: needs a person's approval,
3. the final answer.

``SF_PAI_HANG`` makes the worker hang (for the test to SIGKILL it) at one point:
``model:<turn>`` inside that model request, ``tool:Rome`` inside the Rome lookup,
``after_effect`` after ``book``'s service applied the effect (its result not journalled).

Served by ``surefoot worker --app pydantic_ai_app:app`` with ``SF_PAI_DB`` and
``SF_PAI_LEDGER`` set; the test builds the same app with ``build`` to enqueue and approve.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from surefoot import durable
from surefoot.integrations.pydantic_ai import SurefootDurability, current_effect_key


def note(ledger: Path, **event: Any) -> None:
    """Append one event to the ledger, on disk before this returns."""
    fd = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (json.dumps(event, sort_keys=True) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def read_ledger(ledger: Path) -> list[dict[str, Any]]:
    if not ledger.exists():
        return []
    return [json.loads(line) for line in ledger.read_text().splitlines() if line.strip()]


def _hang(ledger: Path, at: str) -> None:
    if os.environ.get("SF_PAI_HANG") == at:
        note(ledger, ev="hang", at=at)
        time.sleep(600)  # until the test kills this process


TURNS = [
    [
        ToolCallPart("lookup", {"city": "Paris"}, tool_call_id="l1"),
        ToolCallPart("lookup", {"city": "Rome"}, tool_call_id="l2"),
    ],
    [ToolCallPart("book", {"city": "Paris"}, tool_call_id="b1")],
    [ToolCallPart("publish", {"text": "trip to Paris"}, tool_call_id="p1")],
]


def build(url: str, ledger: Path) -> tuple[durable.App, Any]:
    """The app and the workflow ``trip`` running the agent (usage returned with the output)."""
    app = durable.App(url, lease=5.0, poll=0.05)

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = sum(isinstance(m, ModelResponse) for m in messages)
        note(ledger, ev="model", turn=turn)
        _hang(ledger, f"model:{turn}")
        if turn < len(TURNS):
            return ModelResponse(parts=list(TURNS[turn]))
        return ModelResponse(parts=[TextPart("booked and published")])

    agent = Agent(FunctionModel(model), name="trip", capabilities=[SurefootDurability(app)])

    @agent.tool_plain
    def lookup(city: str) -> str:
        note(ledger, ev="tool", tool="lookup", city=city)
        if city == "Rome":
            _hang(ledger, "tool:Rome")
        return f"{city}: sunny"

    @agent.tool_plain(metadata={"surefoot": {"effect": True}})
    def book(city: str) -> str:
        key = current_effect_key()
        note(ledger, ev="effect_request", key=key)
        applied = {e["key"] for e in read_ledger(ledger) if e["ev"] == "effect_applied"}
        if key not in applied:  # the service deduplicates by key
            note(ledger, ev="effect_applied", key=key, city=city)
        _hang(ledger, "after_effect")
        return f"booked {city} ({key})"

    @agent.tool_plain(requires_approval=True)
    def publish(text: str) -> str:
        note(ledger, ev="tool", tool="publish", text=text)
        return "published"

    @app.workflow
    async def trip(prompt: str) -> dict[str, Any]:
        result = await agent.run(prompt)
        usage = result.usage()
        return {
            "output": result.output,
            "requests": usage.requests,
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
        }

    return app, trip


if os.environ.get("SF_PAI_DB"):
    app, trip = build(os.environ["SF_PAI_DB"], Path(os.environ["SF_PAI_LEDGER"]))
