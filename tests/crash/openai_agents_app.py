"""An OpenAI Agents SDK agent on surefoot, for the real-process crash tests.

The model is a deterministic stand-in (no network): it reads the conversation and answers
the next turn, and appends one line per request it serves to the ledger named by
``AGENTS_LEDGER`` (``model <turn>``); the tools append theirs (``lookup``, ``refund <key>``).
``AGENTS_PAUSE=<point>`` makes the process sleep at that point so a test can SIGKILL it there:
``model`` (inside a model request), ``tool`` (inside the read-only tool), ``effect`` (after the
refund's effect is in the ledger, before its step is journalled).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from agents import Agent, Model, function_tool
from agents.items import ModelResponse
from agents.testing.model import assistant_message, function_call
from agents.usage import Usage

from surefoot import durable
from surefoot.integrations.openai_agents import DurableRunner, idempotency_key

LEDGER = Path(os.environ.get("AGENTS_LEDGER", "ledger.txt"))
PAUSE = os.environ.get("AGENTS_PAUSE", "")


def _note(line: str) -> None:
    with LEDGER.open("a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def _pause(point: str) -> None:
    if point == PAUSE:
        _note(f"paused {point}")
        time.sleep(60)


class PolicyModel(Model):
    """Turn 1: look two orders up in parallel. Turn 2: refund one. Turn 3: answer."""

    async def get_response(self, system_instructions: Any, input: Any, *a: Any, **k: Any) -> Any:
        items = input if isinstance(input, list) else []
        outputs = sum(1 for it in items if _kind(it) == "function_call_output")
        turn = 1 if outputs == 0 else 2 if outputs == 2 else 3
        _note(f"model {turn}")
        _pause("model")
        if turn == 1:
            output = [
                function_call("lookup", {"order": "A1"}, call_id="call_a"),
                function_call("lookup", {"order": "B2"}, call_id="call_b"),
            ]
        elif turn == 2:
            output = [function_call("refund", {"order": "A1", "cents": 500}, call_id="call_r")]
        else:
            output = [assistant_message("Refunded A1.")]
        return ModelResponse(
            output=output, usage=Usage(requests=1, total_tokens=10), response_id=None
        )

    def stream_response(self, *a: Any, **k: Any) -> Any:
        raise NotImplementedError


def _kind(item: Any) -> str:
    return str(item.get("type", "")) if isinstance(item, dict) else str(getattr(item, "type", ""))


@function_tool
def lookup(order: str) -> str:
    """Look an order up."""
    _note(f"lookup {order}")
    if order == "B2":  # A1 completes beside it; B2 is in flight at the kill
        _pause("tool")
    return f"{order}: paid 5.00"


@function_tool
def refund(order: str, cents: int) -> str:
    """Refund an order."""
    _note(f"refund {order} {cents} {idempotency_key()}")
    _pause("effect")
    return f"refunded {cents} on {order}"


app = durable.App(lease=2.0)  # a killed holder's run moves within 2 s
runner = DurableRunner(
    app, effects=["refund"], approvals=os.environ.get("AGENTS_APPROVE", "").split()
)
agent = Agent(name="support", instructions="Help.", model=PolicyModel(), tools=[lookup, refund])


@app.workflow
async def support(question: str) -> str:
    result = await runner.run(agent, question)
    return str(result.final_output)
