"""Child workflows: a run starts another run and awaits its result.

::

    summary = await app.child(summarize, doc)           # in an async workflow
    summary = app.child(summarize, doc)                 # in a sync one

The child is a run of its own (its own journal, lease and retries), created pending with
``parent_id`` set; any worker executes it (or this process, when no worker serves here).
The parent journals the child's id at the awaiting step's position (``child:<workflow>``,
status ``waiting``) in the same transaction that creates the child (a ``ChildWrite``),
and the id is derived from that position (``<parent id>:<pos>``) unless given: a parent
resumed after a crash at any point finds the same child and never starts a second one.
The child is created only while the parent still runs under its epoch, so a parent
cancelled (with its tree) or taken over meanwhile creates none. The parent suspends (no
worker held) until the child ends: the transaction that ends the child also queues the
signal ``child:<id>`` for the parent and wakes it (see ``surefoot.storage.children``).

In an async workflow, every commit here (the child with the parent's step, the child's
result or error in the parent's journal) goes through the group-commit writer, as a
step's does: the loop keeps running the worker's other runs meanwhile, and children
created together share one commit. A sync workflow (in its own thread) commits at once.
The decisions are one flow (``_flow``) that asks for each commit; two drivers do them.

What the parent gets: the child's result, read back by the child workflow's return
annotation (a ``-> Report`` child gives a ``Report``, also to a parent resumed after a
crash, as a step's result does); the child's error raised again when it failed, as its own
type when the codec can rebuild it (builtins, surefoot's errors, classes given to
``codec.register``; else ``RecordedError``), so ``except ValueError`` works across the
boundary; ``RunFailedError`` when it was
cancelled. A child that needs attention keeps its parent waiting until an operator
settles it. ``timeout=`` bounds the wait: past it the child (and its children) are
cancelled and ``DeadlineExceededError`` is raised in the parent.

Cancelling a run cancels all its unfinished descendants in the same transaction.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol

from .. import codec
from ..errors import DeadlineExceededError, LeaseLostError, RunFailedError
from ..storage.journal import Journal
from ..storage.runs import TERMINAL, ChildWrite, Record, RunRow, StepWrite
from ._context import DOWN, STEP_CODES, JournalDown, RunState, Suspend, current
from ._deadlines import check_deadline
from ._decide import recorded
from ._inrun import in_loop, run_scope, suspend
from ._newrun import NewRuns, RunOptions, refuse_another_child
from ._runner import Executor
from ._values import read
from ._versions import Workflow

__all__ = ["ChildHost", "child_step"]


class ChildHost(Protocol):
    """What a parent's child step reads from its app, at each use."""

    poll: float
    serving: bool
    executor: Executor
    new_runs: NewRuns

    @property
    def journal(self) -> Journal: ...


@dataclass(frozen=True, slots=True)
class _Commit:
    """Commit ``rec`` in the run's journal; the driver answers whether it was applied."""

    rec: Record


@dataclass(frozen=True, slots=True)
class _Cancel:
    """Cancel the tree of child run ``run_id`` (its wait timed out)."""

    run_id: str


Flow = Generator[_Commit | _Cancel, bool | None, Any]


def _row(run: RunState, pos: str, name: str, status: str, started: float, **kw: Any) -> StepWrite:
    return StepWrite(
        run.run_id,
        run.epoch,
        pos,
        name,
        "child",
        status,
        kw.get("result"),
        kw.get("error"),
        1,
        started,
        None if status == "waiting" else run.clock.now(),
    )


def _held(run: RunState, ok: bool | None) -> None:
    """A record of this run was refused: another holder has it now (a zombie stops)."""
    if not ok:
        _lost(run)


def _lost(run: RunState) -> NoReturn:
    run.lost = True
    raise LeaseLostError(run.run_id, run.epoch)


def _flow(
    app: ChildHost,
    run: RunState,
    pos: str,
    wf: Workflow,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    run_id: str | None,
    timeout: float | None,
) -> Flow:
    """Start (once) and await the child: the decisions, asking the driver for each commit."""
    name = f"child:{wf.name}"
    where = f"the result of child run {pos} {wf.name!r} (run {run.run_id!r})"
    row = recorded(run, pos, name)
    if row is not None and row.status == "done":
        return read(row.result, wf.returns, where)
    if row is not None and row.status == "error":
        raise codec.loads(row.error or "null")
    now = run.clock.now()
    child: RunRow | None
    if row is None:
        cid = run_id if run_id is not None else f"{run.run_id}:{pos}"
        deadline = None if timeout is None else now + timeout
        opts = RunOptions(parent=run.run_id)
        child, text = app.new_runs.row(wf, args, kwargs, cid, opts)
        meta = codec.dumps({"child": cid, "deadline": deadline})
        wait = _row(run, pos, name, "waiting", now, result=meta)
        run.crash_point("before_step", pos, name)
        if not (yield _Commit(ChildWrite(wait, child))):  # the child, and the parent's step
            child = _refused(app, run, child, wf, text)
            _held(run, (yield _Commit(wait)))  # it is ours after all: the step alone
        run.crash_point("after_journal", pos, name)
        started = now
    else:
        meta = codec.loads(row.result or "null")
        cid, deadline, started = str(meta["child"]), meta["deadline"], row.started_at
        try:
            child = app.journal.get_run(cid)
        except DOWN as exc:
            raise JournalDown(exc) from exc
    if child is not None and child.status in TERMINAL:
        if child.status == "succeeded":
            value = read(child.result, wf.returns, where)  # refused before it is journalled
            _held(run, (yield _Commit(_row(run, pos, name, "done", started, result=child.result))))
            return value
        if child.status == "failed" and child.error is not None:
            err = child.error
        else:
            err = codec.dumps(codec.error_to_data(RunFailedError(cid, child.status)))
        _held(run, (yield _Commit(_row(run, pos, name, "error", started, error=err))))
        raise codec.loads(err)
    if deadline is not None and now >= deadline:
        yield _Cancel(cid)
        late = DeadlineExceededError(run.run_id, deadline, f"child run {cid!r}")
        err = codec.dumps(codec.error_to_data(late))
        _held(run, (yield _Commit(_row(run, pos, name, "error", started, error=err))))
        raise late
    check_deadline(run)
    wake = deadline
    if child is not None and not app.serving:
        # The child is a run of its own, not a task of this one (which would be stopped
        # when this run suspends): drive it from outside this run's scope.
        token = current.set(None)
        try:
            app.executor.drive(child)  # no worker serves here: execute the child here
        finally:
            current.reset(token)
        again = _look_again(app, child, now)
        if again is not None:
            wake = again if wake is None else min(wake, again)
    raise suspend(run, Suspend(wake, f"child:{cid}", None))


def _refused(app: ChildHost, run: RunState, child: RunRow, wf: Workflow, text: str) -> RunRow:
    """The child and the parent's step were not written: say why (a rare path, so it
    reads): the parent lost its run (``LeaseLostError``), or the id is another run's
    (``RunConflictError``). Returns the stored child when it is this parent's after all
    (its arguments were stored in another spelling, e.g. by an encrypting codec)."""
    try:
        mine = app.journal.get_run(run.run_id)
        stored = app.journal.get_run(child.run_id)
    except DOWN as exc:
        raise JournalDown(exc) from exc
    if mine is None or mine.epoch != run.epoch or mine.status != "running" or stored is None:
        _lost(run)
    refuse_another_child(stored, wf, text, parent=run.run_id)
    return stored


def _look_again(app: ChildHost, child: RunRow, now: float) -> float | None:
    """With no worker serving here, nobody but this parent drives its child: when the
    parent should wake to drive it again (the child's timer, or soon while it runs here);
    None when only the child's end (which wakes the parent anyway) can move it."""
    if child.status == "sleeping" and child.wake_at is not None:
        return float(max(child.wake_at, now + app.poll))
    if child.status in ("pending", "running"):
        return float(now + app.poll)
    return None


def _cancel(app: ChildHost, run: RunState, req: _Cancel) -> None:
    detail = codec.dumps({"reason": "parent's timeout"})
    try:
        app.journal.children.cancel_tree(
            req.run_id, now=run.clock.now(), actor=run.actor, detail=detail
        )
    except DOWN as exc:
        raise JournalDown(exc) from exc


def _child(app: ChildHost, run: RunState, *a: Any) -> Any:
    """The sync driver: each commit at once, in the workflow's own thread."""
    flow = _flow(app, run, *a)
    try:
        req = next(flow)
        while True:
            if isinstance(req, _Commit):
                req = flow.send(run.commit_sync(req.rec))
            else:
                _cancel(app, run, req)
                req = flow.send(None)
    except StopIteration as done:
        return done.value


async def _achild(app: ChildHost, run: RunState, *a: Any) -> Any:
    """The async driver: each commit through the group-commit writer, the cancel of a
    timed-out child in a thread: the loop runs other runs meanwhile."""
    flow = _flow(app, run, *a)
    try:
        req = next(flow)
        while True:
            if isinstance(req, _Commit):
                req = flow.send(await run.commit(req.rec))
            else:
                await asyncio.to_thread(_cancel, app, run, req)
                req = flow.send(None)
    except StopIteration as done:
        return done.value


STEP_CODES.add(_achild.__code__)


def child_step(
    app: ChildHost,
    wf: Workflow,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    run_id: str | None,
    timeout: float | None,
) -> Any:
    """Start (once) and await child run ``wf(*args, **kwargs)``; see the module docs."""
    scope = run_scope("child")
    pos = scope.next()
    if scope.engine is not None:  # a run on another engine: a child run there
        return scope.engine.child(wf, pos, args, kwargs, run_id, timeout)
    if in_loop():
        return _achild(app, scope.run, pos, wf, args, kwargs, run_id, timeout)
    return _child(app, scope.run, pos, wf, args, kwargs, run_id, timeout)
