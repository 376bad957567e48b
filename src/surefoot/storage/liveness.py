"""``Liveness``: which workers' processes are gone, and taking their runs over at once;
owned by ``surefoot.durable``.

A serving worker holds a lock that dies with its process (a file lock beside a SQLite
database, an advisory lock on PostgreSQL). An idle worker takes over the runs whose lease
has not expired but whose holder's lock is free, instead of waiting for their lease; a
hung but living holder keeps its lock, and its runs wait for the lease.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple, Protocol, runtime_checkable

__all__ = ["Liveness", "Serving"]


class Serving(NamedTuple):
    """What a serving worker advertised: its (workflow, version) pairs and the named
    queues it takes part in (None: a worker from before queues were advertised)."""

    workflows: set[tuple[str, str]]
    queues: frozenset[str] | None


@runtime_checkable
class Liveness(Protocol):
    """Liveness locks and takeovers of dead holders' runs."""

    def hold(self, worker_id: str, *, now: float) -> bool:
        """Hold ``worker_id``'s liveness lock for as long as the journal is open, and say so
        in its worker row; False when it cannot be held (then only leases decide).

        Called by a serving worker before it claims, and at every heartbeat (a lost
        connection is reconnected and the lock taken again).
        """
        ...

    def claim_orphans(
        self,
        owner: str,
        *,
        now: float,
        lease_until: float,
        workflows: list[tuple[str, str]],
        limit: int,
        queues: Mapping[str, int | None] | None = None,
        run_id: str | None = None,
    ) -> list[tuple[str, int]]:
        """Take over up to ``limit`` running runs of ``workflows`` whose lease has not
        expired but whose holder's process is gone (its liveness lock is free).

        Each claim is fenced by the epoch the run had when it was looked at (a restarted
        holder that took it back first wins), audited ``taken_over`` with ``holder_dead``.
        Runs in a named queue are taken only from ``queues`` (name -> this worker's
        ``worker_concurrency``), by the queue's claim, which keeps the queue's limits.
        ``run_id``: only that run, whatever its queue (an operator's or a handle's
        resume, which claims one run by id as ``claim(run_id=…)`` does).
        Returns (run_id, new epoch) pairs.
        """
        ...

    def serving(self, *, now: float) -> dict[str, Serving]:
        """The workers serving now, each with what it serves: its advertisement has not run
        out and, for a worker that said it holds a liveness lock, that lock is held."""
        ...

    def sweep(self, *, only: set[str] | None = None, force: bool = False) -> list[str]:
        """Remove what dead workers left behind once none of their runs is running
        (``only``: just these worker ids); the worker ids whose leftovers were removed."""
        ...
