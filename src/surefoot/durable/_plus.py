"""The ``App`` API of issue 13: queues, child runs, deadlines, schedules, patches, retention.

``PlusApi`` is a mixin of ``App`` (its methods are documented there by name); ``Plus`` is
the per-app state behind it (queues and schedules declared here, workflow timeouts) and
creates runs that carry a queue, a parent or a deadline. Each feature lives in its own
module: ``_queues``, ``_children``, ``_deadlines``, ``_schedules``, ``_patches``,
``_retention``.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from .. import codec
from ..clock import seconds as _secs
from ..errors import ConfigError, RunConflictError
from ..storage.runs import RunRow
from ..storage.sql.journal_plus import JournalPlus
from ._children import child_step
from ._patches import patched as _patched
from ._queues import Queue, queue_view
from ._retention import Retention, prune_runs
from ._schedules import Schedule, fire_schedules
from ._types import STRATEGIES
from .engine import engine_scheme

if TYPE_CHECKING:
    from ._versions import Workflow

__all__ = ["Plus", "PlusApi", "refuse_another_run"]


def _timeout(value: Any) -> float | None:
    if value is None:
        return None
    out = _secs(value, "timeout")
    if out <= 0:
        raise ConfigError(f"timeout must be > 0 seconds, got {value!r}")
    return out


class Plus:
    """One app's queues, schedules and workflow timeouts; creates runs that carry them."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.queues: dict[str, Queue] = {}
        self.schedules: dict[str, Schedule] = {}
        self.timeouts: dict[tuple[str, str], float] = {}
        self._published: set[str] = set()
        self.schedules_put: set[str] = set()
        self._pruned_at: float | None = None

    def publish_queues(self) -> None:
        """Record this app's queue limits in the journal (once per queue per app)."""
        for q in self.queues.values():
            if q.name not in self._published:
                self.app.journal_plus.put_queue(q.name, q.limits, now=self.app.clock.now())
                self._published.add(q.name)

    def housekeep(self, retention: Retention | None) -> None:
        """A worker's chores on each claim: fire due schedules; prune when it is time."""
        app = self.app
        if self.schedules:
            fire_schedules(app)
        if retention is not None:
            now = app.clock.now()
            if self._pruned_at is None or now - self._pruned_at >= retention.every:
                self._pruned_at = now
                prune_runs(app, retention)

    def wants(self, wf: Workflow, queue: Any, timeout: Any) -> bool:
        """Whether a new run of ``wf`` needs this module (a queue or a deadline)."""
        return queue is not None or timeout is not None or (wf.name, wf.version) in self.timeouts

    def row(
        self,
        wf: Workflow,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        run_id: str | None,
        *,
        strategy: str | None = None,
        embedded: bool = False,
        queue: Queue | str | None = None,
        priority: int = 0,
        dedup_id: str | None = None,
        parent: str | None = None,
        timeout: Any = None,
    ) -> tuple[RunRow, str]:
        """The header of a new run (not stored), and its arguments' codec text.

        Raises:
            ConfigError: a bad strategy, run id, priority, dedup id, timeout or an
                undeclared queue. EncodeError: an argument cannot be stored.
        """
        app = self.app
        strat = strategy or app.strategy
        if strat not in STRATEGIES:
            raise ConfigError(f"strategy must be one of {', '.join(STRATEGIES)}; got {strat!r}")
        qname = queue.name if isinstance(queue, Queue) else queue
        if qname is not None and qname not in self.queues:
            raise ConfigError(
                f"queue {qname!r} is not declared in this app; declare it first with "
                f"app.queue({qname!r}, concurrency=…) (declared: {sorted(self.queues)})"
            )
        if qname is None and dedup_id is not None:
            raise ConfigError("dedup_id needs a queue (it is unique within a queue)")
        if not isinstance(priority, int) or isinstance(priority, bool):
            raise ConfigError(f"priority must be an int (lower runs first), got {priority!r}")
        if embedded and qname is not None:
            raise ConfigError(
                "start() runs here at once, outside any queue; use enqueue(…, queue=…)"
            )
        t = _timeout(timeout)
        if t is None:
            t = self.timeouts.get((wf.name, wf.version))
        text = codec.dumps([list(args), kwargs], where=f"the arguments of workflow {wf.name!r}")
        rid = run_id if run_id is not None else uuid.uuid4().hex
        if not isinstance(rid, str) or not rid:
            raise ConfigError(f"run_id must be a non-empty string, got {run_id!r}")
        now = app.clock.now()
        row = RunRow(
            run_id=rid,
            workflow=wf.name,
            version=wf.version,
            structure_hash=wf.structure_hash,
            args=text,
            strategy=strat,
            status="running" if embedded else "pending",
            created_at=now,
            updated_at=now,
            owner=app.worker_id if embedded else None,
            epoch=1 if embedded else 0,
            lease_until=now + app.lease if embedded else None,
            queue=qname,
            priority=priority,
            dedup_id=dedup_id,
            parent_id=parent,
            deadline_at=None if t is None else now + t,
        )
        return row, text

    def create(self, wf: Workflow, args: Any, kwargs: Any, run_id: Any, **opts: Any) -> Any:
        """Create a run with a queue, parent or deadline: (the stored row, created).

        Raises:
            RunConflictError: ``run_id`` exists with another workflow or other arguments.
        """
        if opts.get("queue") is not None:
            self.publish_queues()
        row, text = self.row(wf, args, kwargs, run_id, **opts)
        stored, created = self.app.journal_plus.create_run_plus(row)
        if created or stored.run_id != row.run_id:  # new, or the holder of the dedup id
            return stored, created
        refuse_another_run(stored, wf.name, text)
        return stored, False

    def child_row(
        self, wf: Workflow, args: Any, kwargs: Any, run_id: str, *, parent: str
    ) -> tuple[RunRow, str]:
        """The row of child run ``run_id`` of ``parent`` (not stored yet: it is created
        with the parent's step, see ``_children``), and its arguments' codec text.

        Raises:
            ConfigError / EncodeError: as for any new run (see :meth:`row`).
        """
        return self.row(wf, args, kwargs, run_id, parent=parent)

    def check_child(self, stored: RunRow, wf: Workflow, text: str, *, parent: str) -> None:
        """Refuse ``stored`` as child ``wf(text)`` of ``parent`` unless it is that run.

        Raises:
            RunConflictError: the run id is another run's, or the child of another
                workflow or with other arguments.
        """
        if stored.parent_id != parent:
            raise RunConflictError(
                stored.run_id,
                f"run id {stored.run_id!r} exists and is not a child of run {parent!r}; give "
                "the child another run_id (or none: it is derived from the parent's position)",
            )
        refuse_another_run(stored, wf.name, text)


class PlusApi:
    """The issue-13 methods of ``App`` (a mixin; see each method)."""

    plus: Plus
    serving: bool

    @property
    def journal_plus(self) -> JournalPlus:
        """The journal, with its queue, child, schedule and retention methods."""
        j: Any = self.journal  # type: ignore[attr-defined]
        return j  # type: ignore[no-any-return]

    def queue(
        self,
        name: str,
        *,
        concurrency: int | None = None,
        worker_concurrency: int | None = None,
        rate: tuple[int, float] | None = None,
    ) -> Queue:
        """Declare a named queue; runs enqueued in it start only within its limits.

        Args:
            concurrency: runs of the queue executing at once, across all workers.
            worker_concurrency: runs of the queue executing at once on one worker.
            rate: ``(n, seconds)``: at most ``n`` runs started per ``seconds``.

        The limits are recorded in the journal when a worker first claims or a run is
        first enqueued here; the last app to record them wins. See ``docs/durable.md``.

        Raises:
            ConfigError: a bad name or limit, or the name declared twice here.
        """
        q = Queue.make(
            name, concurrency=concurrency, worker_concurrency=worker_concurrency, rate=rate
        )
        if name in self.plus.queues:
            raise ConfigError(f"queue {name!r} is declared twice in this app")
        self.plus.queues[name] = q
        return q

    def queues(self) -> list[dict[str, Any]]:
        """Every queue in the journal: its limits and its runs per status."""
        return queue_view(self)

    def child(
        self,
        workflow: Workflow | str,
        *args: Any,
        run_id: str | None = None,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> Any:
        """Start a child run (once) and await its result, inside a workflow.

        ``await app.child(wf, x)`` in async workflows, ``app.child(wf, x)`` in sync ones.
        The child's id is ``<parent id>:<position>`` unless ``run_id`` is given. Its error
        is raised here if it failed; ``RunFailedError`` if it was cancelled. ``timeout``:
        seconds to wait, after which the child is cancelled and ``DeadlineExceededError``
        is raised. Cancelling the parent cancels its unfinished children.

        Raises:
            ConfigError: outside a run. WorkflowNotFoundError: ``workflow`` unknown.
        """
        wf = self.registry.resolve(workflow)  # type: ignore[attr-defined]
        return child_step(self, wf, args, kwargs, run_id, _timeout(timeout))

    def stranded(self, *, limit: int = 1000) -> list[dict[str, Any]]:
        """Unfinished runs whose workflow version no live worker offers, with what to do.

        The same test as ``show(run_id).stranded`` (worker advertisements in the journal),
        for every pending, sleeping or abandoned run at once (at most ``limit`` of each).
        """
        j = self.journal  # type: ignore[attr-defined]
        now = self.clock.now()  # type: ignore[attr-defined]
        live = j.live_workflows(since=now)
        rows = [r for s in ("pending", "sleeping") for r in j.list_runs(status=s, limit=limit)]
        rows += [
            r for r in j.list_runs(status="running", limit=limit) if (r.lease_until or 0) < now
        ]
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

    def patched(self, patch_id: str) -> bool:
        """Inside a workflow: True on the new branch of patch ``patch_id``, False for runs
        that journalled the old branch there (see ``docs/durable.md``, "Patches")."""
        return _patched(patch_id)

    def schedule(
        self,
        name: str,
        workflow: Workflow | str,
        *,
        cron: str,
        args: tuple[Any, ...] | list[Any] = (),
        kwargs: dict[str, Any] | None = None,
        catchup: str = "latest",
    ) -> Schedule:
        """Start one run of ``workflow`` per tick of ``cron`` (UTC), from any workers.

        Workers serving this app fire the schedule; each tick's run has the id
        ``<name>@<tick, ISO 8601>``, so a tick starts exactly one run however many
        workers see it. ``catchup`` after downtime: ``latest`` (default: one run for the
        latest missed tick), ``all`` (one per missed tick, at most 100, the latest ones)
        or ``skip`` (none; wait for the next tick).

        Raises:
            ConfigError: a bad cron expression or catch-up policy, the name declared
                twice, or an app on an engine URL (temporal://…).
            EncodeError: the arguments cannot be stored.
        """
        if engine_scheme(self.url) is not None:  # type: ignore[attr-defined]
            raise ConfigError(
                f"schedule {name!r}: schedules are fired by surefoot's own workers from its "
                "journal, which an engine URL (temporal://…) has not; run the schedule's "
                "app on sqlite:// or postgresql://, or use Temporal Schedules (docs/engines.md)"
            )
        if name in self.plus.schedules:
            raise ConfigError(f"schedule {name!r} is declared twice in this app")
        wf = self.registry.resolve(workflow)  # type: ignore[attr-defined]
        s = Schedule.make(name, wf, cron, tuple(args), dict(kwargs or {}), catchup)
        self.plus.schedules[name] = s
        return s

    def fire_schedules(self) -> list[str]:
        """Start the runs of every schedule declared here that is due; return their ids
        (workers call this in their loop)."""
        return fire_schedules(self)

    def prune(
        self,
        *,
        older_than: float | None = None,
        keep: int | None = None,
        audit: str = "keep",
    ) -> list[str]:
        """Delete finished runs older than ``older_than`` seconds, or beyond the newest
        ``keep``; ``audit`` ``keep`` (default) or ``drop`` their audit log. Returns the
        deleted run ids.

        Raises:
            ConfigError: neither bound given, or a bad value.
        """
        return prune_runs(self, Retention.make(older_than, keep, audit))


def refuse_another_run(stored: RunRow, workflow: str, text: str) -> None:
    """A run id reused for another workflow or other arguments is an error; the same ones
    are the same run (``text`` is this call's arguments as the codec wrote them).

    Raises:
        RunConflictError: ``stored`` belongs to another workflow or has other arguments.
    """
    same = stored.args == text or codec.loads(stored.args) == codec.loads(text)
    if stored.workflow != workflow or not same:
        raise RunConflictError(
            stored.run_id,
            f"run id {stored.run_id!r} already belongs to a run of workflow "
            f"{stored.workflow!r} with arguments {stored.args}; this call has {workflow!r} "
            f"with {text}. Use another run id for another run, or the same arguments to get "
            "the same run.",
        )
