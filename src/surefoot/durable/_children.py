"""Child workflows: a run starts another run and awaits its result.

::

    summary = await app.child(summarize, doc)           # in an async workflow
    summary = app.child(summarize, doc)                 # in a sync one

The child is a run of its own (its own journal, lease and retries), created pending with
``parent_id`` set; any worker executes it (or this process, when no worker serves here).
The parent journals the child's id at the awaiting step's position (``child:<workflow>``,
status ``waiting``), and the id is derived from that position (``<parent id>:<pos>``)
unless given: a parent resumed after a crash at any point finds the same child and never
starts a second one. The parent suspends (no worker held) until the child ends: the
transaction that ends the child also queues the signal ``child:<id>`` for the parent and
wakes it (see ``surefoot.storage.sql.journal_plus``).

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

from typing import TYPE_CHECKING, Any

from .. import codec
from ..errors import DeadlineExceededError, RunFailedError
from ..storage.base import StepWrite
from ..storage.sql.journal_plus import DONE_STATUSES
from ._context import DOWN, STEP_CODES, JournalDown, RunState, Suspend, current
from ._deadlines import check_deadline
from ._decide import recorded
from ._inrun import in_loop, run_scope, suspend
from ._values import read

if TYPE_CHECKING:
    from ._versions import Workflow

__all__ = ["child_step"]


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


def _child(
    app: Any,
    run: RunState,
    pos: str,
    wf: Workflow,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    run_id: str | None,
    timeout: float | None,
) -> Any:
    name = f"child:{wf.name}"
    where = f"the result of child run {pos} {wf.name!r} (run {run.run_id!r})"
    row = recorded(run, pos, name)
    if row is not None and row.status == "done":
        return read(row.result, wf.returns, where)
    if row is not None and row.status == "error":
        raise codec.loads(row.error or "null")
    now = run.clock.now()
    try:
        if row is None:
            cid = run_id if run_id is not None else f"{run.run_id}:{pos}"
            deadline = None if timeout is None else now + timeout
            child, _ = app.plus.create_child(wf, args, kwargs, cid, parent=run.run_id)
            started = now
        else:
            meta = codec.loads(row.result or "null")
            cid, deadline, started = str(meta["child"]), meta["deadline"], row.started_at
            child = app.journal.get_run(cid)
    except DOWN as exc:
        raise JournalDown(exc) from exc
    if child is not None and child.status in DONE_STATUSES:
        if child.status == "succeeded":
            value = read(child.result, wf.returns, where)  # refused before it is journalled
            run.write_sync(_row(run, pos, name, "done", started, result=child.result))
            return value
        if child.status == "failed" and child.error is not None:
            err = child.error
        else:
            err = codec.dumps(codec.error_to_data(RunFailedError(cid, child.status)))
        run.write_sync(_row(run, pos, name, "error", started, error=err))
        raise codec.loads(err)
    if deadline is not None and now >= deadline:
        app.journal_plus.cancel_tree(
            cid, now=now, actor=run.actor, detail=codec.dumps({"reason": "parent's timeout"})
        )
        late = DeadlineExceededError(run.run_id, deadline, f"child run {cid!r}")
        run.write_sync(
            _row(run, pos, name, "error", started, error=codec.dumps(codec.error_to_data(late)))
        )
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
    rec = None
    if row is None:
        meta_text = codec.dumps({"child": cid, "deadline": deadline})
        rec = _row(run, pos, name, "waiting", started, result=meta_text)
    raise suspend(run, Suspend(wake, f"child:{cid}", rec))


def _look_again(app: Any, child: Any, now: float) -> float | None:
    """With no worker serving here, nobody but this parent drives its child: when the
    parent should wake to drive it again (the child's timer, or soon while it runs here);
    None when only the child's end (which wakes the parent anyway) can move it."""
    if child.status == "sleeping" and child.wake_at is not None:
        return float(max(child.wake_at, now + app.poll))
    if child.status in ("pending", "running"):
        return float(now + app.poll)
    return None


async def _achild(*a: Any) -> Any:
    return _child(*a)


STEP_CODES.add(_achild.__code__)


def child_step(
    app: Any,
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
