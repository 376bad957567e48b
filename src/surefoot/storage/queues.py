"""``Queues``: named queues with limits, owned by ``surefoot.durable``.

A run created with a ``queue`` (``RunRow.queue``) is claimed only by :meth:`Queues.claim`,
never by ``Journal.claim``, and only within the queue's limits, which the journal enforces
in the claim's own transaction: any number of workers on any number of machines never
exceed them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol, runtime_checkable

__all__ = ["Orphan", "QueueLimits", "Queues"]


class QueueLimits(NamedTuple):
    """One queue's limits (None: no limit).

    Attributes:
        concurrency: runs of the queue executing at once, across all workers.
        worker_concurrency: runs of the queue executing at once on one worker.
        rate_limit / rate_period: at most ``rate_limit`` runs started per ``rate_period``
            seconds.
    """

    concurrency: int | None
    worker_concurrency: int | None
    rate_limit: int | None
    rate_period: float | None


class Orphan(NamedTuple):
    """A queued run whose holder's process died (see :mod:`~surefoot.storage.liveness`):
    its id, the epoch it had when it was seen dead, its holder and the lease it held."""

    run_id: str
    epoch: int
    holder: str
    lease_until: float


@runtime_checkable
class Queues(Protocol):
    """Named queues and their limits. Every method is atomic."""

    def put(self, name: str, limits: QueueLimits, *, now: float) -> None:
        """Record a queue's limits (the last app to declare it wins)."""
        ...

    def limits(self) -> dict[str, QueueLimits]:
        """Every queue recorded in the journal, with its limits."""
        ...

    def counts(self) -> dict[str, dict[str, int]]:
        """Per queue, how many of its runs are in each status."""
        ...

    def claim(
        self,
        name: str,
        owner: str,
        *,
        now: float,
        lease_until: float,
        workflows: Sequence[tuple[str, str]],
        limit: int,
        worker_concurrency: int | None = None,
        orphans: Sequence[Orphan] = (),
        how: str = "",
    ) -> list[tuple[str, int]]:
        """Take up to ``limit`` runs of queue ``name`` that its limits allow now.

        Runs the queue already started (due sleepers, expired leases, ``orphans``) come
        first and count against the concurrency limits only; new runs (pending, by
        priority then age) also count against the rate limit. ``worker_concurrency`` (this
        worker's own limit) overrides the one recorded for the queue. ``orphans``: runs of
        the queue whose holder's process is gone (``how``: how that was seen); they count
        as executing nowhere and are taken over first, each only under the epoch it was
        seen with, audited ``taken_over`` with ``holder_dead``. Returns (run_id, new epoch)
        pairs.
        """
        ...
