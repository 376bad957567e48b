"""The running run: its state, step positions, and how a run stops early (suspend, escalate).

A step's position is given when the step is *called*, in the calling task's order, so the
steps of ``asyncio.gather(a(), b())`` get positions in argument order whatever order they
finish in. A task created inside a run (a sub-flow under ``gather``, ``create_task``) gets
its own position ``n`` in its parent when it is created, and numbers its steps ``n.1``,
``n.2``, …: replay gives every step the same position on any worker.
"""

from __future__ import annotations

import asyncio
import contextvars
import random
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..clock import Clock
from ..errors import LeaseLostError, StoreError
from ..storage.journal import Journal
from ..storage.runs import Record, RunWrite, StepRow, StepWrite
from ._crash import CrashPlan

if TYPE_CHECKING:
    from ._writer import Writer

__all__ = [
    "DOWN",
    "STEP_CODES",
    "Interrupt",
    "JournalDown",
    "NeedsAttention",
    "RunState",
    "SagaEntry",
    "Scope",
    "Suspend",
    "current",
    "task_factory",
]


class Interrupt(BaseException):
    """Stops a run's code early; a ``BaseException`` so ``except Exception`` cannot eat it."""


class Suspend(Interrupt):
    """The run waits (timer or signal): commit ``record`` and the sleep, then let go."""

    def __init__(
        self, wake_at: float | None, waiting_for: str | None, record: StepWrite | None
    ) -> None:
        super().__init__("suspended")
        self.wake_at = wake_at
        self.waiting_for = waiting_for
        self.record = record


class JournalDown(Interrupt):
    """The journal could not be written (locked past the busy timeout, disk, network).

    Not the workflow's failure: the run is abandoned as it stands, keeps its journal, and
    is resumed (here or by another worker) once its lease expires.
    """

    def __init__(self, error: BaseException) -> None:
        super().__init__(f"journal unavailable: {error}")
        self.error = error


DOWN: tuple[type[BaseException], ...] = (StoreError,)
"""Errors that mean the journal is out of reach, not that the run's code failed."""


class NeedsAttention(Interrupt):
    """The run cannot go on safely without a person (e.g. an effect's outcome is unknown)."""

    def __init__(self, reason: str, detail: dict[str, Any]) -> None:
        super().__init__(reason)
        self.reason = reason
        self.detail = detail


@dataclass(slots=True)
class SagaEntry:
    """A completed effect with a compensation, remembered while the run executes."""

    pos: str
    step: Any  # StepDef
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    result: Any


@dataclass(slots=True, eq=False)
class RunState:
    """One execution of one run on this worker (a replay builds a new one)."""

    run_id: str
    epoch: int
    workflow: str
    strategy: str
    journal: Journal
    clock: Clock
    actor: str
    recorded: dict[str, StepRow]
    crash: CrashPlan | None = None
    writer: Writer | None = None
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    saga: list[SagaEntry] = field(default_factory=list)
    lost: bool = False
    released: bool = False  # its worker is stopping: write nothing more, resume after the lease
    steps_run: int = 0
    tasks: set[asyncio.Task[Any]] = field(default_factory=set)
    suspends: list[Suspend] = field(default_factory=list)  # every wait that suspended
    parent_id: str | None = None  # the run awaiting this one as a child (_children.py)
    deadline_at: float | None = None  # the run's deadline (_deadlines.py)
    observer: Any = None  # a _observe.RunObserver while a worker executes it
    writing: int = 0  # commits in flight from sync code (a pool thread): close() waits for them
    orders: dict[str, int] = field(default_factory=dict)  # journal order of positions written
    next_order: int = 1  # the next new position's journal order (see ``number``)
    # what the provider calls of each step in flight went through (_decide.step_row)
    attempt_notes: dict[str, list[str]] = field(default_factory=dict)
    tokens: Any = None  # the app's TokenHub: what steps emit while they run (_tokens.py)
    streaming: bool = False  # a step of this execution emitted: attempts end with a flush

    def number(self, rec: Any) -> None:
        """Give a step record (or a child's step) its place in the run's journal: a
        position journalled before keeps its own, a new one takes the next. Every record
        a run writes passes here (``write``, ``commit`` and the writer's batches)."""
        w = rec if type(rec) is StepWrite else getattr(rec, "step", None)
        if w is None or w.order is not None:
            return
        pos = w.pos
        order = self.orders.get(pos)
        if order is None:
            row = self.recorded.get(pos)
            if row is not None:
                order = row.seq
            else:
                order = self.next_order
                self.next_order = order + 1
            self.orders[pos] = order
        w.order = order

    def write_sync(self, rec: StepWrite) -> None:
        """Commit one record now (sync code); refused -> ``LeaseLostError``."""
        self.writing += 1  # before the check: a write it lets through is waited for
        try:
            self._check_released()
            self.number(rec)
            ok = self.journal.commit([rec])[0]
        except DOWN as exc:
            raise JournalDown(exc) from exc
        finally:
            self.writing -= 1
        if not ok:
            self.lost = True
            raise LeaseLostError(self.run_id, self.epoch)

    async def write(self, rec: StepWrite | RunWrite) -> None:
        """Commit one record through the group-commit writer (async code)."""
        if self.released:  # _check_released, inlined: every step of an async run is here
            self._check_released()
        self.number(rec)
        try:
            if self.writer is None or self.writer.alone():
                ok = self.journal.commit([rec])[0]  # nobody to share a commit with: no hand-off
            else:
                ok = await self.writer.submit(rec)
        except DOWN as exc:
            raise JournalDown(exc) from exc
        if not ok:
            self.lost = True
            raise LeaseLostError(self.run_id, self.epoch)

    # ``write``/``write_sync`` stay as they are (every step passes there); these two are for
    # a record whose refusal the caller tells apart itself (a child run, _children.py).

    def commit_sync(self, rec: Record) -> bool:
        """Commit one record now (sync code); whether it was applied."""
        self.writing += 1  # as write_sync
        try:
            self._check_released()
            self.number(rec)
            return self.journal.commit([rec])[0]
        except DOWN as exc:
            raise JournalDown(exc) from exc
        finally:
            self.writing -= 1

    async def commit(self, rec: Record) -> bool:
        """Commit one record through the group-commit writer (async code); whether it was
        applied. The loop runs other runs while the writer's thread commits."""
        self._check_released()
        self.number(rec)
        try:
            if self.writer is None or self.writer.alone():
                return self.journal.commit([rec])[0]
            return await self.writer.submit(rec)
        except DOWN as exc:
            raise JournalDown(exc) from exc

    def _check_released(self) -> None:
        """A run its stopping worker let go records nothing more (not even a failure)."""
        if self.released:
            raise JournalDown(RuntimeError(f"run {self.run_id!r}: its worker stopped"))

    def crash_point(self, point: str, pos: str, name: str) -> None:
        if self.crash is not None:
            self.crash.check(point, self.run_id, pos, name)


class Scope:
    """Hands out positions in one task of a run."""

    __slots__ = ("n", "prefix", "run")

    engine: Any = None
    """Set on the scope of a run executing on another engine (``durable.engine.EngineScope``):
    its steps and waits are handed to that engine instead of this journal."""

    def __init__(self, run: RunState, prefix: str = "") -> None:
        self.run = run
        self.prefix = prefix
        self.n = 0

    def next(self) -> str:
        self.n += 1
        return f"{self.prefix}{self.n}"


current: contextvars.ContextVar[Scope | None] = contextvars.ContextVar(
    "surefoot_durable_scope", default=None
)

STEP_CODES: set[Any] = set()
"""Code objects of step coroutines: wrapping one in a task does not open a new scope."""


def task_factory(
    loop: asyncio.AbstractEventLoop,
    coro: Coroutine[Any, Any, Any],
    *,
    context: contextvars.Context | None = None,
) -> asyncio.Task[Any]:
    """Give a task created inside a run its own position in the creating task."""
    ctx = contextvars.copy_context() if context is None else context
    scope = ctx.get(current)
    if scope is None:
        return asyncio.Task(coro, loop=loop, context=ctx)
    if getattr(coro, "cr_code", None) not in STEP_CODES:
        child = Scope(scope.run, scope.next() + ".")
        ctx.run(current.set, child)
    task = asyncio.Task(coro, loop=loop, context=ctx)
    tasks = scope.run.tasks  # so the run can stop its own tasks when it stops
    tasks.add(task)
    task.add_done_callback(tasks.discard)
    return task
