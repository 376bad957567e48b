"""Every storage protocol and record under one name, as before they had a module each.

Kept so that ``from surefoot.storage.base import Journal`` (and the rest) goes on working;
new code imports from the protocol's own module:

=========================================  =================================================
module                                     what
=========================================  =================================================
:mod:`~surefoot.storage.backend`           ``Storage``: an opened URL, handing out the rest
:mod:`~surefoot.storage.keys`              ``KeyStore``: idempotency records (resilience)
:mod:`~surefoot.storage.state`             ``StateStore``: versioned keys (statebus)
:mod:`~surefoot.storage.streams`           ``StreamLog``: append-only log, consumers (statebus)
:mod:`~surefoot.storage.runs`              the journal's records: runs, steps, commits
:mod:`~surefoot.storage.journal`           ``Journal``: runs, steps, leases, signals (durable)
:mod:`~surefoot.storage.checks`            the checks every backend applies alike
=========================================  =================================================
"""

from __future__ import annotations

from .backend import Storage
from .checks import DEFAULT_MAX_VALUE_BYTES, check_seconds, check_size, check_text, value_limit
from .journal import Journal
from .keys import KeyRecord, KeyStore
from .runs import (
    RUN_ORDERS,
    AuditRow,
    ChildWrite,
    Record,
    RunRow,
    RunWrite,
    StepRow,
    StepWrite,
    WorkerRow,
)
from .state import (
    TXN_OPS,
    MergeOutcome,
    StateChange,
    StateRecord,
    StateStore,
    TxnOp,
    expires_at,
    fence_conflict,
    next_lineage,
    txn_conflict,
    write_conflict,
)
from .streams import (
    DEFAULT_DEDUP_WINDOW,
    ClaimedMessage,
    ConsumerStats,
    DeadRecord,
    Retention,
    StreamLog,
    StreamRecord,
    StreamStats,
    check_range,
    stream_conflict,
)

__all__ = [
    "DEFAULT_DEDUP_WINDOW",
    "DEFAULT_MAX_VALUE_BYTES",
    "RUN_ORDERS",
    "TXN_OPS",
    "AuditRow",
    "ChildWrite",
    "ClaimedMessage",
    "ConsumerStats",
    "DeadRecord",
    "Journal",
    "KeyRecord",
    "KeyStore",
    "MergeOutcome",
    "Record",
    "Retention",
    "RunRow",
    "RunWrite",
    "StateChange",
    "StateRecord",
    "StateStore",
    "StepRow",
    "StepWrite",
    "Storage",
    "StreamLog",
    "StreamRecord",
    "StreamStats",
    "TxnOp",
    "WorkerRow",
    "check_range",
    "check_seconds",
    "check_size",
    "check_text",
    "expires_at",
    "fence_conflict",
    "next_lineage",
    "stream_conflict",
    "txn_conflict",
    "value_limit",
    "write_conflict",
]
