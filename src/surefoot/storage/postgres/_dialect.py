"""PostgreSQL's spelling of the shared SQL, and how its statements run on a ``PostgresDB``.

Placeholders are ``%s``; rows are locked (``FOR UPDATE``, ``FOR SHARE``) and claimers skip
each other's rows (``SKIP LOCKED``); a list is one array parameter (``= ANY(%s)``); a batch
is pipelined (``BEGIN``, its statements, ``COMMIT``: one round trip); a write sent very
often (a journalled step) is prepared once per connection (:mod:`._prepared`); text sorts in byte
order (``COLLATE "C"``), as on SQLite. Every statement runs through ``PostgresDB.run``, which
reconnects and retries within ``reconnect_timeout``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ..sql.dialect import ROWS, Then
from ._db import PostgresDB

__all__ = ["PostgresDialect"]

T = TypeVar("T")


class PostgresDialect:
    """The :class:`~surefoot.storage.sql.dialect.Dialect` of one PostgreSQL schema."""

    row_lock = " FOR UPDATE"
    share_lock = " FOR SHARE"
    key_share = " FOR KEY SHARE"
    skip_locked = " FOR UPDATE SKIP LOCKED"
    order_c = ' COLLATE "C"'
    step_seq = "seq"

    def __init__(self, db: PostgresDB) -> None:
        self.db = db
        self.url = db.url
        self.max_value_bytes = db.max_value_bytes

    def sql(self, text: str) -> str:
        return text.replace("?", "%s")

    def any_of(self, column: str) -> str:
        return f"{column} = ANY(?)"

    def array(self, values: Sequence[Any]) -> Any:
        return list(values)

    def member(self, names: str, name: str) -> str:
        return f"{name} = ANY(string_to_array({names}, chr(31)))"

    def contains(self, haystack: str, needle: str) -> str:
        return f"strpos({haystack}, {needle}) > 0"

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return self.db.execute(sql, params, write=False)

    def write(self, sql: str, params: Sequence[Any] = (), *, idempotent: bool = False) -> int:
        def one(conn: Any) -> int:
            return int(conn.execute(sql, params).rowcount)

        return self.db.run(one, idempotent=idempotent)

    def prepare(
        self, sql: str, types: Sequence[str], *, idempotent: bool = False
    ) -> Callable[[Sequence[Any]], int]:
        return self.db.prepared(self.sql(sql), types, idempotent=idempotent)

    def transaction(self, fn: Callable[[Any], T], *, idempotent: bool = False) -> T:
        return self.db.run(fn, tx=True, idempotent=idempotent)

    def batch(self, fn: Callable[[Any], T], *, idempotent: bool = False) -> T:
        def pipelined(conn: Any) -> T:
            with conn.pipeline():
                conn.execute("BEGIN")
                out = fn(conn)
                conn.execute("COMMIT")
            return out

        return self.db.run(pipelined, idempotent=idempotent)

    def poll_write(
        self,
        sql: str,
        params: Sequence[Any],
        probe: tuple[str, Sequence[Any]] | None,
        then: Then | None = None,
    ) -> list[Any]:
        if then is not None:  # one statement: the write's RETURNING rows feed ``then``
            sql = f"WITH w AS ({sql}), t AS ({then.sql.replace(ROWS, 'w')}) SELECT * FROM w"
            params = (*params, *then.params)
        rows = self.db.execute(sql, params, write=False, idempotent=True)
        if rows:  # an idle poll wrote nothing: only a claim that took runs is a commit
            self.db.count_commit()
        return rows

    def many(self, conn: Any, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with conn.cursor() as cur:
            cur.executemany(sql, rows)

    def notify(self, conn: Any, channel: str, payload: str) -> None:
        conn.execute("SELECT pg_notify(%s, %s)", (self.db.channel(channel), payload))

    def notify_run(self, conn: Any, channel: str, run_id: str) -> None:
        conn.execute(
            "SELECT pg_notify(%s, json_build_array(run_id, workflow, version, queue)::TEXT) "
            "FROM durable_runs WHERE run_id = %s",
            (self.db.channel(channel), run_id),
        )
