"""Shared state and messages between agents: nothing lost, nothing done twice.

``Store`` holds versioned keys (per-key versions and a global revision) with each entry's
author and trust set by the runtime; an ``AgentSession`` reads and writes in its agent's
scopes and carries the taint of what it read into what it writes; ``Stream`` is an
append-only log with ids, consumers and dead letters (SQLite: many processes on one file);
``priority``, ``vote`` and ``judge`` resolve disagreeing proposals. What untrusted data may do
(trust labels, the sink and capability policies, plans) is ``surefoot.guard``'s.

The guard's names (``Label``, ``label_of``, ``SinkPolicy``, ``CapabilityPolicy``,
``PlanRunner``, ...) were exported here until 0.1; reading them here still works for one
release and warns with ``DeprecationWarning`` naming ``surefoot.guard``.

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
from ..guard import TRUST_LEVELS
from ..storage.state import MergeOutcome
from . import _deprecated_guard
from ._entry import AgentSpec, Contribution, Endorsement, Entry, Lease, LostUpdate
from ._history import Change, TxnResult, Watch
from ._resolvers import ChatClient, Proposal, Resolution, judge, priority, vote
from ._session import AgentSession, write_labeled
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

if _typing.TYPE_CHECKING:
    # The guard's names, deprecated here: mypy sees them (at runtime each read warns).
    from ..guard import (
        FIELD_TYPES as FIELD_TYPES,
    )
    from ..guard import (
        KINDS as KINDS,
    )
    from ..guard import (
        Answer as Answer,
    )
    from ..guard import (
        Arg as Arg,
    )
    from ..guard import (
        CapabilityPolicy as CapabilityPolicy,
    )
    from ..guard import (
        Condition as Condition,
    )
    from ..guard import (
        Delegation as Delegation,
    )
    from ..guard import (
        Endorser as Endorser,
    )
    from ..guard import (
        Label as Label,
    )
    from ..guard import (
        Labeled as Labeled,
    )
    from ..guard import (
        Plan as Plan,
    )
    from ..guard import (
        PlanRunner as PlanRunner,
    )
    from ..guard import (
        PlanStep as PlanStep,
    )
    from ..guard import (
        QuarantinedParser as QuarantinedParser,
    )
    from ..guard import (
        SinkPolicy as SinkPolicy,
    )
    from ..guard import (
        ToolPolicy as ToolPolicy,
    )
    from ..guard import (
        derive as derive,
    )
    from ..guard import (
        document_of as document_of,
    )
    from ..guard import (
        env_label as env_label,
    )
    from ..guard import (
        kind_of as kind_of,
    )
    from ..guard import (
        label_of as label_of,
    )
    from ..guard import (
        label_output as label_output,
    )
    from ..guard import (
        labeled as labeled,
    )
    from ..guard import (
        make_plan as make_plan,
    )
    from ..guard import (
        reject_label_fields as reject_label_fields,
    )
    from ..guard import (
        render as render,
    )
    from ..guard import (
        trusted as trusted,
    )

# The guard's names, deprecated here, as properties found before the lab's __getattr__.
_deprecated_guard.install(__name__)

__all__ = [
    "TRUST_LEVELS",
    "AgentSession",
    "AgentSpec",
    "Change",
    "ChatClient",
    "CompactedError",
    "ConflictError",
    "Consumer",
    "ConsumerStats",
    "Contribution",
    "DeadLetter",
    "DuplicateMessageError",
    "Endorsement",
    "Entry",
    "Lease",
    "LostUpdate",
    "MergeOutcome",
    "Message",
    "Proposal",
    "Resolution",
    "SchemaViolationError",
    "ScopeError",
    "Store",
    "Stream",
    "StreamEntry",
    "StreamStats",
    "TrustError",
    "TxnResult",
    "Watch",
    "judge",
    "priority",
    "streams",
    "vote",
    "write_labeled",
]

if not _typing.TYPE_CHECKING:  # mypy would read every unknown name as Any via __getattr__
    from ._moved import __getattr__  # noqa: F401 - old names of the lab's, with guidance
