"""Durable execution: runs that survive crashes without paying twice or acting twice.

::

    app = durable.App("sqlite:///runs.db")

    @app.step                                   # pure: journalled, never recomputed
    async def plan(question: str) -> list[str]: ...

    @app.step(effect=True, compensate=unpublish)  # effect: gets key=f"{run_id}:{step}"
    async def publish(draft: str, *, key: str) -> str: ...

    @app.workflow(version="2")
    async def research(question: str) -> str: ...

    handle = app.start(research, "why is the sky blue?", run_id="r-42")
    print(handle.result())

See ``docs/durable.md`` for crash semantics and what exactly-once means here.
"""

from __future__ import annotations

from ..storage.runs import WorkerRow as WorkerInfo
from ._app import App
from ._crash import POINTS, CrashPlan, SimulatedCrash
from ._current import RunContext, current_run, in_run
from ._follow import RunStream, StreamEvent, step_texts
from ._handle import RunHandle
from ._load import load_app
from ._payloads import PayloadCodec, ZlibCodec
from ._queues import Queue
from ._retention import Retention
from ._schedules import Schedule
from ._tokens import Batching, emit
from ._types import (
    STATUSES,
    STRATEGIES,
    TERMINAL,
    AuditEntry,
    RunDetail,
    RunInfo,
    RunStatus,
    StepInfo,
    StepSpec,
)
from ._versions import Workflow
from ._worker import Worker

__all__ = [
    "POINTS",
    "STATUSES",
    "STRATEGIES",
    "TERMINAL",
    "App",
    "AuditEntry",
    "Batching",
    "CrashPlan",
    "PayloadCodec",
    "Queue",
    "Retention",
    "RunContext",
    "RunDetail",
    "RunHandle",
    "RunInfo",
    "RunStatus",
    "RunStream",
    "Schedule",
    "SimulatedCrash",
    "StepInfo",
    "StepSpec",
    "StreamEvent",
    "Worker",
    "WorkerInfo",
    "Workflow",
    "ZlibCodec",
    "current_run",
    "emit",
    "in_run",
    "load_app",
    "step_texts",
]
