"""The 7-step agent of DESIGN §4, built on any ``durable.App``.

``plan`` (model), ``search`` (tool read), ``read`` (tool read), ``summarize`` (model),
``draft`` (model), ``approve`` (a wait for the signal ``approve``) and ``publish`` (an
effect with an idempotency key, undone by ``unpublish``). Version 2 adds ``fact_check``
(model) between ``draft`` and ``approve``.

Each step reads its run's id from ``durable.current_run()``, so the fake services can
attribute what they receive to a run (a forked run to its own id, not its parent's).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from surefoot.durable import App, Workflow, current_run
from surefoot.errors import ConfigError

from ._services import AgentServices

__all__ = ["APPROVE", "STEPS", "VERSIONS", "WORKFLOW", "build_agent"]

WORKFLOW = "research_agent"
"""The agent workflow's name in the journal."""

APPROVE = "approve"
"""The signal that approves a draft: ``app.signal(run_id, APPROVE, {"approved": True})``."""

STEPS = ("plan", "search", "read", "summarize", "draft", APPROVE, "publish")
"""The seven steps, in order."""

VERSIONS = ("1", "2")
"""The agent's workflow versions: 1 (seven steps) and 2 (adds ``fact_check``)."""


def build_agent(
    app: App,
    services: AgentServices | Callable[[], AgentServices],
    *,
    versions: tuple[str, ...] = ("1",),
    edited_v1: bool = False,
) -> dict[str, Workflow]:
    """Register the agent's steps and workflow versions on ``app``.

    Args:
        app: the durable app (one agent per app: step names are unique per app).
        services: the fake services, or a zero-argument factory called on first use
            (worker processes build theirs from the environment).
        versions: which workflow versions to register (``"1"`` and/or ``"2"``).
        edited_v1: register version 2's code under the label ``"1"``: a workflow changed
            in place while runs were in flight (replay meets a different step).

    Returns:
        The registered workflows by version label.

    Raises:
        ConfigError: an unknown version, or the agent is already registered on ``app``.
    """
    bad = [v for v in versions if v not in VERSIONS]
    if bad or not versions:
        raise ConfigError(f"agent versions must be among {list(VERSIONS)}, got {versions!r}")
    held: list[AgentServices] = [services] if isinstance(services, AgentServices) else []

    def svc() -> AgentServices:
        if not held:
            assert callable(services)
            held.append(services())
        return held[0]

    def rid() -> str:
        return current_run().run_id

    @app.step
    async def plan(question: str) -> list[str]:
        """Model: turn the question into search queries."""
        text = await svc().ask(rid(), "plan", f"Plan web searches for: {question}")
        words = text.rstrip(".").split()
        return [" ".join(words[i : i + 3]) for i in range(0, min(len(words), 6), 3)] or [question]

    @app.step
    async def search(queries: list[str]) -> list[str]:
        """Tool read: find documents for the queries."""
        return await svc().search(rid(), queries)

    @app.step
    async def read(doc_ids: list[str]) -> list[str]:
        """Tool read: fetch the documents' text."""
        return await svc().read(rid(), doc_ids)

    @app.step
    async def summarize(question: str, texts: list[str]) -> str:
        """Model: summarize what was read."""
        prompt = f"Question: {question}\nSources:\n" + "\n".join(texts) + "\nSummarize."
        return await svc().ask(rid(), "summarize", prompt)

    @app.step
    async def draft(question: str, summary: str) -> str:
        """Model: write the answer."""
        return await svc().ask(rid(), "draft", f"Answer {question!r} from: {summary}")

    @app.step
    async def fact_check(text: str) -> str:
        """Model (version 2 only): check the draft before it goes for approval."""
        return await svc().ask(rid(), "fact_check", f"Check the facts in: {text}")

    async def unpublish(
        text: str, channel: str = "blog", *, key: str | None = None, result: int = 0
    ) -> None:
        """Compensation: take the post down again (``result`` is the post's id)."""
        await svc().unpublish(rid(), channel, result)

    @app.step(effect=True, compensate=unpublish)
    async def publish(text: str, channel: str = "blog", *, key: str | None = None) -> int:
        """Effect: publish the approved draft; ``key`` makes a repeat harmless."""
        return await svc().publish(rid(), channel, text, key)

    async def research_agent(
        question: str,
        *,
        channels: list[str] | None = None,
        approval_timeout: float | None = None,
    ) -> dict[str, Any]:
        """The 7-step agent (version 1)."""
        queries = await plan(question)
        docs = await search(queries)
        texts = await read(docs)
        summary = await summarize(question, texts)
        text = await draft(question, summary)
        approval = await app.wait_for(APPROVE, timeout=approval_timeout, default=None)
        if not isinstance(approval, dict) or not approval.get("approved"):
            return {"status": "rejected", "draft": text, "approval": approval}
        posts = [await publish(text, channel) for channel in channels or ["blog"]]
        return {"status": "published", "posts": posts, "draft": text, "by": approval.get("by")}

    async def research_agent_v2(
        question: str,
        *,
        channels: list[str] | None = None,
        approval_timeout: float | None = None,
    ) -> dict[str, Any]:
        """The agent, version 2: a fact check between draft and approval."""
        queries = await plan(question)
        docs = await search(queries)
        texts = await read(docs)
        summary = await summarize(question, texts)
        text = await draft(question, summary)
        checked = await fact_check(text)
        approval = await app.wait_for(APPROVE, timeout=approval_timeout, default=None)
        if not isinstance(approval, dict) or not approval.get("approved"):
            return {"status": "rejected", "draft": text, "approval": approval}
        posts = [await publish(text, channel) for channel in channels or ["blog"]]
        return {"status": "published", "posts": posts, "draft": text, "checked": checked}

    code = {"1": research_agent_v2 if edited_v1 else research_agent, "2": research_agent_v2}
    return {v: app.workflow(version=v, name=WORKFLOW)(code[v]) for v in versions}
