"""Schedules in the SQL journal: a tick's runs are created by the compare-and-set that moves
the schedule past the tick.

The :class:`~surefoot.storage.schedules.Schedules` part of :class:`~.journal.SQLJournal`,
written once for SQLite and PostgreSQL; its table comes from migration 4. A schedule's
``next_at`` moves forward by compare-and-set in the same transaction that creates the tick's
runs (whose ids are keyed by the tick), so a tick starts exactly one run however many
workers fire it.
"""

from __future__ import annotations

import json
from typing import Any

from ..runs import RunRow
from ..schedules import ScheduleRow
from .dialect import Dialect
from .schema import AUDIT_SQL, CHANNEL, INSERT_RUN, run_params

__all__ = ["SQLSchedules"]


class SQLSchedules:
    """Recorded schedules on the journal's tables (see the module docs)."""

    def __init__(self, d: Dialect) -> None:
        self.d = d
        self._insert = d.sql(INSERT_RUN)
        self._audit = d.sql(AUDIT_SQL)
        self._move = d.sql(
            "UPDATE durable_schedules SET next_at = ?, updated_at = ? "
            "WHERE name = ? AND next_at = ?"
        )

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
        self.d.write(
            self.d.sql(
                "INSERT INTO durable_schedules (name, workflow, cron, args, catchup, next_at, "
                "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET "
                "workflow = excluded.workflow, args = excluded.args, "
                "catchup = excluded.catchup, next_at = CASE WHEN durable_schedules.cron = "
                "excluded.cron THEN durable_schedules.next_at ELSE excluded.next_at END, "
                "cron = excluded.cron, updated_at = excluded.updated_at"
            ),
            (name, workflow, cron, args, catchup, next_at, now),
            idempotent=True,
        )

    def all(self) -> list[ScheduleRow]:
        """Every recorded schedule, by name."""
        rows = self.d.read(
            "SELECT name, workflow, cron, args, catchup, next_at FROM durable_schedules "
            "ORDER BY name"
        )
        return [
            ScheduleRow(str(a), str(b), str(c), str(e), str(f), float(g))
            for a, b, c, e, f, g in rows
        ]

    def fire(
        self, name: str, *, expected: float, next_at: float, runs: list[RunRow], now: float
    ) -> int:
        """Move schedule ``name`` from ``expected`` to ``next_at`` and create ``runs``.

        One transaction; nothing happens if another worker moved the schedule first (its
        ``next_at`` is no longer ``expected``), and a run id that exists is not created
        again. Returns the runs created.
        """
        d = self.d

        def work(c: Any) -> int:
            if c.execute(self._move, (next_at, now, name, expected)).rowcount != 1:
                return 0
            made = 0
            for row in runs:
                if c.execute(self._insert, run_params(row)).rowcount == 1:
                    made += 1
                    detail = json.dumps({"schedule": name})
                    c.execute(self._audit, (row.run_id, now, "schedule", "created", detail))
                    d.notify_run(c, CHANNEL, row.run_id)
            return made

        return d.transaction(work)
