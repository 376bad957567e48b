"""The lab's PydanticAI trip agent under PydanticAI's ``TemporalDurability``, in a worker process.

``durable.frameworks`` SIGKILLs these workers at random beside surefoot's. The agent is
``pydantic_ai_trip.trip_agent`` (the same script, tools and ledger as on surefoot) run by the
workflow ``WORKFLOW``; ``TemporalDurability`` makes its model requests and tool calls
activities. Temporal gives a tool no key, so ``book`` builds one by hand from the run and the
model's tool call id, as a Temporal user would. The harness starts the runs on the task
queue; every worker polls it::

    SUREFOOT_LAB_PAI_LEDGER=/tmp/ledger.jsonl SUREFOOT_LAB_PAI_DELAY=0.1 \\
        python -m surefoot_lab.agent._temporal_trip --address 127.0.0.1:7233 --task-queue trips

Tuned to notice a dead worker within seconds, as ``durable.port`` tunes its Temporal port:
every activity heartbeats (PydanticAI's ``heartbeating``) against a heartbeat timeout of
``TEMPORAL_HEARTBEAT_S``, a retry starts 0.2 s after, and a workflow task waits at most
``TEMPORAL_STICKY_S`` on a dead worker's sticky queue. The defaults (PydanticAI: a 30 s
heartbeat timeout for model requests, 60 s start-to-close for tools; the SDK: 10 s on the
sticky queue) stall a killed run that long. 2 s, not ``durable.port``'s 1 s: on two cores at
load 15 a freshly started worker missed a 1 s heartbeat and ran model requests twice with no
kill at all (2026-12-06).
The workflow runs unsandboxed (all its I/O is in activities). ``temporalio`` is surefoot's
``temporal`` extra.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import workflow

__all__ = ["READY", "WORKFLOW", "LabTrip", "main", "parser"]

WORKFLOW = "lab_trip"
READY = "surefoot-lab-trip-temporal polling"

_AGENT: list[Any] = []


def agent() -> Any:
    """The process's trip agent under ``TemporalDurability`` (built once, from the env)."""
    if not _AGENT:
        from pydantic_ai.durable_exec.temporal import TemporalDurability
        from temporalio.common import RetryPolicy
        from temporalio.workflow import ActivityConfig

        from .pydantic_ai_trip import TEMPORAL_HEARTBEAT_S, trip_agent

        config = ActivityConfig(
            start_to_close_timeout=timedelta(seconds=30),
            heartbeat_timeout=timedelta(seconds=TEMPORAL_HEARTBEAT_S),
            retry_policy=RetryPolicy(initial_interval=timedelta(seconds=0.2)),
        )
        durability = TemporalDurability(activity_config=config, model_activity_config=config)
        _AGENT.append(
            trip_agent(
                Path(os.environ["SUREFOOT_LAB_PAI_LEDGER"]),
                delay=float(os.environ.get("SUREFOOT_LAB_PAI_DELAY", "0.05")),
                capabilities=[durability],
            )
        )
    return _AGENT[0]


@workflow.defn(name=WORKFLOW)
class LabTrip:
    """One agent run: ``run`` is the run's id (the model reads it from the prompt)."""

    @workflow.run
    async def run(self, run: str) -> str:
        result = await agent().run(f"plan a trip for {run}")
        return str(result.output)


def parser() -> argparse.ArgumentParser:
    """The command line of a Temporal trip worker."""
    p = argparse.ArgumentParser(prog="python -m surefoot_lab.agent._temporal_trip")
    p.add_argument("--address", required=True, help="the Temporal frontend, host:port")
    p.add_argument("--task-queue", required=True, help="the task queue to poll")
    p.add_argument("--concurrency", type=int, default=4, help="activities at once")
    return p


async def _serve(a: argparse.Namespace) -> None:
    from pydantic_ai.durable_exec.temporal import AgentPlugin, PydanticAIPlugin
    from temporalio.client import Client
    from temporalio.worker import UnsandboxedWorkflowRunner, Worker

    from .pydantic_ai_trip import TEMPORAL_STICKY_S

    client = await Client.connect(a.address, plugins=[PydanticAIPlugin()])
    worker = Worker(
        client,
        task_queue=a.task_queue,
        workflows=[LabTrip],
        plugins=[AgentPlugin(agent())],
        workflow_runner=UnsandboxedWorkflowRunner(),
        max_concurrent_activities=a.concurrency,
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=TEMPORAL_STICKY_S),
        graceful_shutdown_timeout=timedelta(seconds=1),
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with worker:
        print(READY, a.task_queue, os.getpid(), flush=True)
        await stop.wait()


def main(argv: list[str] | None = None) -> int:
    """Serve trip runs until SIGTERM/SIGINT; the exit status."""
    asyncio.run(_serve(parser().parse_args(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
