"""``Waking``: blocking until there may be work or a run moved, instead of polling; owned
by ``surefoot.durable``.

A journal that can be woken (SQLite through its file watch, PostgreSQL through
``LISTEN/NOTIFY``) offers it as ``Journal.waking``; one that cannot offers None, and its
callers poll. Polling stays the fallback either way: timers and expired leases are found
by the next poll, and a lost wake-up only delays a run by one poll interval.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

__all__ = ["Wake", "Waking"]

Wake = tuple[str, tuple[str, str] | None, str | None]
"""What a wake-up names: (run id, its (workflow, version) or None when unknown, its queue)."""


@runtime_checkable
class Waking(Protocol):
    """Wake-ups of one journal."""

    def wait_for_work(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds until a run may have become claimable (a run was
        created, made pending again, or a signal was sent); False on timeout. The first
        call may only start listening."""
        ...

    def woken_for(self) -> list[Wake]:
        """The runs the last ``wait_for_work`` was woken for, when the journal can tell
        (empty when it cannot: then every waiting worker claims)."""
        ...

    def wait_until(self, ready: Callable[[], bool], timeout: float) -> bool:
        """Until ``ready()`` is true (asked now, then whenever a run may have moved) or
        ``timeout`` seconds; whether it became true."""
        ...

    def close(self) -> None:
        """Release what waiting holds (a listening connection)."""
        ...
