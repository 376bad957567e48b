"""Run management: look at runs and act on them (operator actions are in the audit log;
a signal is recorded in the journal's signals table and the step that consumed it).

:class:`Operations` is a part of ``App`` (which offers each method under the same name);
it is given what it reads, through :class:`OperationsHost`.
"""

from __future__ import annotations

import concurrent.futures
import logging
import uuid
from typing import Any, Protocol

from .. import codec, telemetry
from ..errors import JournalError, UnknownRunError
from ..storage.runs import RunStatus, StepWrite
from ..storage.runs import WorkerRow as WorkerInfo
from ._handle import RunHandle, RunSource
from ._handover import lease_left, take_from_dead_holder
from ._types import STATUSES, TERMINAL, AuditEntry, RunDetail, RunInfo, StepInfo
from ._values import read

__all__ = ["Operations", "OperationsHost"]

log = logging.getLogger("surefoot.durable")


class OperationsHost(RunSource, Protocol):
    """What run management reads from its app, at each use: what a handle reads, and this
    app's worker id and lease (a resumed run is claimed under them)."""

    @property
    def worker_id(self) -> str: ...
    @property
    def lease(self) -> float: ...


class Operations:
    """Run management: list, show, signal, resume, cancel, retry, resolve, fork, stranded.
    From Python through ``App``; ``surefoot runs …`` wraps the same calls.

    Args:
        host: the app (its journal, clock, registry, executor and settings, read live).
    """

    def __init__(self, host: OperationsHost) -> None:
        self.host = host

    def _handle(
        self, run_id: str, future: concurrent.futures.Future[str] | None = None
    ) -> RunHandle:
        return RunHandle(self.host, run_id, drive=True, future=future)

    def signal(
        self, run_id: str, name: str, payload: Any = None, *, signal_id: str | None = None
    ) -> bool:
        """Deliver signal ``name`` to a run (see ``App.signal``, which documents it)."""
        text = codec.dumps(payload, where=f"the payload of signal {name!r}")
        row = self.host.journal.get_run(run_id)
        if row is None:
            raise UnknownRunError(run_id, self.host.url)
        if row.status in TERMINAL:
            if signal_id is not None and self._delivered(run_id, signal_id):
                return False  # a repeated send of a delivered signal: nothing to do
            raise JournalError(
                f"run {run_id!r} has ended ({row.status}); no wait_for({name!r}) will receive "
                "this signal, so nothing was sent"
            )
        now = self.host.clock.now()
        sent = self.host.journal.signal(run_id, name, text, now=now, signal_id=signal_id)
        if sent:
            detail = codec.dumps({"name": name, "signal_id": signal_id})
            self.host.journal.audit(
                run_id, actor="operator", action="signal", detail=detail, now=now
            )
        return sent

    def _delivered(self, run_id: str, signal_id: str) -> bool:
        """Whether the audit log records signal ``signal_id`` as delivered to ``run_id``."""
        for a in self.host.journal.audit_log(run_id):
            if a.action == "signal" and codec.loads(a.detail).get("signal_id") == signal_id:
                return True
        return False

    def list_runs(
        self,
        *,
        status: str | None = None,
        workflow: str | None = None,
        limit: int = 100,
        version: str | None = None,
        since: float | None = None,
        search: str | None = None,
        order: str = "newest",
        offset: int = 0,
    ) -> list[RunInfo]:
        """Runs matching every given filter, ``limit`` of them from ``offset`` on.

        Args:
            status / workflow / version: exact matches.
            since: only runs created at or after this clock time.
            search: only runs whose id contains this text.
            order: ``"newest"`` (newest first, then by run id) or ``"attention"``
                (``needs_attention`` runs first, then newest).
            offset / limit: the page (skip ``offset`` runs, return at most ``limit``).

        Raises:
            ConfigError: an unknown order, a negative offset or a limit below 1.
        """
        rows = self.host.journal.page_runs(
            status=status,
            workflow=workflow,
            version=version,
            since=since,
            search=search,
            order=order,
            offset=offset,
            limit=limit,
        )
        return [RunInfo.from_row(r) for r in rows]

    def count_runs(
        self,
        *,
        status: str | None = None,
        workflow: str | None = None,
        version: str | None = None,
        since: float | None = None,
        search: str | None = None,
    ) -> dict[str, int]:
        """How many runs match the filters (as ``list_runs``), per status; every status in
        ``STATUSES`` is a key (0 when none)."""
        got = self.host.journal.count_runs(
            status=status, workflow=workflow, version=version, since=since, search=search
        )
        return {s: got.get(s, 0) for s in STATUSES} | got

    def run_versions(self) -> list[tuple[str, str]]:
        """The (workflow, version) pairs the journal's runs belong to, sorted."""
        return self.host.journal.run_versions()

    def workers(self) -> list[WorkerInfo]:
        """Every worker the journal has seen: its id, the workflow versions it offers, when
        it was last seen and how many unexpired leases it holds (by id)."""
        return self.host.journal.workers(now=self.host.clock.now())

    def show(self, run_id: str) -> RunDetail:
        """A run's header, steps (timings, results, errors), audit log, and stranded flag.

        Raises:
            UnknownRunError: no such run.
        """
        row = self.host.journal.get_run(run_id)
        if row is None:
            raise UnknownRunError(run_id, self.host.url)
        key = (row.workflow, row.version)
        # What workers advertise only: each row holds the time until which its worker is
        # live (see Executor.announce), so neither this app's registry nor its lease counts.
        live = self.host.journal.live_workflows(since=self.host.clock.now())
        waiting = row.status in ("pending", "sleeping") or (
            row.status == "running" and (row.lease_until or 0) < self.host.clock.now()
        )
        wf = self.host.registry.get(*key)
        return RunDetail(
            run=RunInfo.from_row(row),
            steps=[StepInfo.from_row(s) for s in self.host.journal.steps(run_id)],
            audit=[AuditEntry.from_row(a) for a in self.host.journal.audit_log(run_id)],
            registered=wf is not None,
            stranded=waiting and key not in live,
            code_changed=wf is not None and wf.structure_hash != row.structure_hash,
        )

    def resume(self, run_id: str, *, wait_for_lease: bool = True) -> RunHandle:
        """Run an unfinished run here now, if nobody else holds it.

        A run held by a worker whose process is gone (its liveness lock is free, as
        workers see it) is taken over at once, audited ``taken_over`` with reason
        ``holder_dead``. A run whose holder is alive (or not known to be dead) keeps its
        lease: the returned handle takes the run when the lease runs out, and a warning
        (logger ``surefoot.durable``, event ``resume_waits``) says for how long; with
        ``wait_for_lease=False`` that is a ``JournalError`` instead. When it takes the
        run, ``resume`` is recorded in the audit log (with the status it found and this
        app's worker id).

        Raises:
            UnknownRunError: no such run.
            WorkflowNotFoundError: its workflow version is not registered here.
            JournalError: ``wait_for_lease=False`` and a live holder's lease has not run out.
        """
        row = self.host.journal.get_run(run_id)
        if row is None:
            raise UnknownRunError(run_id, self.host.url)
        self.host.registry.workflow_for(row.workflow, row.version)
        fut = None
        if row.status in (RunStatus.PENDING, RunStatus.SLEEPING, RunStatus.RUNNING):
            now = self.host.clock.now()
            mine = row.owner == self.host.worker_id and run_id not in self.host.executor.active
            epoch = take_from_dead_holder(self.host, row)
            claimed = (
                [(run_id, epoch)]
                if epoch is not None
                else self.host.journal.claim(
                    self.host.worker_id,
                    now=now,
                    lease_until=now + self.host.lease,
                    workflows=[],
                    limit=1,
                    run_id=run_id,
                    force=row.status == "sleeping" or mine,
                    reason="operator",
                )
            )
            if claimed:
                detail = codec.dumps({"from": row.status, "worker": self.host.worker_id})
                self.host.journal.audit(
                    run_id, actor="operator", action="resume", detail=detail, now=now
                )
                fut = self.host.executor.submit(run_id, claimed[0][1])
            else:
                self._say_lease_wait(run_id, wait_for_lease)
                return RunHandle(self.host, run_id, drive=True, resume_as=self.host.worker_id)
        return self._handle(run_id, fut)

    def _say_lease_wait(self, run_id: str, wait: bool) -> None:
        """The run is held by another, live worker: say how long its lease has to go (a
        warning), or refuse (``wait`` False)."""
        row = self.host.journal.get_run(run_id)
        left = None if row is None else lease_left(self.host, row)
        if row is None or left is None:
            return  # it moved meanwhile (ended, or released): the handle sees to it
        why = (
            f"run {run_id!r} is held by worker {row.owner!r}, whose process is alive or "
            f"not known to be gone, at epoch {row.epoch}; its lease runs out in {left:.1f} s"
        )
        if not wait:
            raise JournalError(
                f"{why}, so it was not resumed. Stop that worker (a dead holder's run is "
                "taken over at once), or resume again after the lease runs out"
            )
        telemetry.log_event(
            log,
            "resume_waits",
            logging.WARNING,
            run_id=run_id,
            holder=row.owner,
            epoch=row.epoch,
            lease_left_s=round(left, 1),
            why=f"{why}; resume takes it then",
        )

    def cancel(self, run_id: str, *, reason: str = "") -> bool:
        """Cancel an unfinished run (a worker running it is fenced off at its next write).

        Its unfinished child runs (and theirs) are cancelled in the same transaction; a
        parent awaiting this run gets ``RunFailedError`` (status cancelled).

        Returns False if the run had already ended.

        Raises:
            UnknownRunError: no such run.
        """
        done = self.host.journal.children.cancel_tree(
            run_id,
            now=self.host.clock.now(),
            actor="operator",
            detail=codec.dumps({"reason": reason}),
        )
        return run_id in done

    def retry(self, run_id: str, *, reason: str = "") -> RunHandle:
        """Send a ``needs_attention`` or ``failed`` run back to work after a fix.

        Every step already journalled as done is kept and replays. For a run that needs
        attention, steps whose outcome was unknown run again (same key), and a failed
        compensation is tried again, resuming the rollback where it stopped. For a run
        that failed (its retry policy ran out, or its code raised), the steps that ended in
        an error (and any of unknown outcome) run again from there, as Temporal's reset and
        DBOS's resume do. The ``retry`` audit entry says who (``worker``), from which status
        (``from``), why (``reason``) and which positions run again (``rerun``). The returned
        handle runs it here if you wait on it; workers may take it too.

        Raises:
            UnknownRunError: no such run.
            JournalError: the run neither needs attention nor failed; or it failed and its
                compensations undid effects (replaying those effects as done would be
                wrong: fork it instead); or it is a child run (its parent was told it
                failed: fork the parent).
        """
        row = self.host.journal.get_run(run_id)
        if row is None:
            raise UnknownRunError(run_id, self.host.url)
        steps = self.host.journal.steps(run_id)
        if row.status == "failed":
            self._refuse_failed_retry(row.run_id, row.parent_id, steps)
            reset = [s.pos for s in steps if s.status in ("error", "intent")]
        else:
            reset = [
                s.pos
                for s in steps
                if s.status == "intent" or (s.kind == "compensate" and s.status == "error")
            ]
        detail = {"reason": reason, "rerun": reset, "from": row.status}
        done = self.host.journal.operator(
            run_id,
            status="pending",
            from_statuses=(row.status,) if row.status == "failed" else ("needs_attention",),
            now=self.host.clock.now(),
            actor="operator",
            action="retry",
            detail=codec.dumps({**detail, "worker": self.host.worker_id}),
            reset_steps=reset,
        )
        if done is None:
            raise JournalError(
                f"run {run_id!r} is {row.status}; only runs that need attention or failed "
                "can be retried (resume unfinished runs with `surefoot runs resume`)"
            )
        return self._handle(run_id)

    @staticmethod
    def _refuse_failed_retry(run_id: str, parent_id: str | None, steps: list[Any]) -> None:
        """A failed run that cannot go on from its failed step: say why and what to do."""
        undone = [s.pos for s in steps if s.kind == "compensate" and s.status == "done"]
        if undone:
            raise JournalError(
                f"run {run_id!r} failed and its compensations undid effects (positions "
                f"{', '.join(undone)}); retrying would replay those effects as done. Fork it "
                f"from the step to run again: `surefoot runs fork {run_id} POS`"
            )
        if parent_id is not None:
            raise JournalError(
                f"run {run_id!r} is a child of run {parent_id!r}, which was told it failed; "
                f"fork the parent from the step that started this child (`surefoot runs "
                f"fork {parent_id} POS`) to run both again"
            )

    def resolve(
        self, run_id: str, pos: str | int, result: Any = None, *, reason: str = ""
    ) -> RunHandle:
        """Record what an effect of unknown outcome did, without running it again.

        For a ``needs_attention`` run stopped at an effect whose outcome was unknown: a
        person checked that it happened, and gives its result. The step is journalled as
        done with ``result`` and the run goes back to ``pending``.

        Raises:
            UnknownRunError: no such run.
            JournalError: the run does not need attention, or ``pos`` is not an effect
                whose outcome is unknown.
            EncodeError: ``result`` cannot be stored.
            DecodeError: ``result`` does not fit the step's return annotation (when the
                step is registered here), so the replay could not read it.
        """
        row = self.host.journal.get_run(run_id)
        if row is None:
            raise UnknownRunError(run_id, self.host.url)
        where = str(pos)
        step = next((s for s in self.host.journal.steps(run_id) if s.pos == where), None)
        if row.status != "needs_attention" or step is None or step.status != "intent":
            raise JournalError(
                f"run {run_id!r} is {row.status} and its step {where} is "
                f"{step.status if step else 'not journalled'}; resolve() records the outcome "
                "of an effect whose outcome is unknown in a run that needs attention"
            )
        what = f"the result given for step {where} {step.name!r}"
        text = codec.dumps(result, where=what)
        sd = self.host.registry.step(step.name)
        if sd is not None:  # what the replay will read: refuse now what it could not
            read(text, sd.returns, what)
        now = self.host.clock.now()
        detail = codec.dumps({"reason": reason, "pos": where, "step": step.name})
        done = StepWrite(
            run_id,
            row.epoch,
            where,
            step.name,
            step.kind,
            "done",
            text,
            None,
            step.attempts,
            step.started_at,
            now,
        )
        # One transaction: the run goes back to pending with the step already done, so no
        # worker can claim it in between and meet the unknown outcome again.
        moved = self.host.journal.operator(
            run_id,
            status="pending",
            from_statuses=("needs_attention",),
            now=now,
            actor="operator",
            action="resolve",
            detail=detail,
            put_steps=[done],
        )
        if moved is None:
            raise JournalError(f"run {run_id!r} changed status meanwhile; look at it again")
        return self._handle(run_id)

    def fork(self, run_id: str, pos: str | int, *, new_run_id: str | None = None) -> RunHandle:
        """A new pending run that reuses ``run_id``'s journal before step ``pos``.

        Steps before ``pos`` replay from the copied journal; ``pos`` and later run again.
        The new run's audit log starts with ``forked``; the parent's gets ``fork`` (``as``).

        Raises:
            UnknownRunError: no such run. ConfigError: no step at ``pos``.
            RunConflictError: ``new_run_id`` is taken.
        """
        new = new_run_id or f"{run_id}-fork-{uuid.uuid4().hex[:8]}"
        now = self.host.clock.now()
        self.host.journal.fork(run_id, new, str(pos), now=now)
        # the new run's log starts with ``forked`` (written by the journal); the parent's
        # says where its journal went
        text = codec.dumps({"as": new, "pos": str(pos), "worker": self.host.worker_id})
        self.host.journal.audit(run_id, actor="operator", action="fork", detail=text, now=now)
        return self._handle(new)

    def stranded(self, *, limit: int = 1000) -> list[dict[str, Any]]:
        """Unfinished runs whose workflow version no live worker offers, with what to do.

        The same test as ``show(run_id).stranded`` (worker advertisements in the journal),
        for every pending, sleeping or abandoned run at once (at most ``limit`` of each).
        """
        j = self.host.journal
        now = self.host.clock.now()
        live = j.live_workflows(since=now)
        rows = [
            r
            for s in (RunStatus.PENDING, RunStatus.SLEEPING)
            for r in j.list_runs(status=s.value, limit=limit)
        ]
        running = j.list_runs(status=RunStatus.RUNNING.value, limit=limit)
        rows += [r for r in running if (r.lease_until or 0) < now]
        out = []
        for r in rows:
            if (r.workflow, r.version) in live:
                continue
            out.append(
                {
                    "run_id": r.run_id,
                    "workflow": r.workflow,
                    "version": r.version,
                    "status": r.status,
                    "todo": f"start a worker that registers {r.workflow!r} version "
                    f"{r.version!r} (keep the old code deployed until its runs finish), or "
                    f"cancel it (`surefoot runs cancel {r.run_id}`) and start it again on the "
                    "current version",
                }
            )
        return out
