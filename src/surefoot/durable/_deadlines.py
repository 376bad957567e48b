"""Run deadlines: a run that passes its deadline stops at its next step or wait.

A run's deadline (``timeout=`` on the workflow, ``start`` or ``enqueue``) is stored in its
header as a clock time: ``created_at + timeout``. It is checked where the run would do
something new (a step about to run, a wait about to suspend or already waiting, a child
awaited), never while replaying what is journalled, so the run's compensations are known
when it stops. A sleeping run wakes at its deadline at the latest. Past it,
``DeadlineExceededError`` is raised in the workflow; unless caught, the run ends
``failed`` with that error after its compensations ran, with an audit entry ``deadline``.
"""

from __future__ import annotations

from .. import codec
from ..errors import DeadlineExceededError
from ._context import RunState

__all__ = ["check_deadline", "deadline_audit"]


def check_deadline(run: RunState) -> None:
    """Raise ``DeadlineExceededError`` if ``run`` has passed its deadline."""
    at = run.deadline_at
    if at is not None and run.clock.now() >= at:
        raise DeadlineExceededError(run.run_id, at)


def deadline_audit(exc: BaseException) -> list[tuple[str, str]]:
    """The audit entry of a run that ends because it passed a deadline (else none)."""
    if not isinstance(exc, DeadlineExceededError):
        return []
    return [("deadline", codec.dumps({"deadline": exc.deadline, "what": exc.what}))]
