"""The journal's records: runs, steps and what a commit writes, owned by ``surefoot.durable``.

A run is a header row plus one row per step, keyed by (run_id, pos). ``pos`` is the step's
position, a string: "1", "2", … in the workflow's own task, "3.1", "3.2", … inside the task
that got position 3 (``asyncio.gather`` of sub-flows). Every write of a running run is
conditional on the lease epoch the writer holds, so a zombie's late write is refused.
Values (``args``, ``result``, ``error``, ``payload``) are codec JSON text; times are
``Clock.now()`` seconds. The protocols that read and write them are in
:mod:`~surefoot.storage.journal` and the modules of each ability beside it.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = [
    "ENDED",
    "RUN_ORDERS",
    "TAKEOVER_REASONS",
    "TERMINAL",
    "UNFINISHED",
    "AuditRow",
    "ChildWrite",
    "Record",
    "RunRow",
    "RunStatus",
    "RunWrite",
    "StepRow",
    "StepWrite",
    "WorkerRow",
    "sql_list",
]


class RunStatus(enum.StrEnum):
    """Every status a run can be in; each is its own value (``RunStatus.PENDING == "pending"``).

    ``pending``: waits for a worker. ``running``: a worker holds its lease. ``sleeping``:
    suspended at a timer or a signal, no worker held. ``succeeded`` / ``failed`` /
    ``cancelled``: ended (:data:`TERMINAL`). ``needs_attention``: stopped until an operator
    acts (retry, resolve, cancel).
    """

    PENDING = "pending"
    RUNNING = "running"
    SLEEPING = "sleeping"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    NEEDS_ATTENTION = "needs_attention"


TERMINAL: frozenset[str] = frozenset(
    s.value for s in (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED)
)
"""Statuses a run never leaves on its own: it ended (``needs_attention`` waits for an operator)."""

ENDED: frozenset[str] = TERMINAL | {RunStatus.NEEDS_ATTENTION.value}
"""Statuses at which an execution stops with nothing left to claim: ended, or parked."""

UNFINISHED: frozenset[str] = frozenset(s.value for s in RunStatus) - TERMINAL
"""Statuses of a run that may still move (a cancel still applies to it)."""


TAKEOVER_REASONS: dict[str, str] = {
    "lease_expired": "its lease had run out (its worker died or stalled past its lease)",
    "holder_dead": "its holder's process is gone (its liveness lock was free) and its lease "
    "had not run out",
    "restarted": "the same worker id took it back after that execution stopped (a restart), "
    "without waiting for its lease",
    "operator": "an operator resumed it",
}
"""Why a run in flight changed hands, as a ``taken_over`` audit entry's ``reason`` says
(its ``why`` ends with the sentence given here): the code, and what it means."""


def sql_list(statuses: Iterable[str]) -> str:
    """``statuses`` as a SQL list literal, in :class:`RunStatus` order: ``('a', 'b')``."""
    wanted = set(statuses)
    return "(" + ", ".join(f"'{s.value}'" for s in RunStatus if s in wanted) + ")"


@dataclass(slots=True)
class RunRow:
    """A run's header, as stored.

    Attributes:
        run_id: the run's id (its idempotency key). workflow / version: what runs it.
        structure_hash: a hash of the workflow's step structure when the run began.
        args: codec JSON of ``[args, kwargs]``. strategy: ``restart``, ``journal`` or
        ``journal_keys``. status: pending, running, sleeping, succeeded, failed, cancelled,
        needs_attention. result / error: codec JSON when finished. owner / epoch /
        lease_until: the lease. wake_at: when a sleeping run is due (None: only a signal
        wakes it). waiting_for: the signal name a sleeping run waits for. claims: times
        the run was claimed since it last suspended or an operator moved it (``max_claims``).
        queue / priority / dedup_id: the named queue the run waits in (None: any worker
        takes it), its priority there (lower first) and its deduplication id.
        parent_id: the run that started this one as a child. deadline_at: when the run
        times out (None: never). started_at: when a queue first let the run start.
    """

    run_id: str
    workflow: str
    version: str
    structure_hash: str
    args: str
    strategy: str
    status: str
    created_at: float
    updated_at: float
    result: str | None = None
    error: str | None = None
    owner: str | None = None
    epoch: int = 0
    lease_until: float | None = None
    wake_at: float | None = None
    waiting_for: str | None = None
    forked_from: str | None = None
    claims: int = 0
    queue: str | None = None
    priority: int = 0
    dedup_id: str | None = None
    parent_id: str | None = None
    deadline_at: float | None = None
    started_at: float | None = None


@dataclass(slots=True)
class StepRow:
    """One journalled step. ``status`` is ``intent`` (effect started, outcome unknown),
    ``waiting`` (a wait step not yet satisfied), ``done`` or ``error``."""

    run_id: str
    pos: str
    name: str
    kind: str
    status: str
    result: str | None
    error: str | None
    attempts: int
    epoch: int
    started_at: float
    finished_at: float | None
    seq: int = 0


@dataclass(slots=True)
class StepWrite:
    """Insert or update one step row, if the run's epoch is still ``epoch``.

    ``consume_signal`` marks that signal as delivered to this step in the same transaction.
    ``order``: the step's place in its run's journal (1, 2, …; the same for a position
    journalled again), numbered by the run that writes it; None where the writer does not
    know it (an operator's edit), and the journal finds it. SQLite keeps a run's steps in
    one range of one b-tree by it; PostgreSQL does not use it. ``audit``: entries
    ``(actor, action, detail)`` appended in the same transaction if the write is accepted
    (e.g. ``attempts``: what the step's provider calls went through).
    """

    run_id: str
    epoch: int
    pos: str
    name: str
    kind: str
    status: str
    result: str | None
    error: str | None
    attempts: int
    started_at: float
    finished_at: float | None
    consume_signal: int | None = None
    order: int | None = None
    audit: tuple[tuple[str, str, str], ...] = ()


@dataclass(slots=True)
class RunWrite:
    """Move a run the writer holds (``epoch``) to ``status``, releasing its lease.

    For ``sleeping``: ``wake_at`` and ``waiting_for``; a signal already waiting for
    ``waiting_for`` makes the run due at once. ``audit`` entries are ``(action, detail)``
    appended in the same transaction. ``parent``: the run that awaits this one as a child;
    when the run ends (succeeded, failed, cancelled) the parent is signalled in the same
    transaction.
    """

    run_id: str
    epoch: int
    status: str
    now: float
    actor: str
    result: str | None = None
    error: str | None = None
    wake_at: float | None = None
    waiting_for: str | None = None
    audit: list[tuple[str, str]] = field(default_factory=list)
    parent: str | None = None


@dataclass(slots=True)
class ChildWrite:
    """Create run ``child`` as a child of the writer's run and journal the writer's step
    ``step`` (its ``run_id`` and ``epoch`` are the writer's), in one transaction.

    The child is created only while the writer's run is ``running`` at ``step.epoch`` (a
    parent cancelled or taken over meanwhile creates nothing); a child that exists already
    is kept as it is. ``step`` is journalled, and the record applied, only if the child
    then exists as the writer's child, of the same workflow with the same arguments.
    """

    step: StepWrite
    child: RunRow

    @property
    def run_id(self) -> str:
        """The writer's run (a batch orders and fences its records by it)."""
        return self.step.run_id

    @property
    def epoch(self) -> int:
        return self.step.epoch


Record = StepWrite | RunWrite | ChildWrite
"""What the journal's ``commit`` writes in one transaction."""


@dataclass(slots=True)
class AuditRow:
    """One audit-log entry: who did what to a run, and when. ``detail`` is codec JSON."""

    run_id: str
    seq: int
    at: float
    actor: str
    action: str
    detail: str


#: The orders of ``Journal.page_runs``: newest first, or ``needs_attention`` first then newest.
RUN_ORDERS = ("newest", "attention")


@dataclass(slots=True)
class WorkerRow:
    """A worker as the journal last saw it.

    Attributes:
        worker_id: its id. workflows: the (workflow, version) pairs it offers.
        seen_at: when it last registered (it does so as it starts and as it polls).
        leases: running runs whose lease it holds and that have not expired.
    """

    worker_id: str
    workflows: list[tuple[str, str]]
    seen_at: float
    leases: int
