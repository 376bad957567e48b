"""The runs page's counts, filters and pages as indexed SQL on a SQLite journal.

API GAP: ``App.list_runs`` has no offset, no version or age filter and no counts per
status, so the generic path reads every run and pages in Python (about 100 ms for 10,000
runs here, most of it decoding arguments no page shows). Until the journal has such a call
(``list_runs(offset=, version=, since=, order="attention")`` and ``count_runs()``), this
reads the run ids of one page with its own read-only connection, then takes the rows
through the public journal. If the table is not as expected (a newer schema, another
backend), ``for_url`` returns None and the generic path is used.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

from .. import storage

__all__ = ["IndexPage", "SqliteRunIndex"]

_COLUMNS = {"run_id", "workflow", "version", "status", "created_at"}


@dataclass(frozen=True, slots=True)
class IndexPage:
    """The ids of one page, in order, with the totals the page shows."""

    run_ids: list[str]
    total: int
    counts: dict[str, int]
    all_runs: int
    workflows: list[str]
    versions: list[str]


class SqliteRunIndex:
    """Counts and pages of ``durable_runs`` in a SQLite journal file, read-only."""

    def __init__(self, path: str) -> None:
        self.path = path

    @classmethod
    def for_url(cls, url: str) -> SqliteRunIndex | None:
        """The index for a ``sqlite:///file`` journal whose runs table has the columns."""
        scheme, sep, _ = url.partition("://")
        if not sep or scheme.lower() != "sqlite":
            return None
        try:
            path = storage.parse_url(url).path
        except Exception:  # an URL the journal itself will explain
            return None
        if not path or path == ":memory:":
            return None
        idx = cls(path)
        try:
            with idx._connect() as c:
                cols = {r[1] for r in c.execute("PRAGMA table_info(durable_runs)")}
        except sqlite3.Error:
            return None
        return idx if cols >= _COLUMNS else None

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=5)

    def page(
        self,
        *,
        state: str,
        workflow: str,
        version: str,
        since: float | None,
        search: str,
        page: int,
        per_page: int,
    ) -> tuple[IndexPage, int]:
        """One page (needs_attention first, then newest) and the page number it clamped to."""
        where: list[str] = []
        params: list[Any] = []
        for col, val in (("status", state), ("workflow", workflow), ("version", version)):
            if val:
                where.append(f"{col} = ?")
                params.append(val)
        if since is not None:
            where.append("created_at >= ?")
            params.append(since)
        if search:
            where.append("instr(run_id, ?) > 0")
            params.append(search)
        cond = (" WHERE " + " AND ".join(where)) if where else ""
        c = self._connect()
        try:
            counts = dict(c.execute("SELECT status, COUNT(*) FROM durable_runs GROUP BY status"))
            total = int(c.execute(f"SELECT COUNT(*) FROM durable_runs{cond}", params).fetchone()[0])
            pages = max(1, -(-total // per_page))
            page = min(max(1, page), pages)
            ids = [
                str(r[0])
                for r in c.execute(
                    f"SELECT run_id FROM durable_runs{cond} ORDER BY "
                    "status = 'needs_attention' DESC, created_at DESC, run_id LIMIT ? OFFSET ?",
                    [*params, per_page, (page - 1) * per_page],
                )
            ]
            workflows = [str(r[0]) for r in c.execute(_distinct("workflow"))]
            versions = [str(r[0]) for r in c.execute(_distinct("version"))]
        finally:
            c.close()
        all_runs = sum(int(v) for v in counts.values())
        out: dict[str, Any] = {str(k): int(v) for k, v in counts.items()}
        return IndexPage(ids, total, out, all_runs, workflows, versions), page


def _distinct(col: str) -> str:
    return f"SELECT DISTINCT {col} FROM durable_runs ORDER BY {col}"
