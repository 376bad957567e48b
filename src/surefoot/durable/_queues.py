"""Named queues with limits: concurrency (per worker and across all), rate, priority, dedup.

::

    emails = app.queue("emails", concurrency=3, worker_concurrency=1, rate=(10, 60.0))
    app.enqueue(send, to, queue=emails, priority=0, dedup_id=f"welcome:{to}")

A run enqueued in a queue is claimed only under the queue's limits, which the journal
enforces (``Journal.queues``, see ``surefoot.storage.queues``): a claim of the queue is one
transaction that locks the queue's row, counts what executes now and what started within
the rate period, and takes only what is left. So ten workers on PostgreSQL never execute
more than ``concurrency`` runs of the queue at once.

What counts: ``concurrency`` counts the queue's runs executing under a live lease; a run
that sleeps or waits for a signal frees its slot and needs a free one to go on.
``rate=(n, seconds)`` counts runs the queue *started* within the last ``seconds`` (a
run that wakes up again is not a new start). Priorities: lower first, then oldest.
A ``dedup_id`` is unique among the queue's unfinished runs: enqueuing again with the id of
an unfinished run returns that run's handle instead of a new run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from ..storage.queues import QueueLimits, Queues
from ._declared import Declared

__all__ = ["DeclaredQueues", "Queue", "queue_view"]


def _count(value: int | None, what: str) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{what} must be an int >= 1 or None (no limit), got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class Queue:
    """A named queue and its limits (see ``App.queue``).

    Attributes:
        name: the queue's name. concurrency: runs executing at once across all workers.
        worker_concurrency: runs executing at once on one worker. rate_limit /
        rate_period: at most ``rate_limit`` runs started per ``rate_period`` seconds.
        None means no limit.
    """

    name: str
    concurrency: int | None = None
    worker_concurrency: int | None = None
    rate_limit: int | None = None
    rate_period: float | None = None

    @classmethod
    def make(
        cls,
        name: str,
        *,
        concurrency: int | None,
        worker_concurrency: int | None,
        rate: tuple[int, float] | None,
    ) -> Queue:
        """A validated queue.

        Raises:
            ConfigError: an empty name, a limit < 1, or a rate that is not (n, seconds).
        """
        if not isinstance(name, str) or not name:
            raise ConfigError(f"a queue needs a non-empty name, got {name!r}")
        limit, period = None, None
        if rate is not None:
            try:
                limit, period = int(rate[0]), float(rate[1])
            except (TypeError, ValueError, IndexError):
                raise ConfigError(
                    f"rate must be (runs, seconds), e.g. (10, 60.0), got {rate!r}"
                ) from None
            _count(limit, "rate's run count")
            if period <= 0:
                raise ConfigError(f"rate's period must be > 0 seconds, got {rate!r}")
        return cls(
            name,
            _count(concurrency, "concurrency"),
            _count(worker_concurrency, "worker_concurrency"),
            limit,
            period,
        )

    @property
    def limits(self) -> QueueLimits:
        """The limits as the journal records them."""
        return QueueLimits(
            self.concurrency, self.worker_concurrency, self.rate_limit, self.rate_period
        )


class DeclaredQueues(Declared[Queue]):
    """The named queues an app declared (see ``App.queue``), and which of them it has
    recorded in its journal (once each: the last app to record a queue's limits wins)."""

    def __init__(self) -> None:
        super().__init__("queue")

    def worker_limits(self) -> dict[str, int | None]:
        """Each declared queue's ``worker_concurrency`` (this worker's own limit)."""
        return {q.name: q.worker_concurrency for q in self}

    def record(self, journal: Queues, *, now: float) -> None:
        """Record the limits of the queues not recorded yet in ``journal``."""
        for q in self:
            if q.name not in self.recorded:
                journal.put(q.name, q.limits, now=now)
                self.recorded.add(q.name)

    def claim(
        self,
        journal: Queues,
        owner: str,
        *,
        now: float,
        lease_until: float,
        workflows: Sequence[tuple[str, str]],
        free: int,
    ) -> list[tuple[str, int]]:
        """Claim up to ``free`` runs of the declared queues, each under its limits."""
        got: list[tuple[str, int]] = []
        if not self or free <= 0:
            return got
        self.record(journal, now=now)
        for q in self:
            left = free - len(got)
            if left <= 0:
                break
            got += journal.claim(
                q.name,
                owner,
                now=now,
                lease_until=lease_until,
                workflows=workflows,
                limit=left,
                worker_concurrency=q.worker_concurrency,
            )
        return got


def queue_view(journal: Queues) -> list[dict[str, Any]]:
    """Every queue in the journal: its limits and how many runs it holds per status."""
    limits = journal.limits()
    counts = journal.counts()
    out = []
    for name in sorted(set(limits) | set(counts)):
        conc, wconc, rate, period = limits.get(name, (None, None, None, None))
        out.append(
            {
                "queue": name,
                "concurrency": conc,
                "worker_concurrency": wconc,
                "rate": None if rate is None else [rate, period],
                "runs": counts.get(name, {}),
            }
        )
    return out
