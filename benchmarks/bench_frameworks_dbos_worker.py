"""The crash test's agent under PydanticAI's DBOSDurability, in a process to SIGKILL.

``bench_frameworks.py --kills`` runs it beside surefoot's worker: the same model script, tools
and ledger (tests/crash/pydantic_ai_app.py), with ``publish`` needing no approval (DBOS ends a
run at a deferred call instead of waiting). DBOS gives a tool no key, so ``book`` builds one by
hand from the workflow id and the tool call id, as a DBOS user would.

    SF_PAI_LEDGER=… SF_PAI_HANG=… python bench_frameworks_dbos_worker.py SYSDB_URL [--start]

``--start`` starts the workflow ``t1``; without it, ``DBOS.launch()`` recovers it (the same
executor id). Prints ``done`` and the output when the workflow ends.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from dbos import DBOS, SetWorkflowID
from pydantic_ai import Agent
from pydantic_ai.durable_exec.dbos import DBOSDurability
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import RunContext

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "crash"))
from pydantic_ai_app import TURNS, _hang, note, read_ledger

LEDGER = Path(os.environ["SF_PAI_LEDGER"])


def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    turn = sum(isinstance(m, ModelResponse) for m in messages)
    note(LEDGER, ev="model", turn=turn)
    _hang(LEDGER, f"model:{turn}")
    if turn < len(TURNS):
        return ModelResponse(parts=list(TURNS[turn]))
    return ModelResponse(parts=[TextPart("booked and published")])


agent = Agent(FunctionModel(model), name="trip", capabilities=[DBOSDurability()])


@agent.tool_plain
def lookup(city: str) -> str:
    note(LEDGER, ev="tool", tool="lookup", city=city)
    if city == "Rome":
        _hang(LEDGER, "tool:Rome")
    return f"{city}: sunny"


@agent.tool
def book(ctx: RunContext[None], city: str) -> str:
    key = f"{DBOS.workflow_id}:{ctx.tool_call_id}"  # built by hand: DBOS passes no key
    note(LEDGER, ev="effect_request", key=key)
    applied = {e["key"] for e in read_ledger(LEDGER) if e["ev"] == "effect_applied"}
    if key not in applied:
        note(LEDGER, ev="effect_applied", key=key, city=city)
    _hang(LEDGER, "after_effect")
    return f"booked {city} ({key})"


@agent.tool_plain
def publish(text: str) -> str:
    note(LEDGER, ev="tool", tool="publish", text=text)
    return "published"


@DBOS.workflow()
async def trip(prompt: str) -> str:
    result = await agent.run(prompt)
    return str(result.output)


async def main(url: str, start: bool) -> None:
    DBOS(
        config={
            "name": "pai-kill-bench",
            "system_database_url": url,
            "executor_id": "w1",
            "application_version": "1",
            "log_level": "ERROR",
        }
    )
    DBOS.launch()  # recovers this executor's pending workflows
    if start:
        with SetWorkflowID("t1"):
            await DBOS.start_workflow_async(trip, "plan a trip to Paris")
    handle = await DBOS.retrieve_workflow_async("t1")
    print("done", await handle.get_result(), flush=True)
    DBOS.destroy(workflow_completion_timeout_sec=0)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], "--start" in sys.argv))
