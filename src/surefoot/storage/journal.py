"""``Journal``: runs, steps, leases, timers, signals and the audit log, owned by
``surefoot.durable``; the contract between ``durable`` and a backend.

Its records are in :mod:`~surefoot.storage.runs`. Beyond the core (runs, steps, leases,
signals, audit, workers, listings), a journal offers each ability ``durable`` uses as a
part object declared by its own protocol, in its own module:

==================  ==========================================  ==========================
attribute           protocol                                    when absent
==================  ==========================================  ==========================
``queues``          :class:`~surefoot.storage.queues.Queues`        always offered
``children``        :class:`~surefoot.storage.children.Children`    always offered
``schedules``       :class:`~surefoot.storage.schedules.Schedules`  always offered
``pruning``         :class:`~surefoot.storage.pruning.Pruning`      always offered
``chunks``          :class:`~surefoot.storage.chunks.Chunks`        None: values stay in rows
``liveness``        :class:`~surefoot.storage.liveness.Liveness`    None: only leases decide
``waking``          :class:`~surefoot.storage.waking.Waking`        None: callers poll
==================  ==========================================  ==========================
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from .children import Children
from .chunks import Chunks, ChunkWrite
from .liveness import Liveness
from .pruning import Pruning
from .queues import Queues
from .runs import AuditRow, Record, RunRow, StepRow, StepWrite, WorkerRow
from .schedules import Schedules
from .waking import Waking

__all__ = ["Journal"]


@runtime_checkable
class Journal(Protocol):
    """Runs, steps, leases, timers, signals and the audit log. Every method is atomic.

    ``create_run`` inserts a run with everything its row carries (a queue, priority and
    dedup id, a parent, a deadline): it returns (the stored row, created); when an unfinished
    run of the same queue holds the row's ``dedup_id``, that run's row. ``commit`` writes a
    batch in one transaction (one fsync) and returns, per record, whether it was applied:
    False means the writer's epoch is stale (a zombie); ``chunks`` (only where ``chunks`` is
    offered) are the nodes of chunked values the records reference, in the same transaction.
    """

    url: str

    @property
    def queues(self) -> Queues: ...
    @property
    def children(self) -> Children: ...
    @property
    def schedules(self) -> Schedules: ...
    @property
    def pruning(self) -> Pruning: ...
    @property
    def chunks(self) -> Chunks | None: ...
    @property
    def liveness(self) -> Liveness | None: ...
    @property
    def waking(self) -> Waking | None: ...

    def create_run(self, row: RunRow) -> tuple[RunRow, bool]: ...
    def get_run(self, run_id: str) -> RunRow | None: ...
    def list_runs(
        self, *, status: str | None = None, workflow: str | None = None, limit: int = 100
    ) -> list[RunRow]: ...
    def steps(self, run_id: str) -> list[StepRow]: ...
    def commit(
        self, records: list[Record], chunks: list[ChunkWrite] | None = None
    ) -> list[bool]: ...
    def claim(
        self,
        owner: str,
        *,
        now: float,
        lease_until: float,
        workflows: list[tuple[str, str]],
        limit: int,
        run_id: str | None = None,
        force: bool = False,
        reason: str | None = None,
    ) -> list[tuple[str, int]]: ...
    def heartbeat(
        self, owner: str, runs: list[tuple[str, int]], *, lease_until: float, now: float
    ) -> list[str]: ...
    def operator(
        self,
        run_id: str,
        *,
        status: str,
        from_statuses: tuple[str, ...],
        now: float,
        actor: str,
        action: str,
        detail: str,
        reset_steps: list[str] | None = None,
        put_steps: list[StepWrite] | None = None,
    ) -> RunRow | None: ...
    def signal(
        self, run_id: str, name: str, payload: str, *, now: float, signal_id: str | None
    ) -> bool: ...
    def pending_signal(self, run_id: str, name: str) -> tuple[int, str] | None: ...
    def audit(self, run_id: str, *, actor: str, action: str, detail: str, now: float) -> None: ...
    def audit_log(self, run_id: str) -> list[AuditRow]: ...
    def fork(self, run_id: str, new_run_id: str, before_pos: str, *, now: float) -> RunRow: ...
    def register_worker(
        self,
        worker_id: str,
        workflows: list[tuple[str, str]],
        *,
        now: float,
        queues: Sequence[str] = (),
    ) -> None: ...
    def live_workflows(self, *, since: float) -> set[tuple[str, str]]: ...
    def page_runs(
        self,
        *,
        status: str | None = None,
        workflow: str | None = None,
        version: str | None = None,
        since: float | None = None,
        search: str | None = None,
        order: str = "newest",
        offset: int = 0,
        limit: int = 100,
    ) -> list[RunRow]: ...
    def count_runs(
        self,
        *,
        status: str | None = None,
        workflow: str | None = None,
        version: str | None = None,
        since: float | None = None,
        search: str | None = None,
    ) -> dict[str, int]: ...
    def backlog(self, *, now: float) -> tuple[int, float | None]: ...
    def run_versions(self) -> list[tuple[str, str]]: ...
    def workers(self, *, now: float) -> list[WorkerRow]: ...
    def close(self) -> None:
        """Release what this journal holds of its own (listeners, liveness locks); the
        storage owns the connections."""
        ...
