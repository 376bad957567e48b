"""The lab's PydanticAI trip agent under PydanticAI's ``DBOSDurability``, in a worker process.

``durable.frameworks`` SIGKILLs these workers at random beside surefoot's. The agent is
``pydantic_ai_trip.trip_agent`` (the same script, tools and ledger as on surefoot), inside a
``@DBOS.workflow``; DBOS makes its model requests steps and leaves its tools to the user
(they run again on recovery). DBOS gives a tool no key, so ``book`` builds one by hand from
the run and the model's tool call id, as a DBOS user would. The harness enqueues the runs
on the queue ``QUEUE`` with a ``DBOSClient``; every worker dequeues from it::

    python -m surefoot_lab.agent._dbos_trip --sysdb sqlite:////tmp/dbos.db \\
        --ledger /tmp/ledger.jsonl --executor-id w0 [--delay 0.1]

A worker launches DBOS, which recovers the PENDING runs of its executor id (so a SIGKILLed
worker is restarted under the same id, as DBOS requires), prints ``READY`` and serves
until SIGTERM/SIGINT. ``dbos`` is the lab's ``dbos`` extra.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

__all__ = ["APP_NAME", "APP_VERSION", "QUEUE", "READY", "WORKFLOW", "main", "parser"]

APP_NAME = "surefoot-lab-trip"
APP_VERSION = "1"
QUEUE = "lab_trips"
WORKFLOW = "lab_trip"
READY = "surefoot-lab-trip-dbos ready"


def parser() -> argparse.ArgumentParser:
    """The command line of a DBOS trip worker."""
    p = argparse.ArgumentParser(prog="python -m surefoot_lab.agent._dbos_trip")
    p.add_argument("--sysdb", required=True, help="DBOS system database URL (sqlite:///…)")
    p.add_argument("--ledger", required=True, help="the ledger file the agent writes")
    p.add_argument("--executor-id", required=True, help="DBOS executor id (the worker id)")
    p.add_argument("--delay", type=float, default=0.05, help="seconds per model/tool call")
    p.add_argument("--concurrency", type=int, default=4, help="runs at once in this worker")
    return p


def register(ledger: Path, delay: float) -> Any:
    """The agent and its workflow, registered with DBOS (once per process, before launch)."""
    from dbos import DBOS
    from pydantic_ai.durable_exec.dbos import DBOSDurability

    from .pydantic_ai_trip import trip_agent

    agent = trip_agent(ledger, delay=delay, capabilities=[DBOSDurability()])

    @DBOS.workflow(name=WORKFLOW)
    async def lab_trip(run: str) -> str:
        result = await agent.run(f"plan a trip for {run}")
        return str(result.output)

    return lab_trip


def main(argv: list[str] | None = None) -> int:
    """Serve trip runs from the queue until SIGTERM/SIGINT; the exit status."""
    a = parser().parse_args(argv)
    from dbos import DBOS

    register(Path(a.ledger), a.delay)
    DBOS(
        config={
            "name": APP_NAME,
            "system_database_url": a.sysdb,
            "application_version": APP_VERSION,
            "executor_id": a.executor_id,
            "log_level": "WARNING",
            "notification_listener_polling_interval_sec": 0.05,
        }
    )
    DBOS.launch()  # recovers this executor id's PENDING runs
    DBOS.register_queue(QUEUE, worker_concurrency=a.concurrency, polling_interval_sec=0.1)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    print(READY, a.executor_id, os.getpid(), flush=True)
    stop.wait()
    DBOS.destroy(workflow_completion_timeout_sec=0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
