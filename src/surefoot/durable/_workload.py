"""An app's workload beyond starting one run: named queues, child runs, schedules,
patches and retention.

:class:`Workload` is a part of ``App`` (which offers each method under the same name); it
is given what it reads through :class:`WorkloadHost`.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..clock import Clock
from ..errors import ConfigError
from ..storage.runs import RunRow
from ._children import ChildHost, child_step
from ._newrun import check_timeout
from ._patches import patched as _patched
from ._queues import Queue, queue_view
from ._registry import Registry
from ._retention import Retention, prune_runs
from ._schedules import Schedule, missed_after
from ._tokens import TokenHub
from ._versions import Workflow
from .engine import engine_scheme

__all__ = ["Workload", "WorkloadHost"]


class WorkloadHost(ChildHost, Protocol):
    """What the workload reads from its app, at each use: what a child step reads, and the
    app's URL, clock and declarations."""

    url: str
    clock: Clock
    registry: Registry
    tokens: TokenHub


class Workload:
    """Queues, children, schedules, patches and retention (see the module docs).

    Args:
        host: the app (its journal, registry, clock and settings, read live).
    """

    def __init__(self, host: WorkloadHost) -> None:
        self.host = host

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
        self.host.registry.queues.add(q)
        return q

    def queues(self) -> list[dict[str, Any]]:
        """Every queue in the journal: its limits and its runs per status."""
        return queue_view(self.host.journal.queues)

    def child(
        self,
        /,
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
        wf = self.host.registry.resolve(workflow)
        return child_step(self.host, wf, args, kwargs, run_id, check_timeout(timeout))

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
        or ``skip`` (none; wait for the next tick). A tick is missed only when no worker
        saw it within ``max(5 s, 5 × poll)`` of its time; an on-time tick starts its run
        under every policy.

        Raises:
            ConfigError: a bad cron expression or catch-up policy, the name declared
                twice, or an app on an engine URL (temporal://…).
            EncodeError: the arguments cannot be stored.
        """
        if engine_scheme(self.host.url) is not None:
            raise ConfigError(
                f"schedule {name!r}: schedules are fired by surefoot's own workers from its "
                "journal, which an engine URL (temporal://…) has not; run the schedule's "
                "app on sqlite:// or postgresql://, or use Temporal Schedules (docs/engines.md)"
            )
        if name in self.host.registry.schedules:
            raise ConfigError(f"schedule {name!r} is declared twice in this app")
        wf = self.host.registry.resolve(workflow)
        s = Schedule.make(name, wf, cron, tuple(args), dict(kwargs or {}), catchup)
        self.host.registry.schedules.add(s)
        return s

    def fire_schedules(self) -> list[str]:
        """Start the runs of every schedule declared here that is due; return their ids
        (workers call this in their loop)."""

        def new_row(s: Schedule, run_id: str) -> RunRow:
            return self.host.new_runs.row(s.workflow, s.args, s.kwargs, run_id)[0]

        journal = self.host.journal.schedules
        grace = missed_after(self.host.poll)
        return self.host.registry.schedules.fire(
            journal, new_row, now=self.host.clock.now(), grace=grace
        )

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
        policy = Retention.make(older_than, keep, audit)
        host = self.host
        return prune_runs(
            host.journal.pruning, policy, now=host.clock.now(), pruned=host.tokens.drop_runs
        )
