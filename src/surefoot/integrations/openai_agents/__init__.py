"""OpenAI Agents SDK agents, durable on surefoot: ``DurableRunner(app).run(agent, input)``.

Needs the extra: ``pip install 'surefoot[openai-agents]'``. See docs/integrations.md.
"""

from ._runner import (
    APPROVAL_PREFIX,
    OPERATION_NAMES,
    Approval,
    DurableRunner,
    approval_digest,
    approve,
    idempotency_key,
    pending_approvals,
)

__all__ = [
    "APPROVAL_PREFIX",
    "OPERATION_NAMES",
    "Approval",
    "DurableRunner",
    "approval_digest",
    "approve",
    "idempotency_key",
    "pending_approvals",
]
