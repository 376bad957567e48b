"""Retention in the SQL journal: finished runs (and their steps, signals, chunks and, if
asked, their audit log) deleted by age or count, in one transaction.

The :class:`~surefoot.storage.pruning.Pruning` part of :class:`~.journal.SQLJournal`,
written once for SQLite and PostgreSQL.
"""

from __future__ import annotations

from typing import Any

from .dialect import Dialect
from .schema import AUDIT_SQL, DONE_SQL, StepSQL

__all__ = ["SQLPruning"]

# Finished, and not a child whose parent still runs (the parent reads it).
_GONE = (
    f"status IN {DONE_SQL} AND (parent_id IS NULL OR parent_id NOT IN (SELECT "
    f"run_id FROM durable_runs WHERE status NOT IN {DONE_SQL}))"
)


class SQLPruning:
    """Deletes finished runs (see the module docs).

    Args:
        d: the journal's dialect. steps: the backend's step statements (a run's steps are
            deleted by its ``delete_all``).
    """

    def __init__(self, d: Dialect, steps: StepSQL) -> None:
        self.d = d
        self._audit = d.sql(AUDIT_SQL)
        self._old = d.sql(f"SELECT run_id FROM durable_runs WHERE {_GONE} AND updated_at < ?")
        self._extra = d.sql(
            f"SELECT run_id FROM durable_runs WHERE {_GONE} ORDER BY updated_at DESC, "
            f"run_id{d.order_c} LIMIT ? OFFSET ?"
        )
        # the steps first, while the run's row says where they are (SQLite: a range); the
        # chunks after the run row: on PostgreSQL, a late writer holding the run row's share
        # lock has committed its chunks by then (or finds no run and inserts none)
        tables = ["durable_signals", "durable_runs", "durable_chunks"]
        self._deletes = [d.sql(steps.delete_all)]
        self._deletes += [d.sql(f"DELETE FROM {t} WHERE run_id = ?") for t in tables]
        self._drop_audit = d.sql("DELETE FROM durable_audit WHERE run_id = ?")

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
        deletes = [*self._deletes, *([self._drop_audit] if drop_audit else [])]

        def work(c: Any) -> list[str]:
            ids: dict[str, None] = {}
            if before is not None:
                ids.update((str(r[0]), None) for r in c.execute(self._old, (before,)).fetchall())
            if keep is not None:
                rows = c.execute(self._extra, (2**62, int(keep))).fetchall()
                ids.update((str(r[0]), None) for r in rows)
            for run_id in ids:
                for sql in deletes:
                    c.execute(sql, (run_id,))
                if not drop_audit:
                    c.execute(self._audit, (run_id, now, "retention", "pruned", "{}"))
            return list(ids)

        return self.d.transaction(work)
