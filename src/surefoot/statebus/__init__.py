"""Shared state and messages between agents: nothing lost, nothing done twice.

``Store`` holds versioned keys (per-key versions and a global revision) with each entry's
author and trust set by the runtime; ``Stream`` is an append-only log with ids, consumers and
dead letters (SQLite: many processes on one file); ``priority``, ``vote`` and ``judge``
resolve disagreeing proposals; trust labels and the ``SinkPolicy`` keep untrusted text out
of consequential calls; a ``CapabilityPolicy`` says per tool argument which sources may
supply it, and ``PlanRunner`` runs a plan made from trusted input with untrusted content read
by a ``QuarantinedParser``.

The course's simulators (``shared``, ``messages``, ``Channel``, ``simulate``,
``predicted_accuracy``, ``judge_responder``, ``ResolverStats``, ``run_real_agents``,
``RealAgentsReport``, ``injection``) are the lab's (``surefoot_lab.statebus``, a separate
distribution); reading them here raises ``AttributeError`` saying where they went.
"""

from __future__ import annotations

import typing as _typing

from ..errors import (
    CompactedError,
    ConflictError,
    DuplicateMessageError,
    SchemaViolationError,
    ScopeError,
    TrustError,
)
from ..storage.base import MergeOutcome
from ._capabilities import (
    KINDS,
    Answer,
    Arg,
    CapabilityPolicy,
    Delegation,
    ToolPolicy,
    document_of,
    env_label,
    kind_of,
    label_output,
)
from ._entry import TRUST_LEVELS, AgentSpec, Endorsement, Entry, Lease, LostUpdate
from ._history import Change, TxnResult, Watch
from ._merge import Contribution
from ._quarantine import (
    FIELD_TYPES,
    Condition,
    Plan,
    PlanRunner,
    PlanStep,
    QuarantinedParser,
    make_plan,
)
from ._resolvers import ChatClient, Proposal, Resolution, judge, priority, vote
from ._session import AgentSession
from ._store import Store
from ._stream import (
    Consumer,
    ConsumerStats,
    DeadLetter,
    Message,
    Stream,
    StreamEntry,
    StreamStats,
    streams,
)
from ._trust import (
    Endorser,
    Label,
    Labeled,
    SinkPolicy,
    derive,
    label_of,
    labeled,
    reject_label_fields,
    render,
    trusted,
    write_labeled,
)

__all__ = [
    "FIELD_TYPES",
    "KINDS",
    "TRUST_LEVELS",
    "AgentSession",
    "AgentSpec",
    "Answer",
    "Arg",
    "CapabilityPolicy",
    "Change",
    "ChatClient",
    "CompactedError",
    "Condition",
    "ConflictError",
    "Consumer",
    "ConsumerStats",
    "Contribution",
    "DeadLetter",
    "Delegation",
    "DuplicateMessageError",
    "Endorsement",
    "Endorser",
    "Entry",
    "Label",
    "Labeled",
    "Lease",
    "LostUpdate",
    "MergeOutcome",
    "Message",
    "Plan",
    "PlanRunner",
    "PlanStep",
    "Proposal",
    "QuarantinedParser",
    "Resolution",
    "SchemaViolationError",
    "ScopeError",
    "SinkPolicy",
    "Store",
    "Stream",
    "StreamEntry",
    "StreamStats",
    "ToolPolicy",
    "TrustError",
    "TxnResult",
    "Watch",
    "derive",
    "document_of",
    "env_label",
    "judge",
    "kind_of",
    "label_of",
    "label_output",
    "labeled",
    "make_plan",
    "priority",
    "reject_label_fields",
    "render",
    "streams",
    "trusted",
    "vote",
    "write_labeled",
]

if not _typing.TYPE_CHECKING:  # mypy would read every unknown name as Any via __getattr__
    from ._moved import __getattr__  # noqa: F401 - old names of the lab's, with guidance
