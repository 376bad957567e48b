"""The journal's listings in SQL: filtered, ordered pages of runs, counts, and workers.

The runs page of ``surefoot ui`` and ``App.list_runs`` / ``App.count_runs`` read through
here. Each filter is one indexed condition (``status``, ``workflow``, ``version``,
``created_at >= since``, ``run_id`` containing ``search``); the ``attention`` order puts
``needs_attention`` first, then newest first. A page first picks its run ids (narrow rows,
the ``(status, created_at)`` and ``created_at`` indexes), then reads those rows whole, so
arguments and results of runs the page does not show are never read.
"""

from __future__ import annotations

from typing import Any

from ...errors import ConfigError
from ..base import RUN_ORDERS, RunRow, WorkerRow
from .dialect import Dialect

__all__ = ["SQLRunQueries"]


class SQLRunQueries:
    """``page_runs``, ``count_runs``, ``run_versions`` and ``workers`` of the SQL journal."""

    d: Dialect
    _sel: str

    def _where(
        self,
        status: str | None,
        workflow: str | None,
        version: str | None,
        since: float | None,
        search: str | None,
    ) -> tuple[str, list[Any]]:
        where: list[str] = []
        params: list[Any] = []
        for col, val in (("status", status), ("workflow", workflow), ("version", version)):
            if val is not None:
                where.append(f"{col} = ?")
                params.append(val)
        if since is not None:
            where.append("created_at >= ?")
            params.append(float(since))
        if search:
            where.append(self.d.contains("run_id", "?"))
            params.append(search)
        return (" WHERE " + " AND ".join(where)) if where else "", params

    def page_runs(
        self,
        *,
        status: str | None = None,
        workflow: str | None = None,
        version: str | None = None,
        since: float | None = None,
        search: str | None = None,
        order: str = "newest",
        offset: int = 0,
        limit: int = 100,
    ) -> list[RunRow]:
        """Runs matching every given filter, ``limit`` of them from ``offset`` on.

        ``order``: ``newest`` (created_at descending, then run id) or ``attention``
        (``needs_attention`` first, then newest). ``search``: run ids containing it.

        Raises:
            ConfigError: an unknown order, a negative offset or a limit below 1.
        """
        if order not in RUN_ORDERS:
            raise ConfigError(f"unknown run order {order!r}; use one of {', '.join(RUN_ORDERS)}")
        if int(offset) < 0 or int(limit) < 1:
            raise ConfigError(
                f"a page of runs needs offset >= 0 and limit >= 1, got offset={offset!r} "
                f"limit={limit!r}"
            )
        cond, params = self._where(status, workflow, version, since, search)
        c = self.d.order_c
        by = f"created_at DESC, run_id{c}"
        if order == "attention":
            by = f"CASE WHEN status = 'needs_attention' THEN 0 ELSE 1 END, {by}"
        ids = self.d.sql(f"SELECT run_id FROM durable_runs{cond} ORDER BY {by} LIMIT ? OFFSET ?")
        sql = self.d.sql(
            f"SELECT {self._sel} FROM durable_runs WHERE {self.d.any_of('run_id')} ORDER BY {by}"
        )
        picked = [r[0] for r in self.d.read(ids, (*params, int(limit), int(offset)))]
        if not picked:
            return []
        return [RunRow(*r) for r in self.d.read(sql, (self.d.array(picked),))]

    def count_runs(
        self,
        *,
        status: str | None = None,
        workflow: str | None = None,
        version: str | None = None,
        since: float | None = None,
        search: str | None = None,
    ) -> dict[str, int]:
        """How many runs match every given filter, per status (statuses with none left out)."""
        cond, params = self._where(status, workflow, version, since, search)
        rows = self.d.read(
            self.d.sql(f"SELECT status, COUNT(*) FROM durable_runs{cond} GROUP BY status"),
            params,
        )
        return {str(s): int(n) for s, n in rows}

    def run_versions(self) -> list[tuple[str, str]]:
        """The distinct (workflow, version) pairs of the journal's runs, sorted."""
        rows = self.d.read(self.d.sql("SELECT DISTINCT workflow, version FROM durable_runs"))
        return sorted((str(w), str(v)) for w, v in rows)  # code point order on every backend

    def workers(self, *, now: float) -> list[WorkerRow]:
        """Every worker the journal has seen, by id, with the unexpired leases it holds."""
        rows = self.d.read(
            self.d.sql(
                "SELECT w.worker_id, w.workflows, w.seen_at, (SELECT COUNT(*) FROM "
                "durable_runs r WHERE r.status = 'running' AND r.owner = w.worker_id AND "
                f"r.lease_until >= ?) FROM durable_workers w ORDER BY w.worker_id{self.d.order_c}"
            ),
            (float(now),),
        )
        out = []
        for worker_id, text, seen_at, leases in rows:
            pairs = [item.rpartition("@") for item in str(text).split(";") if "@" in item]
            offered = [(n, v) for n, _, v in pairs]
            out.append(WorkerRow(str(worker_id), offered, float(seen_at), int(leases)))
        return out
