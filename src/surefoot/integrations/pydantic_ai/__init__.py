"""PydanticAI agents, durable on surefoot (extra ``surefoot[pydantic-ai]``).

::

    app = durable.App("sqlite:///runs.db")
    agent = Agent(model, name="geo", capabilities=[SurefootDurability(app)])
    handle = start(agent, "What is the capital of France?", run_id="geo-1")
    print(handle.result(timeout=30))

Model requests, tool calls, MCP calls and the event handler are surefoot steps; a tool
declared ``metadata={'surefoot': {'effect': True}}`` gets ``current_effect_key()``
(``f"{run_id}:{tool_call_id}"``); a ``requires_approval=True`` tool waits for
``approve(app, run_id, digest, by=…)`` naming exactly that call. See docs/integrations.md.
"""

from __future__ import annotations

from .._approvals import (
    ApprovalRequest,
    Decision,
    ExternalResult,
    approve,
    deliver,
    pending_approvals,
    pending_results,
)
from .._operations import call_digest, current_effect_key
from ._backend import METADATA_KEY, StepOptions
from ._durability import SurefootDurability, enqueue, start
from ._streaming import emit_text, event_text

__all__ = [
    "METADATA_KEY",
    "ApprovalRequest",
    "Decision",
    "ExternalResult",
    "StepOptions",
    "SurefootDurability",
    "approve",
    "call_digest",
    "current_effect_key",
    "deliver",
    "emit_text",
    "enqueue",
    "event_text",
    "pending_approvals",
    "pending_results",
    "start",
]
