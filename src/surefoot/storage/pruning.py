"""``Pruning``: deleting finished runs by age or count, owned by ``surefoot.durable``."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["Pruning"]


@runtime_checkable
class Pruning(Protocol):
    """Retention of finished runs, in one transaction."""

    def prune(
        self,
        *,
        before: float | None = None,
        keep: int | None = None,
        drop_audit: bool = False,
        now: float,
    ) -> list[str]:
        """Delete finished runs ended before ``before``, or beyond the newest ``keep``.

        Only succeeded, failed and cancelled runs go (never a run that may still move),
        and never a child whose parent has not finished (the parent still reads it). Their
        steps, signals and chunks go with them; their audit log stays (plus an entry
        ``pruned``) unless ``drop_audit``. Returns the ids deleted.
        """
        ...
