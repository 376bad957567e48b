"""The journal as the app uses it: values through the payload codec, large step results as
chunks (see ``._payloads``); everything else passed on as it is.

:class:`CodedJournal` implements the ``Journal`` protocol by delegating each call
explicitly: the calls that carry values (run headers, step rows, signal payloads, a
schedule's new runs, a run's children) pass them through :class:`~._payloads.StoredValues`;
the others, and the parts that carry none (queues, pruning, chunks, liveness, waking), are
the wrapped journal's own.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..storage.children import Children
from ..storage.chunks import Chunks, ChunkWrite
from ..storage.journal import Journal
from ..storage.liveness import Liveness
from ..storage.pruning import Pruning
from ..storage.queues import Queues
from ..storage.runs import AuditRow, Record, RunRow, StepRow, StepWrite, WorkerRow
from ..storage.schedules import ScheduleRow, Schedules
from ..storage.waking import Waking
from ._payloads import PayloadCodec, StoredValues

__all__ = ["CodedChildren", "CodedJournal", "CodedSchedules", "wrap"]


def wrap(journal: Journal, codec: PayloadCodec | None, chunk_at: int) -> Journal:
    """``journal`` as the app uses it: through a :class:`CodedJournal` when it has a chunk
    store (to read chunked values, whatever ``chunk_at``) or a codec is set."""
    if codec is None and journal.chunks is None:
        return journal
    return CodedJournal(journal, StoredValues(journal.url, codec, journal.chunks, chunk_at))


class CodedChildren:
    """A journal's children, their headers decoded."""

    def __init__(self, children: Children, values: StoredValues) -> None:
        self._children = children
        self._values = values

    def of(self, run_id: str) -> list[RunRow]:
        return [self._values.run_out(r) for r in self._children.of(run_id)]

    def cancel_tree(self, run_id: str, *, now: float, actor: str, detail: str) -> list[str]:
        return self._children.cancel_tree(run_id, now=now, actor=actor, detail=detail)


class CodedSchedules:
    """A journal's schedules, the runs a tick creates encoded."""

    def __init__(self, schedules: Schedules, values: StoredValues) -> None:
        self._schedules = schedules
        self._values = values

    def put(
        self,
        name: str,
        *,
        workflow: str,
        cron: str,
        args: str,
        catchup: str,
        next_at: float,
        now: float,
    ) -> None:
        self._schedules.put(
            name, workflow=workflow, cron=cron, args=args, catchup=catchup, next_at=next_at,
            now=now,
        )  # fmt: skip

    def all(self) -> list[ScheduleRow]:
        return self._schedules.all()

    def fire(
        self, name: str, *, expected: float, next_at: float, runs: list[RunRow], now: float
    ) -> int:
        coded = [self._values.run_in(r) for r in runs]
        return self._schedules.fire(name, expected=expected, next_at=next_at, runs=coded, now=now)


class CodedJournal:
    """``journal`` with its stored values passed through ``values`` (see the module docs)."""

    def __init__(self, journal: Journal, values: StoredValues) -> None:
        self._j = journal
        self._values = values
        self.url = journal.url
        self._children = CodedChildren(journal.children, values)
        self._schedules = CodedSchedules(journal.schedules, values)
        # the hot path's two questions, answered once: values as they are, and how large a
        # step result has to be to be chunked
        self._as_is = values.codec is None
        self._chunk_at = values.chunk_at or 1 << 62

    @property
    def wrapped(self) -> Journal:
        """The journal this one passes values through to (the backend's own)."""
        return self._j

    # -- the parts ---------------------------------------------------------------------

    @property
    def queues(self) -> Queues:
        return self._j.queues

    @property
    def children(self) -> CodedChildren:
        return self._children

    @property
    def schedules(self) -> CodedSchedules:
        return self._schedules

    @property
    def pruning(self) -> Pruning:
        return self._j.pruning

    @property
    def chunks(self) -> Chunks | None:
        return self._j.chunks

    @property
    def liveness(self) -> Liveness | None:
        return self._j.liveness

    @property
    def waking(self) -> Waking | None:
        return self._j.waking

    # -- calls that carry values -------------------------------------------------------

    def create_run(self, row: RunRow) -> tuple[RunRow, bool]:
        stored, created = self._j.create_run(self._values.run_in(row))
        return self._values.run_out(stored), created

    def get_run(self, run_id: str) -> RunRow | None:
        row = self._j.get_run(run_id)
        return None if row is None else self._values.run_out(row)

    def list_runs(
        self, *, status: str | None = None, workflow: str | None = None, limit: int = 100
    ) -> list[RunRow]:
        rows = self._j.list_runs(status=status, workflow=workflow, limit=limit)
        return [self._values.run_out(r) for r in rows]

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
    ) -> list[RunRow]:
        rows = self._j.page_runs(
            status=status, workflow=workflow, version=version, since=since, search=search,
            order=order, offset=offset, limit=limit,
        )  # fmt: skip
        return [self._values.run_out(r) for r in rows]

    def steps(self, run_id: str) -> list[StepRow]:
        return self._values.steps_out(self._j.steps(run_id))

    def commit(self, records: list[Record], chunks: list[ChunkWrite] | None = None) -> list[bool]:
        if self._as_is and chunks is None:  # the hot path: as they are, unless one is large
            at = self._chunk_at
            for r in records:
                if type(r) is StepWrite and r.result is not None and len(r.result) >= at:
                    break
            else:
                return self._j.commit(records)
        nodes: list[ChunkWrite] = list(chunks or ())
        coded = [self._values.record_in(r, nodes) for r in records]
        return self._j.commit(coded, nodes) if nodes else self._j.commit(coded)

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
    ) -> RunRow | None:
        put = None if put_steps is None else [self._values.step_in(w) for w in put_steps]
        row = self._j.operator(
            run_id, status=status, from_statuses=from_statuses, now=now, actor=actor,
            action=action, detail=detail, reset_steps=reset_steps, put_steps=put,
        )  # fmt: skip
        return None if row is None else self._values.run_out(row)

    def fork(self, run_id: str, new_run_id: str, before_pos: str, *, now: float) -> RunRow:
        return self._values.run_out(self._j.fork(run_id, new_run_id, before_pos, now=now))

    def signal(
        self, run_id: str, name: str, payload: str, *, now: float, signal_id: str | None
    ) -> bool:
        coded = self._values.enc(payload) or ""
        return self._j.signal(run_id, name, coded, now=now, signal_id=signal_id)

    def pending_signal(self, run_id: str, name: str) -> tuple[int, str] | None:
        got = self._j.pending_signal(run_id, name)
        if got is None:
            return None
        return got[0], self._values.dec(got[1]) or ""

    # -- calls that carry none ---------------------------------------------------------

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
    ) -> list[tuple[str, int]]:
        return self._j.claim(
            owner, now=now, lease_until=lease_until, workflows=workflows, limit=limit,
            run_id=run_id, force=force, reason=reason,
        )  # fmt: skip

    def heartbeat(
        self, owner: str, runs: list[tuple[str, int]], *, lease_until: float, now: float
    ) -> list[str]:
        return self._j.heartbeat(owner, runs, lease_until=lease_until, now=now)

    def audit(self, run_id: str, *, actor: str, action: str, detail: str, now: float) -> None:
        self._j.audit(run_id, actor=actor, action=action, detail=detail, now=now)

    def audit_log(self, run_id: str) -> list[AuditRow]:
        return self._j.audit_log(run_id)

    def register_worker(
        self,
        worker_id: str,
        workflows: list[tuple[str, str]],
        *,
        now: float,
        queues: Sequence[str] = (),
    ) -> None:
        self._j.register_worker(worker_id, workflows, now=now, queues=queues)

    def live_workflows(self, *, since: float) -> set[tuple[str, str]]:
        return self._j.live_workflows(since=since)

    def count_runs(
        self,
        *,
        status: str | None = None,
        workflow: str | None = None,
        version: str | None = None,
        since: float | None = None,
        search: str | None = None,
    ) -> dict[str, int]:
        return self._j.count_runs(
            status=status, workflow=workflow, version=version, since=since, search=search
        )

    def backlog(self, *, now: float) -> tuple[int, float | None]:
        return self._j.backlog(now=now)

    def run_versions(self) -> list[tuple[str, str]]:
        return self._j.run_versions()

    def workers(self, *, now: float) -> list[WorkerRow]:
        return self._j.workers(now=now)

    def close(self) -> None:
        self._j.close()
