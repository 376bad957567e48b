"""The journal's listings in SQL: filtered, ordered pages of runs, counts, and workers.

The runs page of ``surefoot ui``, ``App.list_runs`` / ``App.count_runs`` and the metrics'
``backlog`` (queue depth, oldest claimable run) read through here. Each filter is one
indexed condition (``status``, ``workflow``, ``version``, ``created_at >= since``,
``run_id`` containing ``search``); the ``attention`` order puts
``needs_attention`` first, then newest first. A page first picks its run ids (narrow rows,
the ``(status, created_at)`` and ``created_at`` indexes), then reads those rows whole, so
arguments and results of runs the page does not show are never read.
"""

from __future__ import annotations

from typing import Any

from ...errors import ConfigError
from ..runs import RUN_ORDERS, RunRow, WorkerRow
from .dialect import Dialect
from .schema import SEL, workflow_pairs

__all__ = ["SQLListing"]


class SQLListing:
    """``page_runs``, ``count_runs``, ``backlog``, ``run_versions`` and ``workers`` of the SQL
    journal (a part of :class:`~.journal.SQLJournal`, which offers them as its own)."""

    def __init__(self, d: Dialect) -> None:
        self.d = d

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
            f"SELECT {SEL} FROM durable_runs WHERE {self.d.any_of('run_id')} ORDER BY {by}"
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

    def backlog(self, *, now: float) -> tuple[int, float | None]:
        """How many runs a worker could claim at ``now``, and since when the longest-waiting
        of them has been claimable (None when there is none).

        Claimable: pending (since it was created), sleeping and due (since its ``wake_at``),
        running with an expired lease (since ``lease_until``: its holder stopped renewing).
        Three aggregates on the ``(status, …)`` indexes; no run row is read.
        """
        rows = self.d.read(
            self.d.sql(
                "SELECT COUNT(*), MIN(created_at) FROM durable_runs WHERE status = 'pending' "
                "UNION ALL SELECT COUNT(*), MIN(wake_at) FROM durable_runs "
                "WHERE status = 'sleeping' AND wake_at <= ? "
                "UNION ALL SELECT COUNT(*), MIN(lease_until) FROM durable_runs "
                "WHERE status = 'running' AND lease_until < ?"
            ),
            (float(now), float(now)),
        )
        depth = sum(int(n) for n, _ in rows)
        since = [float(t) for n, t in rows if int(n) and t is not None]
        return depth, (min(since) if since else None)

    def run_versions(self) -> list[tuple[str, str]]:
        """The distinct (workflow, version) pairs of the journal's runs, sorted."""
        rows = self.d.read(self.d.sql("SELECT DISTINCT workflow, version FROM durable_runs"))
        return sorted((str(w), str(v)) for w, v in rows)  # code point order on every backend

    def workers(self, *, now: float) -> list[WorkerRow]:
        """Every worker the journal has seen, by id, with the unexpired leases it holds.

        An app that only executed its own runs (``start``) holds a liveness lock, so its
        row exists, but it never offered workflows: it is not a worker and not listed."""
        rows = self.d.read(
            self.d.sql(
                "SELECT w.worker_id, w.workflows, w.seen_at, (SELECT COUNT(*) FROM "
                "durable_runs r WHERE r.status = 'running' AND r.owner = w.worker_id AND "
                "r.lease_until >= ?) FROM durable_workers w WHERE w.workflows <> '' "
                f"ORDER BY w.worker_id{self.d.order_c}"
            ),
            (float(now),),
        )
        out = []
        for worker_id, text, seen_at, leases in rows:
            offered = workflow_pairs(text)
            out.append(WorkerRow(str(worker_id), offered, float(seen_at), int(leases)))
        return out
