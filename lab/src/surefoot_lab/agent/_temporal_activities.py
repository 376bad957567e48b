"""The agent's Temporal activities: every model, tool and publish call of the port.

Activities run in the worker process, outside the workflow sandbox; they talk to the same
fake services (and so the same ledger) as surefoot's own agent. Each attempt of an
activity is one request to a service: an attempt killed with its worker is retried by the
server (at least once), never a completed one. While a call is in progress the activity
heartbeats, when the workflow gave it a ``heartbeat_timeout``, so a dead worker's attempt
is noticed after that timeout instead of the whole ``start_to_close_timeout``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from temporalio import activity

from surefoot.errors import ConfigError

from ._services import AgentServices

__all__ = ["HEARTBEAT_EVERY_S", "AgentActivities"]

HEARTBEAT_EVERY_S = 0.1
"""How often a call in progress heartbeats (the SDK sends at most one per 80% of the timeout)."""

_T = TypeVar("_T")


def _run() -> str:
    """The ledger's run id of this activity: its workflow id.

    Raises:
        ConfigError: the activity was started on its own, outside the agent's workflow.
    """
    wid = activity.info().workflow_id
    if wid is None:
        raise ConfigError(
            f"the agent's activity {activity.info().activity_type!r} runs only inside its "
            "workflow (it has no workflow id to key the ledger and the publish by)"
        )
    return wid


async def _heartbeating(call: Awaitable[_T]) -> _T:
    """Await ``call``, heartbeating meanwhile if this activity has a heartbeat timeout."""
    if activity.info().heartbeat_timeout is None:
        return await call
    task = asyncio.ensure_future(call)
    activity.heartbeat()
    while True:
        done, _ = await asyncio.wait({task}, timeout=HEARTBEAT_EVERY_S)
        if done:
            return task.result()
        activity.heartbeat()


class AgentActivities:
    """The agent's six calls as activity methods bound to one :class:`AgentServices`.

    Args:
        services: the fake services, or a zero-argument factory called on first use.
    """

    def __init__(self, services: AgentServices | Callable[[], AgentServices]) -> None:
        self._services = services
        self._held: AgentServices | None = services if isinstance(services, AgentServices) else None

    def _svc(self) -> AgentServices:
        if self._held is None:
            assert callable(self._services)
            self._held = self._services()
        return self._held

    def all(self) -> list[Callable[..., Any]]:
        """The bound activity methods, for ``Worker(activities=…)``."""
        return [self.plan, self.search, self.read, self.summarize, self.draft, self.publish]

    @activity.defn(name="plan")
    async def plan(self, question: str) -> list[str]:
        """Model: turn the question into search queries."""
        text = await _heartbeating(
            self._svc().ask(_run(), "plan", f"Plan web searches for: {question}")
        )
        words = text.rstrip(".").split()
        return [" ".join(words[i : i + 3]) for i in range(0, min(len(words), 6), 3)] or [question]

    @activity.defn(name="search")
    async def search(self, queries: list[str]) -> list[str]:
        """Tool read: find documents for the queries."""
        return await _heartbeating(self._svc().search(_run(), queries))

    @activity.defn(name="read")
    async def read(self, doc_ids: list[str]) -> list[str]:
        """Tool read: fetch the documents' text."""
        return await _heartbeating(self._svc().read(_run(), doc_ids))

    @activity.defn(name="summarize")
    async def summarize(self, question: str, texts: list[str]) -> str:
        """Model: summarize what was read."""
        prompt = f"Question: {question}\nSources:\n" + "\n".join(texts) + "\nSummarize."
        return await _heartbeating(self._svc().ask(_run(), "summarize", prompt))

    @activity.defn(name="draft")
    async def draft(self, question: str, summary: str) -> str:
        """Model: write the answer."""
        prompt = f"Answer {question!r} from: {summary}"
        return await _heartbeating(self._svc().ask(_run(), "draft", prompt))

    @activity.defn(name="publish")
    async def publish(self, text: str, channel: str) -> int:
        """Effect: publish, keyed ``workflow_id:activity_id`` (the same on every attempt)."""
        run = _run()
        key = f"{run}:{activity.info().activity_id}"
        return await _heartbeating(self._svc().publish(run, channel, text, key))
