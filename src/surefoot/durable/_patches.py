"""``app.patched("id")``: change a workflow's code under runs already in flight.

::

    if app.patched("fix-tax"):
        total = await compute_tax_v2(order)        # new runs, and runs that had not got here
    else:
        total = await compute_tax(order)           # runs that journalled the old branch

A patch marker is journalled at the position where ``patched`` is called. Replaying a run:

* the position holds this marker: the run took the new branch before, it does again;
* the position holds another step: the run began before the fix and journalled the old
  branch there, so ``patched`` returns False and takes no position (the old branch's
  step replays at it);
* the position is past the end of the journal: the run has not got here yet, so it takes
  the new branch, and the marker is journalled.

Journalling the marker never blocks an async workflow's event loop: the marker goes to
the group-commit writer and is committed with the run's next record (the next step's
row, its wait or its end), in the same transaction, or on its own at the loop's next
turn if nothing follows at once. A sync workflow (in its own thread) commits it at once.
A crash before that commit loses the marker and whatever followed it together, so the
run's journal ends before the marker's position and its replay takes the new branch
again; the marker is needed only where a later record exists, and there it always
is, committed before or with it (the writer commits in submission order). A marker whose
commit failed while the journal was down leaves a journal where the position is empty
and later records (if their own commits went through) belong to the new branch: its
replay finds no row there and takes the new branch, the same one.

Once no run that began before the fix is unfinished (``surefoot runs list``), remove the
old branch and keep ``app.patched("id")`` (or remove both together with a new workflow
version). A run whose workflow version is no longer registered by any live worker shows as
stranded in ``surefoot runs show`` and ``runs list``; to finish it, run a worker that
still registers that version, or ``runs fork`` it onto the current one.
"""

from __future__ import annotations

import asyncio

from ..errors import ConfigError
from ..storage.runs import StepWrite
from ._context import RunState
from ._inrun import in_loop, run_scope

__all__ = ["patched"]


def patched(patch_id: str) -> bool:
    """Whether the running run takes the new branch of patch ``patch_id`` (see above).

    Raises:
        ConfigError: ``patch_id`` is not a non-empty string, or not inside a run.
    """
    if not isinstance(patch_id, str) or not patch_id:
        raise ConfigError(f"patched() needs a non-empty patch id, got {patch_id!r}")
    scope = run_scope("patched")
    if scope.engine is not None:  # a run on another engine: its own patch markers
        new = bool(scope.engine.patched(patch_id))
        if new:
            scope.n += 1  # the same positions as here: the marker takes one
        return new
    run = scope.run
    name = f"patch:{patch_id}"
    pos = f"{scope.prefix}{scope.n + 1}"
    row = run.recorded.get(pos)
    if row is not None and row.name != name:
        return False  # an older run: its old branch's step is journalled here
    scope.n += 1
    if row is None and run.strategy != "restart":
        now = run.clock.now()
        rec = StepWrite(
            run.run_id, run.epoch, pos, name, "patch", "done", "true", None, 1, now, now
        )
        if run.writer is not None and in_loop():
            _submit(run, rec)
        else:
            run.write_sync(rec)
    return True


def _submit(run: RunState, rec: StepWrite) -> None:
    """Hand the marker to the run's writer without waiting (see the module docs)."""
    if run.released:
        run.write_sync(rec)  # raises: a released run records nothing more
    assert run.writer is not None
    run.number(rec)
    fut = run.writer.submit(rec)

    def held(f: asyncio.Future[bool]) -> None:
        if f.cancelled() or f.exception() is not None:
            return  # the journal was down: the run's next write says so (see above)
        if not f.result():
            run.lost = True  # fenced off: the run's next step raises LeaseLostError

    fut.add_done_callback(held)
