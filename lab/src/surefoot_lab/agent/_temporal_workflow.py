"""The agent's Temporal workflow: the orchestration only, run in Temporal's sandbox.

The worker re-imports this module inside its sandbox for every run it loads, so it holds
only imports and definitions: nothing runs at module level. The activities' module is
imported through the sandbox unchanged (``imports_passed_through``): the workflow only
names its methods. Workflow code calls no clock, random source or I/O of its own; the
approval is a signal, waited for with ``workflow.wait_condition`` (no worker is needed
while it waits: the server keeps the run and any signal sent meanwhile).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ._temporal_activities import AgentActivities

__all__ = ["APPROVE", "WORKFLOW_NAME", "AgentInput", "Approval", "CallTimeouts", "ResearchAgent"]

WORKFLOW_NAME = "surefoot_research_agent"
"""The workflow type's name on the Temporal server."""

APPROVE = "approve"
"""The signal that approves the draft (the same name as surefoot's agent's signal)."""


@dataclass
class CallTimeouts:
    """The timeouts every activity of a run gets.

    Attributes:
        start_to_close_s: one attempt's limit; without heartbeats, also how long a dead
            worker's attempt holds the run before its retry.
        heartbeat_s: the heartbeat timeout (None: no heartbeats expected).
    """

    start_to_close_s: float = 10.0
    heartbeat_s: float | None = None


@dataclass
class AgentInput:
    """One agent run's arguments (one dataclass: Temporal's idiom for workflow input)."""

    question: str
    timeouts: CallTimeouts = field(default_factory=CallTimeouts)
    approval_timeout_s: float = 600.0
    channels: list[str] = field(default_factory=lambda: ["blog"])


@dataclass
class Approval:
    """The ``approve`` signal's payload.

    Temporal signals carry no caller-chosen id (the SDK's request id covers only its own
    retries), so the id travels in the payload and the workflow ignores an id it has seen.
    """

    approved: bool
    by: str
    signal_id: str


@workflow.defn(name=WORKFLOW_NAME)
class ResearchAgent:
    """The 7-step agent: plan, search, read, summarize, draft, wait for approve, publish."""

    def __init__(self) -> None:
        self.approval: Approval | None = None
        self.signal_ids: list[str] = []

    @workflow.signal(name=APPROVE)
    def approve(self, decision: Approval) -> None:
        """Record the first decision; a repeated signal id changes nothing."""
        if decision.signal_id in self.signal_ids:
            return
        self.signal_ids.append(decision.signal_id)
        if self.approval is None:
            self.approval = decision

    @workflow.query(name="decisions")
    def decisions(self) -> list[str]:
        """The signal ids of the ``approve`` signals this run has taken in (each once)."""
        return list(self.signal_ids)

    @workflow.run
    async def run(self, inp: AgentInput) -> dict[str, Any]:
        """Sequence the activities; return what surefoot's agent returns."""
        t = inp.timeouts
        stc = timedelta(seconds=t.start_to_close_s)
        hb = None if t.heartbeat_s is None else timedelta(seconds=t.heartbeat_s)
        a = AgentActivities
        queries = await workflow.execute_activity_method(
            a.plan, inp.question, start_to_close_timeout=stc, heartbeat_timeout=hb
        )
        docs = await workflow.execute_activity_method(
            a.search, queries, start_to_close_timeout=stc, heartbeat_timeout=hb
        )
        texts = await workflow.execute_activity_method(
            a.read, docs, start_to_close_timeout=stc, heartbeat_timeout=hb
        )
        summary = await workflow.execute_activity_method(
            a.summarize,
            args=[inp.question, texts],
            start_to_close_timeout=stc,
            heartbeat_timeout=hb,
        )
        text = await workflow.execute_activity_method(
            a.draft, args=[inp.question, summary], start_to_close_timeout=stc, heartbeat_timeout=hb
        )
        try:
            await workflow.wait_condition(
                lambda: self.approval is not None,
                timeout=timedelta(seconds=inp.approval_timeout_s),
            )
        except TimeoutError:
            pass
        ok = self.approval
        if ok is None or not ok.approved:
            return {"status": "rejected", "draft": text, "by": None if ok is None else ok.by}
        posts = []
        for channel in inp.channels:
            posts.append(
                await workflow.execute_activity_method(
                    a.publish,
                    args=[text, channel],
                    start_to_close_timeout=stc,
                    heartbeat_timeout=hb,
                )
            )
        return {"status": "published", "posts": posts, "draft": text, "by": ok.by}
