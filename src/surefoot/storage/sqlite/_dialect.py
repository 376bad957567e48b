"""SQLite's spelling of the shared SQL, and how its statements run on a ``SQLiteDB``.

No row locks: ``BEGIN IMMEDIATE`` takes the file's write lock for the whole transaction, so
``FOR UPDATE`` / ``SKIP LOCKED`` are left out. A claim looks before it locks (a plain read
first), so idle workers polling the queue never take the write lock or commit.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ..sql.dialect import ROWS, Then
from ._db import SQLiteDB

__all__ = ["SQLiteDialect"]

T = TypeVar("T")


class SQLiteDialect:
    """The :class:`~surefoot.storage.sql.dialect.Dialect` of one SQLite file."""

    row_lock = ""
    share_lock = ""
    key_share = ""
    skip_locked = ""
    order_c = ""  # SQLite compares text byte by byte already
    step_seq = "rowid"

    def __init__(self, db: SQLiteDB) -> None:
        self.db = db
        self.url = db.url
        self.max_value_bytes = db.max_value_bytes

    def sql(self, text: str) -> str:
        return text

    def any_of(self, column: str) -> str:
        return f"{column} IN (SELECT value FROM json_each(?))"

    def array(self, values: Sequence[Any]) -> Any:
        return json.dumps(list(values))

    def member(self, names: str, name: str) -> str:
        return f"instr(char(31) || {names} || char(31), char(31) || {name} || char(31)) > 0"

    def contains(self, haystack: str, needle: str) -> str:
        return f"instr({haystack}, {needle}) > 0"

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return self.db.read(sql, params)

    def write(self, sql: str, params: Sequence[Any] = (), *, idempotent: bool = False) -> int:
        return self.db.write_one(sql, params)

    def prepare(
        self, sql: str, types: Sequence[str], *, idempotent: bool = False
    ) -> Callable[[Sequence[Any]], int]:
        """``write`` bound to ``sql``: sqlite3 keeps its compiled statements already."""
        return self.db.writer_of(sql)

    def transaction(self, fn: Callable[[Any], T], *, idempotent: bool = False) -> T:
        with self.db.write() as c:
            return fn(c)

    batch = transaction

    def poll_write(
        self,
        sql: str,
        params: Sequence[Any],
        probe: tuple[str, Sequence[Any]] | None,
        then: Then | None = None,
    ) -> list[Any]:
        if probe is not None and not self.db.read(*probe):
            return []
        with self.db.write() as c:
            rows = list(c.execute(sql, params).fetchall())
            if rows and then is not None:  # same transaction: the rows as just written
                marks = ", ".join("?" for _ in rows)
                src = f"(SELECT * FROM {then.table} WHERE {then.key} IN ({marks})) AS claimed"
                c.execute(then.sql.replace(ROWS, src), (*then.params, *(r[0] for r in rows)))
            return rows

    def many(self, conn: Any, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        conn.executemany(sql, rows)

    def notify(self, conn: Any, channel: str, payload: str) -> None:
        """Nothing: SQLite has no notifications; workers poll."""

    def notify_run(self, conn: Any, channel: str, run_id: str) -> None:
        """Nothing: SQLite has no notifications; workers poll."""
