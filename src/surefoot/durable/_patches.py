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
  the new branch, and the marker is journalled (one commit).

Once no run that began before the fix is unfinished (``surefoot runs list``), remove the
old branch and keep ``app.patched("id")`` (or remove both together with a new workflow
version). A run whose workflow version is no longer registered by any live worker shows as
stranded in ``surefoot runs show`` and ``runs list``; to finish it, run a worker that
still registers that version, or ``runs fork`` it onto the current one.
"""

from __future__ import annotations

from ..errors import ConfigError
from ..storage.base import StepWrite
from ._inrun import run_scope

__all__ = ["patched"]


def patched(patch_id: str) -> bool:
    """Whether the running run takes the new branch of patch ``patch_id`` (see above).

    Raises:
        ConfigError: ``patch_id`` is not a non-empty string, or not inside a run.
    """
    if not isinstance(patch_id, str) or not patch_id:
        raise ConfigError(f"patched() needs a non-empty patch id, got {patch_id!r}")
    scope = run_scope("patched")
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
        run.write_sync(rec)
    return True
