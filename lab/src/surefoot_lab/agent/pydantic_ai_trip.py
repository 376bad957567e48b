"""A PydanticAI agent durable on surefoot, served by ``surefoot worker`` for the lab.

``durable.frameworks`` (seed 002's Hard 1 and Hard 2 on a PydanticAI agent) SIGKILLs these
workers at random. The model is PydanticAI's ``FunctionModel`` running a script (no server),
or, with ``SUREFOOT_LAB_LLM_URL`` and ``SUREFOOT_LAB_LLM_MODEL`` set, the script's last
request is answered by that OpenAI-compatible model (the lab's ``--llm local``). Every model
request and tool call is appended to a ledger file (one JSON line, fsynced) outside the
journal, so what a crash repeated is counted by the "services", not by surefoot. Per run:

0. two ``lookup`` calls at once (Paris, Rome);
1. ``book`` Paris: an effect with surefoot's key; the service applies each key once;
2. the final answer.

    SUREFOOT_LAB_PAI_DB=sqlite:///… SUREFOOT_LAB_PAI_LEDGER=… \\
        surefoot worker --db … --app surefoot_lab.agent.pydantic_ai_trip:app

``SUREFOOT_LAB_PAI_DELAY`` (seconds, default 0.05) is how long each model request and tool
call takes, so that kills land inside them.

``trip_agent`` builds the same agent (script, tools, ledger) under any durability capability:
``_dbos_trip`` runs it under PydanticAI's ``DBOSDurability``,
``_temporal_trip`` under its ``TemporalDurability``, so the three engines are
measured on one agent.
"""

# no ``from __future__ import annotations``: PydanticAI reads the tools' annotations at run
# time, and ``RunContext`` is imported inside ``trip_agent`` (the extra is imported lazily)

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from surefoot import durable

__all__ = [
    "MODEL_REQUESTS",
    "TEMPORAL_HEARTBEAT_S",
    "TEMPORAL_STICKY_S",
    "build",
    "hand_made_key",
    "read_ledger",
    "trip_agent",
]

MODEL_REQUESTS = 3
"""Model requests of one run that nothing repeated."""
TEMPORAL_HEARTBEAT_S = 2.0
"""The heartbeat timeout of the Temporal workers' activities (``_temporal_trip``)."""
TEMPORAL_STICKY_S = 1.0
"""How long a workflow task waits on a dead Temporal worker's sticky queue."""


def _note(ledger: Path, **event: Any) -> None:
    """Append one event (with the worker's pid and the wall time) to the ledger, on disk before
    this returns."""
    fd = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        line = json.dumps({**event, "pid": os.getpid(), "t": time.time()}, sort_keys=True)
        os.write(fd, (line + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def read_ledger(ledger: Path) -> list[dict[str, Any]]:
    """The ledger's events, in the order they were written."""
    if not ledger.exists():
        return []
    return [json.loads(line) for line in ledger.read_text().splitlines() if line.strip()]


def _real_answer(prompt: str) -> str:
    """The final answer from the real model named in the environment (a surefoot.llm client)."""
    from surefoot.llm import connect

    client = connect(
        "openai",
        os.environ["SUREFOOT_LAB_LLM_MODEL"],
        base_url=os.environ["SUREFOOT_LAB_LLM_URL"],
        api_key=os.environ.get("OPENAI_API_KEY") or None,
        max_tokens=48,
    )
    messages = [{"role": "user", "content": prompt}]
    resp = client.create(messages=messages, temperature=0, max_tokens=48)
    return str(resp.choices[0].message.content)


def hand_made_key(ctx: Any, run: str) -> str:
    """The booking's key as a DBOS or Temporal user builds it (their engines give a tool none):
    the run and the model's tool call id."""
    return f"{run}:{ctx.tool_call_id}"


def trip_agent(
    ledger: Path,
    *,
    delay: float,
    capabilities: list[Any],
    key: Callable[[Any, str], str] = hand_made_key,
    book_metadata: dict[str, Any] | None = None,
) -> Any:
    """The trip agent (PydanticAI ``Agent`` named ``trip``) under ``capabilities``: its
    scripted model and tools write to ``ledger``; ``key(ctx, run)`` is the booking's
    idempotency key; ``book_metadata`` goes on the ``book`` tool (surefoot: an effect)."""
    from pydantic_ai import Agent, RunContext
    from pydantic_ai.messages import (
        ModelMessage,
        ModelResponse,
        TextPart,
        ToolCallPart,
        UserPromptPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        first = messages[0].parts[0]
        run = str(first.content).split()[-1] if isinstance(first, UserPromptPart) else "?"
        turn = sum(isinstance(m, ModelResponse) for m in messages)
        _note(ledger, ev="model", run=run, turn=turn)
        time.sleep(delay)
        if turn == 0:
            return ModelResponse(
                parts=[
                    ToolCallPart("lookup", {"city": "Paris", "run": run}, tool_call_id="l1"),
                    ToolCallPart("lookup", {"city": "Rome", "run": run}, tool_call_id="l2"),
                ]
            )
        if turn == 1:
            return ModelResponse(
                parts=[ToolCallPart("book", {"city": "Paris", "run": run}, tool_call_id="b1")]
            )
        if os.environ.get("SUREFOOT_LAB_LLM_URL"):
            text = _real_answer("In one sentence, confirm a booked trip to Paris.")
            _note(ledger, ev="llm", run=run, chars=len(text))
        else:
            text = f"booked Paris for {run}"
        return ModelResponse(parts=[TextPart(text)])

    agent = Agent(FunctionModel(model), name="trip", capabilities=capabilities)

    @agent.tool_plain
    def lookup(city: str, run: str) -> str:
        _note(ledger, ev="tool", tool="lookup", run=run, city=city)
        time.sleep(delay)
        return f"{city}: sunny"

    @agent.tool(metadata=book_metadata)
    def book(ctx: RunContext[None], city: str, run: str) -> str:
        k = key(ctx, run)
        _note(ledger, ev="effect_request", run=run, key=k)
        applied = {e["key"] for e in read_ledger(ledger) if e["ev"] == "effect_applied"}
        if k not in applied:  # the booking service applies a key once
            _note(ledger, ev="effect_applied", run=run, key=k)
        time.sleep(delay)
        return f"booked {city} ({k})"

    return agent


def build(url: str, ledger: Path, *, delay: float = 0.05) -> tuple[durable.App, Any]:
    """The app and its workflow ``trip(run)``: one agent run, its usage returned."""
    from surefoot.integrations.pydantic_ai import SurefootDurability, current_effect_key

    app = durable.App(url, lease=2.0, poll=0.05)
    agent = trip_agent(
        ledger,
        delay=delay,
        capabilities=[SurefootDurability(app)],
        key=lambda ctx, run: current_effect_key(),
        book_metadata={"surefoot": {"effect": True}},
    )

    @app.workflow
    async def trip(run: str) -> dict[str, Any]:
        result = await agent.run(f"plan a trip for {run}")
        return {"output": result.output, "requests": result.usage().requests}

    return app, trip


if os.environ.get("SUREFOOT_LAB_PAI_DB"):
    app, trip = build(
        os.environ["SUREFOOT_LAB_PAI_DB"],
        Path(os.environ["SUREFOOT_LAB_PAI_LEDGER"]),
        delay=float(os.environ.get("SUREFOOT_LAB_PAI_DELAY", "0.05")),
    )
