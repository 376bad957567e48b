"""Values the durable API returns: run states, run and step views, audit entries."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import codec
from ..storage.runs import TERMINAL, AuditRow, RunRow, RunStatus, StepRow

__all__ = [
    "STATUSES",
    "STRATEGIES",
    "TERMINAL",
    "WAIT_SEP",
    "AuditEntry",
    "RunDetail",
    "RunInfo",
    "RunStatus",
    "StepInfo",
    "StepSpec",
]

STATUSES: tuple[str, ...] = tuple(s.value for s in RunStatus)
"""Every run status (:class:`RunStatus`). ``needs_attention`` stops a run until an operator
acts."""

STRATEGIES = ("restart", "journal", "journal_keys")
"""Recovery strategies: rerun from the start; replay the journal; journal plus intent rows
and idempotency keys (the default)."""

WAIT_SEP = "\x1f"
"""Separates signal names in a sleeping run's ``waiting_for`` (a name may not contain it)."""


def _names(waiting_for: str | None) -> str | None:
    return None if waiting_for is None else waiting_for.replace(WAIT_SEP, ", ")


def _decode(text: str | None) -> Any:
    return None if text is None else codec.loads(text)


@dataclass(frozen=True, slots=True)
class RunInfo:
    """A run's header.

    Attributes:
        run_id, workflow, version, structure_hash, strategy, status: as journalled.
        args / kwargs: the workflow's arguments. result: the result when succeeded.
        error: the recorded error (a dict: type ``t``, ``message``) when failed.
        owner / epoch / lease_until: the lease. wake_at / waiting_for: why it sleeps
        (the signal names it waits for, comma-separated when several waits under one
        ``gather`` suspended together). created_at / updated_at: clock times.
        forked_from: the run it was forked from. claims: times the run was claimed since
        it last suspended or an operator moved it (past ``max_claims`` it is parked).
        queue / priority: the named queue it waits in and its priority there.
        parent_id: the run that awaits it as a child. deadline_at: when it times out.
    """

    run_id: str
    workflow: str
    version: str
    structure_hash: str
    strategy: str
    status: str
    args: list[Any]
    kwargs: dict[str, Any]
    result: Any
    error: Any
    owner: str | None
    epoch: int
    lease_until: float | None
    wake_at: float | None
    waiting_for: str | None
    created_at: float
    updated_at: float
    forked_from: str | None
    claims: int = 0
    queue: str | None = None
    priority: int = 0
    parent_id: str | None = None
    deadline_at: float | None = None

    @classmethod
    def from_row(cls, row: RunRow) -> RunInfo:
        args, kwargs = codec.loads(row.args)
        err = None if row.error is None else _error_view(row.error)
        return cls(
            run_id=row.run_id,
            workflow=row.workflow,
            version=row.version,
            structure_hash=row.structure_hash,
            strategy=row.strategy,
            status=row.status,
            args=list(args),
            kwargs=dict(kwargs),
            result=_decode(row.result),
            error=err,
            owner=row.owner,
            epoch=row.epoch,
            lease_until=row.lease_until,
            wake_at=row.wake_at,
            waiting_for=None
            if row.waiting_for is None
            else row.waiting_for.replace(WAIT_SEP, ", "),
            created_at=row.created_at,
            updated_at=row.updated_at,
            forked_from=row.forked_from,
            claims=row.claims,
            queue=row.queue,
            priority=row.priority,
            parent_id=row.parent_id,
            deadline_at=row.deadline_at,
        )


def _error_view(text: str) -> dict[str, Any]:
    """Errors are stored as the codec's error data; show them as plain dicts."""
    import json

    data = json.loads(text)
    if isinstance(data, dict) and data.get("$sf") == "error":
        return {"type": data.get("t"), "message": data.get("message")}
    return {"type": "unknown", "message": str(data)}


@dataclass(frozen=True, slots=True)
class StepInfo:
    """One journalled step.

    Attributes:
        pos: the position ("3", or "4.1" inside a concurrent branch, "7.undo" for the
            compensation of step 7). name / kind: the step function and its kind (pure,
            effect, sleep, signal, compensate). status: intent, waiting, done or error.
        result: the decoded result. error: ``{"type", "message"}`` when it failed.
        attempts: attempts made. epoch: the lease epoch of the writer.
        started_at / finished_at: clock times (None while unfinished).
    """

    pos: str
    name: str
    kind: str
    status: str
    result: Any
    error: Any
    attempts: int
    epoch: int
    started_at: float
    finished_at: float | None

    @property
    def duration(self) -> float | None:
        """Seconds from start to finish, when finished."""
        return None if self.finished_at is None else self.finished_at - self.started_at

    @classmethod
    def from_row(cls, row: StepRow) -> StepInfo:
        return cls(
            pos=row.pos,
            name=row.name,
            kind=row.kind,
            status=row.status,
            result=_decode(row.result),
            error=None if row.error is None else _error_view(row.error),
            attempts=row.attempts,
            epoch=row.epoch,
            started_at=row.started_at,
            finished_at=row.finished_at,
        )


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One audit-log entry: ``actor`` (a worker id or ``operator``) did ``action``."""

    seq: int
    at: float
    actor: str
    action: str
    detail: Any

    @classmethod
    def from_row(cls, row: AuditRow) -> AuditEntry:
        return cls(row.seq, row.at, row.actor, row.action, codec.loads(row.detail))


@dataclass(frozen=True, slots=True)
class RunDetail:
    """Everything about one run: header, steps, audit log, and whether it is stranded.

    Attributes:
        run: the header. steps: in journal order. audit: oldest first.
        registered: this process has the run's workflow version registered.
        stranded: the run waits for a workflow version that no live worker offers,
            judged from the journal only (what serving workers advertise there, each live
            for three of its own leases past its last heartbeat): the same answer from
            every process, whether or not it registers the version itself.
        code_changed: the code registered here under the run's version refers to other
            steps than the code the run began with (replay may meet a StepMismatchError).
    """

    run: RunInfo
    steps: list[StepInfo] = field(default_factory=list)
    audit: list[AuditEntry] = field(default_factory=list)
    registered: bool = True
    stranded: bool = False
    code_changed: bool = False


@dataclass(frozen=True, slots=True)
class StepSpec:
    """What ``App.describe`` says about one step of a workflow.

    Attributes:
        name: the step. kind: pure, effect or wait. compensate: the compensation's name.
        idempotent: an effect that may rerun safely. takes_key: the effect accepts ``key``.
        key_plan: how its idempotency key is made. retry: max attempts.
    """

    name: str
    kind: str
    compensate: str | None
    idempotent: bool
    takes_key: bool
    key_plan: str
    retry: int
