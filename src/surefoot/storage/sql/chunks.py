"""The journal's chunk table: large step results stored as content-addressed pieces.

The :class:`~surefoot.storage.chunks.Chunks` part of :class:`~.journal.SQLJournal`.

A step result over the app's threshold is stored as a small tree of chunks (see
``surefoot.durable._chunks``); the step row then holds a reference (``sfk:…``) to the root
and ``durable_chunks`` holds the nodes, one row per ``(run_id, id)``. A node's ``id`` is a
hash of its content, so a step whose result is the previous step's result plus a few items
writes only the few nodes that are new: the others are already there and the insert does
nothing (``ON CONFLICT DO NOTHING``). That keeps the bytes of an agent loop that returns its
whole message history at every step linear in the number of steps.

Invariants (see docs/durable.md, "Large values"):

* **Same transaction.** The nodes of a step's value are inserted in the transaction (and
  the commit) that writes the step row: :meth:`SQLJournal.commit` calls
  :meth:`SQLChunks.put` inside its batch, after the records (on PostgreSQL their
  statements have locked the run rows in run-id order already, so the nodes' ``FOR SHARE``
  takes no lock out of that order). A crash leaves either both or neither.
* **Fenced.** A node is inserted only while the run still has the writer's epoch, as the
  step row is (on PostgreSQL under the same ``FOR SHARE`` lock of the run row): a zombie's
  refused step leaves no node behind, and ``prune``, which deletes a run's nodes after its
  run row, never leaves a late writer's nodes behind either.
* **Scoped to a run.** Nodes are keyed by run, never shared between runs, so deleting a
  run's rows deletes exactly its nodes (``prune``) with no reference counting and no race
  with another run's writer; a fork copies the source run's nodes in its own transaction.
* Nodes no step row references any more (a step journalled again, an operator's reset)
  stay until the run is pruned; they are never read.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..chunks import ChunkWrite
from .dialect import Dialect
from .schema import TEXT

__all__ = ["POSTGRES_MIGRATION", "SQLITE_MIGRATION", "SQLChunks"]

#: Migration 5 of the durable journal on SQLite.
SQLITE_MIGRATION = """
    CREATE TABLE durable_chunks (
        run_id TEXT NOT NULL,
        id TEXT NOT NULL,
        data TEXT NOT NULL,
        PRIMARY KEY (run_id, id)
    )
    """
#: Migration 5 of the durable journal on PostgreSQL.
POSTGRES_MIGRATION = """
    CREATE TABLE durable_chunks (
        run_id TEXT NOT NULL,
        id TEXT NOT NULL,
        data TEXT NOT NULL,
        PRIMARY KEY (run_id, id)
    )
    """

_ROWS = 64  # nodes per statement
# The nodes of one run as one multi-row statement; the run's epoch is checked once.
_PUT = (
    "INSERT INTO durable_chunks (run_id, id, data) SELECT {text}, v.column1, v.column2 "
    "FROM (VALUES {rows}) AS v WHERE EXISTS (SELECT 1 FROM durable_runs WHERE run_id = ? "
    "AND epoch = ?{share_lock}) ON CONFLICT (run_id, id) DO NOTHING"
)
_COPY = (
    "INSERT INTO durable_chunks (run_id, id, data) SELECT ?, id, data FROM durable_chunks "
    "WHERE run_id = ? ON CONFLICT (run_id, id) DO NOTHING"
)


class SQLChunks:
    """The chunk rows (see the module docs); ``put`` and ``copy`` run inside a transaction of
    the journal's (a commit, a fork)."""

    def __init__(self, d: Dialect) -> None:
        self.d = d
        self.max_value_bytes = d.max_value_bytes
        self._puts: dict[int, str] = {}
        self._copy = d.sql(_COPY)
        self._get = d.sql(
            f"SELECT id, data FROM durable_chunks WHERE run_id = ? AND {d.any_of('id')}"
        )

    def put(self, c: Any, chunks: Sequence[ChunkWrite]) -> None:
        """Insert ``chunks`` inside the open transaction ``c`` (the step rows' own)."""
        by_run: dict[tuple[str, int], list[tuple[str, str]]] = {}
        for run_id, epoch, i, data in chunks:
            by_run.setdefault((run_id, epoch), []).append((i, data))
        for (run_id, epoch), nodes in by_run.items():
            for at in range(0, len(nodes), _ROWS):
                part = nodes[at : at + _ROWS]
                params: list[Any] = [run_id]
                for i, data in part:
                    params += (i, data)
                params += (run_id, epoch)
                c.execute(self._put_sql(len(part)), params)

    def _put_sql(self, n: int) -> str:
        sql = self._puts.get(n)
        if sql is None:
            rows = ", ".join([f"({TEXT}, {TEXT})"] + ["(?, ?)"] * (n - 1))
            text = _PUT.format(text=TEXT, rows=rows, share_lock=self.d.share_lock)
            sql = self._puts[n] = self.d.sql(text)
        return sql

    def copy(self, c: Any, src: str, dst: str) -> None:
        """Give run ``dst`` the nodes of run ``src``, inside ``c`` (a fork's transaction)."""
        c.execute(self._copy, (dst, src))

    def get(self, run_id: str, ids: Iterable[str]) -> dict[str, str]:
        """The stored data of run ``run_id``'s nodes ``ids`` (missing ones are left out)."""
        d = self.d
        want = list(dict.fromkeys(ids))
        out: dict[str, str] = {}
        for at in range(0, len(want), 500):
            for i, data in d.read(self._get, (run_id, d.array(want[at : at + 500]))):
                out[str(i)] = str(data)
        return out

    def usage(self, run_id: str | None = None) -> tuple[int, int]:
        """``(nodes, characters of data)`` stored, for one run or the whole journal."""
        sql = "SELECT COUNT(*), COALESCE(SUM(LENGTH(data)), 0) FROM durable_chunks"
        params: tuple[Any, ...] = ()
        if run_id is not None:
            sql += " WHERE run_id = ?"
            params = (run_id,)
        ((n, size),) = self.d.read(self.d.sql(sql), params)
        return int(n), int(size)
