"""The journal's listings in SQL: filtered, ordered pages of runs, counts, and workers.

The runs page of ``surefoot ui``, ``App.list_runs`` / ``App.count_runs`` and the metrics'
``backlog`` (queue depth, oldest claimable run) read through here. Each filter is one
indexed condition (``status``, ``workflow``, ``version``, ``created_at >= since``,
``run_id`` containing ``search``); the ``attention`` order puts
``needs_attention`` first, then newest first. A page first picks its run ids (narrow rows,
the ``(status, created_at)`` and ``created_at`` indexes), then reads those rows whole, so
arguments and results of runs the page does not show are never read.

Also here: the audit entry a claim writes in its own transaction (``claim_audit``, and
``orphan_audit`` for the takeover of a dead holder's run).
"""

from __future__ import annotations

import json
from typing import Any

from ...errors import ConfigError
from ..runs import RUN_ORDERS, RunRow, WorkerRow
from .dialect import ROWS, Dialect, Then

__all__ = ["CLAIM_AUDIT", "ORPHAN_AUDIT", "SQLRunQueries", "claim_audit", "orphan_audit"]

_TAKEN = (
    "' finished or suspended: its worker died or stalled past its lease (or an operator "
    "resumed the run)'"
)
CLAIM_AUDIT = (
    "INSERT INTO durable_audit (run_id, at, actor, action, detail) SELECT run_id, ?, ?, "
    "CASE WHEN claims > 1 THEN 'taken_over' ELSE 'claimed' END, "
    """'{"worker":' || CAST(? AS TEXT) || ',"epoch":' || CAST(epoch AS TEXT) || """
    """',"claims":' || CAST(claims AS TEXT) || ',"claimed_at":' || CAST(? AS TEXT) || """
    """CASE WHEN claims > 1 THEN ',"previous_epoch":' || CAST(epoch - 1 AS TEXT) || """
    """',"why":"claimed again before the execution at epoch ' || CAST(epoch - 1 AS TEXT) """
    f"|| {_TAKEN} || '\"' ELSE '' END || '}}' FROM {ROWS}"
)
"""The audit entry of a claim, written in the claim's own transaction (no extra commit):
``claimed``, or ``taken_over`` (with the previous epoch) when the run was claimed again
before its previous execution finished or suspended (``claims > 1``). The detail is JSON
built in SQL from the claimed rows (``epoch``, ``claims``) and this claim's worker and time.
"""


def claim_audit(d: Dialect, owner: str, now: float) -> Then:
    """The :data:`CLAIM_AUDIT` statement of one claim by ``owner`` at ``now``; it reads the
    claimed rows' ``run_id``, ``epoch`` and ``claims`` (the claim must return them)."""
    return Then(
        d.sql(CLAIM_AUDIT),
        (float(now), owner, json.dumps(owner), repr(float(now))),
        "durable_runs",
        "run_id",
    )


ORPHAN_AUDIT = (
    "INSERT INTO durable_audit (run_id, at, actor, action, detail) SELECT run_id, ?, ?, "
    """'taken_over', '{"worker":' || CAST(? AS TEXT) || ',"epoch":' || CAST(epoch AS TEXT) """
    """|| ',"claims":' || CAST(claims AS TEXT) || ',"claimed_at":' || CAST(? AS TEXT) || """
    """',"previous_epoch":' || CAST(epoch - 1 AS TEXT) || ',"why":"claimed again before """
    """the execution at epoch ' || CAST(epoch - 1 AS TEXT) || ' finished or suspended: its """
    """holder''s process is gone (its liveness lock was free) and its lease had not run """
    f"""out","holder_dead":' || CAST(? AS TEXT) || '}}' FROM {ROWS}"""
)


def orphan_audit(
    d: Dialect, owner: str, now: float, holder: str, lease_until: float, how: str
) -> Then:
    """The ``taken_over`` entry of a claim of a run whose holder's process died
    (``claim_orphans``): as :func:`claim_audit`'s, plus ``holder_dead``: the ``holder``,
    the ``lease_until`` not waited out, and ``how`` its death was seen."""
    dead = json.dumps({"holder": holder, "lease_until": lease_until, "how": how})
    return Then(
        d.sql(ORPHAN_AUDIT),
        (float(now), owner, json.dumps(owner), repr(float(now)), dead),
        "durable_runs",
        "run_id",
    )


class SQLRunQueries:
    """``page_runs``, ``count_runs``, ``backlog``, ``run_versions`` and ``workers`` of the SQL
    journal."""

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
