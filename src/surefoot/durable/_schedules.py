"""Schedules: one run per cron tick, across any number of workers.

A schedule is recorded in the journal (``durable_schedules``: its cron expression, the
workflow, its arguments and ``next_at``, the next tick due). Every worker serving the
app looks at its schedules on each loop; one that finds ``next_at`` passed moves it to
the first tick after now by compare-and-set, in the same transaction that creates the
due runs, whose ids are ``<schedule>@<tick, ISO 8601 UTC>``. Whoever loses the race
changes nothing, and a tick's run id exists at most once: a tick starts exactly one run.

Catch-up after downtime (no worker served the schedule while ticks passed):
``latest`` (default) starts one run, for the latest missed tick; ``all`` starts one per
missed tick (at most :data:`MAX_CATCHUP`, the latest ones); ``skip`` starts none and waits
for the next tick. A tick is due from its time on; a schedule first recorded at time t
starts with the first tick after t.

A tick is *missed* only when the first worker to see it is later than the grace:
``max(MISSED_AFTER, GRACE_POLLS × poll)`` seconds (5 s with the default 0.2 s poll). A tick
seen within the grace is on time and starts its run under every policy, ``skip`` included
(workers poll, so a live tick is always seen a little after its time).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import codec
from ..errors import ConfigError
from ..storage.runs import RunRow
from ..storage.schedules import Schedules
from ._cron import Cron
from ._declared import Declared

if TYPE_CHECKING:
    from ._versions import Workflow

__all__ = [
    "CATCHUP",
    "GRACE_POLLS",
    "MAX_CATCHUP",
    "MISSED_AFTER",
    "DeclaredSchedules",
    "Schedule",
    "due_ticks",
    "missed_after",
    "tick_id",
]

CATCHUP = ("latest", "all", "skip")
MAX_CATCHUP = 100
MISSED_AFTER = 5.0  # seconds late before a tick counts as missed (at least)
GRACE_POLLS = 5  # ... and at least this many poll intervals


def missed_after(poll: float) -> float:
    """How many seconds late a tick must be seen to count as missed, for workers polling
    every ``poll`` seconds."""
    return max(MISSED_AFTER, GRACE_POLLS * poll)


@dataclass(frozen=True)
class Schedule:
    """A declared schedule (see ``App.schedule``)."""

    name: str
    workflow: Workflow
    cron: Cron
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    catchup: str
    text: str  # the arguments' codec text

    @classmethod
    def make(
        cls,
        name: str,
        wf: Workflow,
        cron: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        catchup: str,
    ) -> Schedule:
        if not isinstance(name, str) or not name or "@" in name:
            raise ConfigError(f"a schedule needs a non-empty name without '@', got {name!r}")
        if catchup not in CATCHUP:
            raise ConfigError(f"catchup must be one of {', '.join(CATCHUP)}; got {catchup!r}")
        text = codec.dumps([list(args), kwargs], where=f"the arguments of schedule {name!r}")
        return cls(name, wf, Cron.parse(cron), args, kwargs, catchup, text)


def tick_id(name: str, tick: float) -> str:
    """The run id of schedule ``name``'s tick at clock time ``tick``."""
    at = dt.datetime.fromtimestamp(tick, dt.UTC)
    return f"{name}@{at.strftime('%Y-%m-%dT%H:%M:%SZ')}"


def due_ticks(
    cron: Cron, next_at: float, now: float, catchup: str, *, grace: float = MISSED_AFTER
) -> tuple[list[float], float]:
    """The ticks to start now (by the catch-up policy) and the next tick after ``now``.

    Ticks at most ``grace`` seconds before ``now`` are on time: every policy starts them.
    """
    ticks: list[float] = []
    t = next_at
    while t <= now:
        ticks.append(t)
        if len(ticks) > MAX_CATCHUP:
            ticks.pop(0)
        t = cron.next_after(t)
    if catchup == "all":
        chosen = ticks[-MAX_CATCHUP:]
    elif catchup == "latest":
        chosen = ticks[-1:]
    else:
        chosen = [tick for tick in ticks if now - tick <= grace]
    return chosen, t


class DeclaredSchedules(Declared[Schedule]):
    """The schedules an app declared (see ``App.schedule``), and which of them it has
    recorded in its journal (once each per app)."""

    def __init__(self) -> None:
        super().__init__("schedule")

    def fire(
        self,
        journal: Schedules,
        new_row: Callable[[Schedule, str], RunRow],
        *,
        now: float,
        grace: float = MISSED_AFTER,
    ) -> list[str]:
        """Start the due runs of the declared schedules; return the ids created here.

        ``new_row(schedule, run_id)``: the row of a new run of the schedule's workflow.
        ``grace``: seconds late a tick may be and still be on time (see ``missed_after``).
        """
        if not self:
            return []
        for s in self:
            if s.name not in self.recorded:
                journal.put(
                    s.name,
                    workflow=s.workflow.name,
                    cron=s.cron.expr,
                    args=s.text,
                    catchup=s.catchup,
                    next_at=s.cron.next_after(now),
                    now=now,
                )
                self.recorded.add(s.name)
        made: list[str] = []
        for rec in journal.all():
            due = self.get(rec.name)
            if due is None or rec.next_at > now:
                continue
            ticks, after = due_ticks(due.cron, rec.next_at, now, due.catchup, grace=grace)
            rows = [new_row(due, tick_id(rec.name, t)) for t in ticks]
            if journal.fire(rec.name, expected=rec.next_at, next_at=after, runs=rows, now=now):
                made += [r.run_id for r in rows]
        return made
