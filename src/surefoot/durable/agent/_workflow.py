"""The 7-step agent of DESIGN §4, built on any ``durable.App``.

``plan`` (model), ``search`` (tool read), ``read`` (tool read), ``summarize`` (model),
``draft`` (model), ``approve`` (a wait for the signal ``approve``) and ``publish`` (an
effect with an idempotency key, undone by ``unpublish``).

The functions below are templates. ``build_agent`` gives each app its own copy whose
globals hold that app's steps, so the workflow refers to its steps by global name: that is
how ``app.describe`` (which reads the names a workflow uses) finds them, and several apps
(one per journal) can each have an agent in one process.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from .._app import App
from .._versions import Workflow
from ._services import AgentServices

__all__ = ["APPROVE", "STEPS", "WORKFLOW", "build_agent"]

WORKFLOW = "research_agent"
"""The agent workflow's name in the journal."""

APPROVE = "approve"
"""The signal that approves a draft: ``app.signal(run_id, APPROVE, {"approved": True})``."""

STEPS = ("plan", "search", "read", "summarize", "draft", APPROVE, "publish")
"""The seven steps, in order."""

# `app` and `services` are bound per build (see build_agent); these placeholders keep the
# templates importable and type-checked.
app: Any = None
services: Any = None


async def plan(run: str, question: str) -> list[str]:
    """Model: turn the question into search queries."""
    text = await services.get().ask(run, "plan", f"Plan web searches for: {question}")
    words = text.rstrip(".").split()
    return [" ".join(words[i : i + 3]) for i in range(0, min(len(words), 6), 3)] or [question]


async def search(run: str, queries: list[str]) -> list[str]:
    """Tool read: find documents for the queries."""
    docs: list[str] = await services.get().search(run, queries)
    return docs


async def read(run: str, doc_ids: list[str]) -> list[str]:
    """Tool read: fetch the documents' text."""
    texts: list[str] = await services.get().read(run, doc_ids)
    return texts


async def summarize(run: str, question: str, texts: list[str]) -> str:
    """Model: summarize what was read."""
    prompt = f"Question: {question}\nSources:\n" + "\n".join(texts) + "\nSummarize."
    return str(await services.get().ask(run, "summarize", prompt))


async def draft(run: str, question: str, summary: str) -> str:
    """Model: write the answer."""
    return str(await services.get().ask(run, "draft", f"Answer {question!r} from: {summary}"))


async def fact_check(run: str, text: str) -> str:
    """Model (version 2 only): check the draft before it goes for approval."""
    return str(await services.get().ask(run, "fact_check", f"Check the facts in: {text}"))


async def unpublish(
    run: str, text: str, channel: str = "blog", *, key: str | None = None, result: int = 0
) -> None:
    """Compensation: take the post down again."""
    await services.get().unpublish(run, channel, result)


async def publish(run: str, text: str, channel: str = "blog", *, key: str | None = None) -> int:
    """Effect: publish the approved draft; ``key`` makes a repeat harmless."""
    post: int = await services.get().publish(run, channel, text, key)
    return post


async def research_agent(
    question: str,
    run: str = "",
    channels: list[str] | None = None,
    approval_timeout: float | None = None,
) -> dict[str, Any]:
    """The 7-step agent (version 1)."""
    queries = await plan(run, question)
    docs = await search(run, queries)
    texts = await read(run, docs)
    summary = await summarize(run, question, texts)
    text = await draft(run, question, summary)
    approval = await app.wait_for(APPROVE, timeout=approval_timeout, default=None)
    if not isinstance(approval, dict) or not approval.get("approved"):
        return {"status": "rejected", "draft": text, "approval": approval}
    posts = []
    for channel in channels or ["blog"]:
        posts.append(await publish(run, text, channel))
    return {"status": "published", "posts": posts, "draft": text, "by": approval.get("by")}


async def research_agent_v2(
    question: str,
    run: str = "",
    channels: list[str] | None = None,
    approval_timeout: float | None = None,
) -> dict[str, Any]:
    """The agent, version 2: a fact check between draft and approval."""
    queries = await plan(run, question)
    docs = await search(run, queries)
    texts = await read(run, docs)
    summary = await summarize(run, question, texts)
    text = await draft(run, question, summary)
    checked = await fact_check(run, text)
    approval = await app.wait_for(APPROVE, timeout=approval_timeout, default=None)
    if not isinstance(approval, dict) or not approval.get("approved"):
        return {"status": "rejected", "draft": text, "approval": approval}
    posts = []
    for channel in channels or ["blog"]:
        posts.append(await publish(run, text, channel))
    return {"status": "published", "posts": posts, "draft": text, "checked": checked}


_VERSIONS = {"1": research_agent, "2": research_agent_v2}


class _Services:
    """Holds an agent's services, or a factory called on first use (worker processes)."""

    def __init__(self, s: AgentServices | Callable[[], AgentServices]) -> None:
        self._s = s if isinstance(s, AgentServices) else None
        self._factory = None if isinstance(s, AgentServices) else s

    def get(self) -> AgentServices:
        if self._s is None:
            assert self._factory is not None
            self._s = self._factory()
        return self._s


def _rebind(fn: Any, g: dict[str, Any]) -> Any:
    new = types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__annotations__ = dict(fn.__annotations__)
    new.__qualname__ = fn.__qualname__
    new.__doc__ = fn.__doc__
    new.__module__ = fn.__module__
    return new


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
        services: the fake services, or a zero-argument factory called on first use.
        versions: which workflow versions to register: ``"1"`` (seven steps) and/or
            ``"2"`` (adds ``fact_check`` after ``draft``).
        edited_v1: register version 2's code under the label ``"1"`` — a workflow changed
            in place while runs were in flight (replay meets a different step).

    Returns:
        The registered workflows by version label.

    Raises:
        ConfigError: an unknown version, or the agent is already registered on ``app``.
    """
    from ...errors import ConfigError

    bad = [v for v in versions if v not in _VERSIONS]
    if bad or not versions:
        raise ConfigError(f"agent versions must be among {sorted(_VERSIONS)}, got {versions!r}")
    g: dict[str, Any] = {
        "__name__": __name__,
        "__builtins__": __builtins__,
        "app": app,
        "services": _Services(services),
        "APPROVE": APPROVE,
        "Any": Any,
    }
    for fn in (plan, search, read, summarize, draft, fact_check):
        g[fn.__name__] = app.step(_rebind(fn, g))
    g["unpublish"] = _rebind(unpublish, g)
    g["publish"] = app.step(effect=True, compensate=g["unpublish"])(_rebind(publish, g))
    out: dict[str, Workflow] = {}
    for v in versions:
        code = research_agent_v2 if (edited_v1 and v == "1") else _VERSIONS[v]
        fn = _rebind(code, g)
        g[code.__name__] = fn
        out[v] = app.workflow(version=v, name=WORKFLOW)(fn)
    return out
