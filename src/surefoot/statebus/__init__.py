"""Shared state and messages between agents: nothing lost, nothing done twice.

``Store`` holds versioned keys (per-key versions and a global revision) with each entry's
author and trust set by the runtime; ``shared`` simulates a team of agents under the policies
``last_writer_wins``, ``optimistic``, ``locked`` and ``partitioned``; ``messages`` delivers
over a lossy ``Channel``; ``Stream`` is an append-only log with ids, consumers and dead
letters (SQLite: many processes on one file).
"""

from __future__ import annotations

from ..errors import (
    ConflictError,
    DuplicateMessageError,
    SchemaViolationError,
    ScopeError,
    TrustError,
)
from . import messages, shared
from ._channel import Channel
from ._realagents import RealAgentsReport, run_real_agents
from ._resolvers import (
    Proposal,
    Resolution,
    ResolverStats,
    judge,
    judge_responder,
    predicted_accuracy,
    priority,
    simulate,
    vote,
)
from ._store import TRUST_LEVELS, AgentSession, AgentSpec, Entry, Lease, LostUpdate, Store
from ._stream import Consumer, DeadLetter, Message, Stream, StreamEntry
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
    "TRUST_LEVELS",
    "AgentSession",
    "AgentSpec",
    "Channel",
    "ConflictError",
    "Consumer",
    "DeadLetter",
    "DuplicateMessageError",
    "Endorser",
    "Entry",
    "Label",
    "Labeled",
    "Lease",
    "LostUpdate",
    "Message",
    "Proposal",
    "RealAgentsReport",
    "Resolution",
    "ResolverStats",
    "SchemaViolationError",
    "ScopeError",
    "SinkPolicy",
    "Store",
    "Stream",
    "StreamEntry",
    "TrustError",
    "derive",
    "judge",
    "judge_responder",
    "label_of",
    "labeled",
    "messages",
    "predicted_accuracy",
    "priority",
    "reject_label_fields",
    "render",
    "run_real_agents",
    "shared",
    "simulate",
    "trusted",
    "vote",
    "write_labeled",
]
