"""``Schedules``: one run per cron tick, across any number of workers; owned by
``surefoot.durable``. The journal keeps each schedule's next tick and moves it by
compare-and-set in the transaction that creates the tick's runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .runs import RunRow

__all__ = ["ScheduleRow", "Schedules"]


@dataclass(frozen=True, slots=True)
class ScheduleRow:
    """A schedule as recorded: its ``workflow``, ``cron`` expression, arguments (codec JSON
    of ``[args, kwargs]``), catch-up policy and the next tick due (``next_at``)."""

    name: str
    workflow: str
    cron: str
    args: str
    catchup: str
    next_at: float


@runtime_checkable
class Schedules(Protocol):
    """Recorded schedules. Every method is atomic."""

    def put(
        self,
        name: str,
        *,
        workflow: str,
        cron: str,
        args: str,
        catchup: str,
        next_at: float,
        now: float,
    ) -> None:
        """Record a schedule; its ``next_at`` is kept unless its cron expression changed."""
        ...

    def all(self) -> list[ScheduleRow]:
        """Every recorded schedule, by name."""
        ...

    def fire(
        self, name: str, *, expected: float, next_at: float, runs: list[RunRow], now: float
    ) -> int:
        """Move schedule ``name`` from ``expected`` to ``next_at`` and create ``runs``.

        One transaction; nothing happens if another worker moved the schedule first (its
        ``next_at`` is no longer ``expected``), and a run id that exists is not created
        again. Returns the runs created.
        """
        ...
