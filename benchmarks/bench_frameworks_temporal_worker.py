"""The crash test's agent under PydanticAI's TemporalDurability, in a worker process to SIGKILL.

``bench_frameworks.py --kills`` runs it beside surefoot's worker and DBOS's: the same model
script, tools and ledger (tests/crash/pydantic_ai_app.py). Temporal passes a tool no key, so
``book`` builds one by hand from the workflow id and the tool call id, as a Temporal user
would. ``publish`` needs approval: the agent run ends with ``DeferredToolRequests`` and the
workflow waits for the ``approve`` signal naming the call (Temporal's idiom; the
``waiting`` query lists the calls), then runs the agent again with the approval.

    SF_PAI_LEDGER=… SF_PAI_HANG=… python bench_frameworks_temporal_worker.py ADDRESS

Serves the task queue ``trip`` until it is killed (activities: PydanticAI's defaults, a
60 s start-to-close timeout, Temporal's default retry policy).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.durable_exec.temporal import AgentPlugin, PydanticAIPlugin, TemporalDurability
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, RunContext
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "crash"))
from pydantic_ai_app import TURNS, _hang, note, read_ledger

LEDGER = Path(os.environ.get("SF_PAI_LEDGER", os.devnull))
QUEUE = "trip"


def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    turn = sum(isinstance(m, ModelResponse) for m in messages)
    note(LEDGER, ev="model", turn=turn)
    _hang(LEDGER, f"model:{turn}")
    if turn < len(TURNS):
        return ModelResponse(parts=list(TURNS[turn]))
    return ModelResponse(parts=[TextPart("booked and published")])


agent = Agent(
    FunctionModel(model),
    name="trip",
    output_type=[str, DeferredToolRequests],
    capabilities=[TemporalDurability()],
)


@agent.tool_plain
def lookup(city: str) -> str:
    note(LEDGER, ev="tool", tool="lookup", city=city)
    if city == "Rome":
        _hang(LEDGER, "tool:Rome")
    return f"{city}: sunny"


@agent.tool
def book(ctx: RunContext[None], city: str) -> str:
    key = f"{activity.info().workflow_id}:{ctx.tool_call_id}"  # by hand: Temporal passes none
    note(LEDGER, ev="effect_request", key=key)
    applied = {e["key"] for e in read_ledger(LEDGER) if e["ev"] == "effect_applied"}
    if key not in applied:
        note(LEDGER, ev="effect_applied", key=key, city=city)
    _hang(LEDGER, "after_effect")
    return f"booked {city} ({key})"


@agent.tool_plain(requires_approval=True)
def publish(text: str) -> str:
    note(LEDGER, ev="tool", tool="publish", text=text)
    return "published"


@workflow.defn(name="trip")
class Trip:
    """One agent run; an approval waits for the ``approve`` signal naming the call."""

    def __init__(self) -> None:
        self.approved: set[str] = set()
        self.pending: list[str] = []

    @workflow.signal
    def approve(self, tool_call_id: str) -> None:
        self.approved.add(tool_call_id)

    @workflow.query
    def waiting(self) -> list[str]:
        return list(self.pending)

    @workflow.run
    async def run(self, prompt: str) -> str:
        result = await agent.run(prompt)
        while isinstance(result.output, DeferredToolRequests):
            ids = [p.tool_call_id for p in result.output.approvals]
            self.pending = ids
            await workflow.wait_condition(lambda ids=ids: all(i in self.approved for i in ids))
            self.pending = []
            result = await agent.run(
                message_history=result.all_messages(),
                deferred_tool_results=DeferredToolResults(approvals=dict.fromkeys(ids, True)),
            )
        return str(result.output)


async def main(address: str) -> None:
    client = await Client.connect(address, plugins=[PydanticAIPlugin()])
    worker = Worker(
        client,
        task_queue=QUEUE,
        workflows=[Trip],
        plugins=[AgentPlugin(agent)],
        workflow_runner=UnsandboxedWorkflowRunner(),
    )
    print("serving", flush=True)
    await worker.run()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
