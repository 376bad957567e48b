"""New runs: one way to describe a run's header and to create it, whatever it carries.

``App.start`` and ``App.enqueue``, a parent's child (``_children``) and a schedule's tick
(``_schedules``) all describe a new run as its workflow, arguments and id plus one
:class:`RunOptions` record (a queue, priority and dedup id, a parent, a deadline, a
strategy, or none of them); :meth:`NewRuns.row` makes its header and :meth:`NewRuns.create`
stores it with ``Journal.create_run``, which honours everything the row carries. A run id
that exists already is the same run only with the same workflow and arguments.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Protocol

from .. import codec
from ..clock import Clock
from ..clock import seconds as _secs
from ..errors import ConfigError, RunConflictError
from ..storage.journal import Journal
from ..storage.runs import RunRow, RunStatus
from ._queues import Queue
from ._registry import Registry
from ._types import STRATEGIES
from ._versions import Workflow

__all__ = [
    "NewRunHost",
    "NewRuns",
    "RunOptions",
    "check_timeout",
    "refuse_another_child",
    "refuse_another_run",
]


def check_timeout(value: Any) -> float | None:
    """A run's ``timeout=`` as seconds (None: none).

    Raises:
        ConfigError: not a duration > 0.
    """
    if value is None:
        return None
    out = _secs(value, "timeout")
    if out <= 0:
        raise ConfigError(f"timeout must be > 0 seconds, got {value!r}")
    return out


@dataclass(frozen=True, slots=True)
class RunOptions:
    """What a new run carries besides its workflow, arguments and id (all optional).

    Attributes:
        strategy: its recovery strategy (None: the app's).
        embedded: started here (``App.start``): created running under this app's lease,
            outside any queue.
        queue / priority / dedup_id: the named queue it waits in (a ``Queue`` or its name),
            its priority there (lower first) and its deduplication id within the queue.
        parent: the run that starts it as a child.
        timeout: seconds from now to its deadline (None: the workflow's own, if any).
    """

    strategy: str | None = None
    embedded: bool = False
    queue: Queue | str | None = None
    priority: int = 0
    dedup_id: str | None = None
    parent: str | None = None
    timeout: Any = None


class NewRunHost(Protocol):
    """What new runs read from their app, at each use (settings may change before the
    journal is opened)."""

    clock: Clock
    worker_id: str
    lease: float
    strategy: str

    @property
    def journal(self) -> Journal: ...


class NewRuns:
    """Makes and creates new runs for one app (see the module docs).

    Args:
        registry: the app's declarations (its queues and workflow timeouts).
        host: the app's settings and journal.
    """

    def __init__(self, registry: Registry, host: NewRunHost) -> None:
        self.registry = registry
        self.host = host

    def row(
        self,
        wf: Workflow,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        run_id: str | None,
        opts: RunOptions = RunOptions(),
    ) -> tuple[RunRow, str]:
        """The header of a new run (not stored), and its arguments' codec text.

        Raises:
            ConfigError: a bad strategy, run id, priority, dedup id, timeout or an
                undeclared queue. EncodeError: an argument cannot be stored.
        """
        host = self.host
        strat = opts.strategy or host.strategy
        if strat not in STRATEGIES:
            raise ConfigError(f"strategy must be one of {', '.join(STRATEGIES)}; got {strat!r}")
        queue = opts.queue
        qname = queue.name if isinstance(queue, Queue) else queue
        if qname is not None and qname not in self.registry.queues:
            raise ConfigError(
                f"queue {qname!r} is not declared in this app; declare it first with "
                f"app.queue({qname!r}, concurrency=…) (declared: "
                f"{self.registry.queues.names()})"
            )
        if qname is None and opts.dedup_id is not None:
            raise ConfigError("dedup_id needs a queue (it is unique within a queue)")
        priority = opts.priority
        if not isinstance(priority, int) or isinstance(priority, bool):
            raise ConfigError(f"priority must be an int (lower runs first), got {priority!r}")
        if opts.embedded and qname is not None:
            raise ConfigError(
                "start() runs here at once, outside any queue; use enqueue(…, queue=…)"
            )
        t = check_timeout(opts.timeout)
        if t is None:
            t = self.registry.timeouts.get((wf.name, wf.version))
        text = codec.dumps([list(args), kwargs], where=f"the arguments of workflow {wf.name!r}")
        rid = run_id if run_id is not None else uuid.uuid4().hex
        if not isinstance(rid, str) or not rid:
            raise ConfigError(f"run_id must be a non-empty string, got {run_id!r}")
        now = host.clock.now()
        here = opts.embedded
        row = RunRow(
            run_id=rid,
            workflow=wf.name,
            version=wf.version,
            structure_hash=wf.structure_hash,
            args=text,
            strategy=strat,
            status=(RunStatus.RUNNING if here else RunStatus.PENDING).value,
            created_at=now,
            updated_at=now,
            owner=host.worker_id if here else None,
            epoch=1 if here else 0,
            lease_until=now + host.lease if here else None,
            queue=qname,
            priority=priority,
            dedup_id=opts.dedup_id,
            parent_id=opts.parent,
            deadline_at=None if t is None else now + t,
        )
        return row, text

    def create(
        self,
        wf: Workflow,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        run_id: str | None,
        opts: RunOptions = RunOptions(),
    ) -> tuple[RunRow, bool]:
        """Create a new run (or find it): (the stored row, created).

        A given ``run_id`` is read first, so the common repeat takes no write. When an
        unfinished run of the queue holds ``opts.dedup_id``, that run's row comes back.

        Raises:
            RunConflictError: ``run_id`` exists with another workflow or other arguments.
            ConfigError / EncodeError: as for :meth:`row`.
        """
        journal = self.host.journal
        if opts.queue is not None:
            self.registry.queues.record(journal.queues, now=self.host.clock.now())
        row, text = self.row(wf, args, kwargs, run_id, opts)
        found = journal.get_run(row.run_id) if run_id is not None else None
        stored, created = (found, False) if found is not None else journal.create_run(row)
        if created or stored.run_id != row.run_id:  # new, or the holder of the dedup id
            return stored, created
        refuse_another_run(stored, wf.name, text)
        return stored, False


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


def refuse_another_child(stored: RunRow, wf: Workflow, text: str, *, parent: str) -> None:
    """Refuse ``stored`` as child ``wf(text)`` of ``parent`` unless it is that run.

    Raises:
        RunConflictError: the run id is another run's, or the child of another workflow
            or with other arguments.
    """
    if stored.parent_id != parent:
        raise RunConflictError(
            stored.run_id,
            f"run id {stored.run_id!r} exists and is not a child of run {parent!r}; give "
            "the child another run_id (or none: it is derived from the parent's position)",
        )
    refuse_another_run(stored, wf.name, text)
