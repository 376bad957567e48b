"""PostgreSQL ``KeyStore``: idempotency records; a claim is one insert-if-absent statement.

The claim is ``INSERT … ON CONFLICT DO UPDATE … WHERE <take-over allowed> RETURNING``, so two
processes (or machines) claiming one key at once cannot both win: the loser's statement waits
for the winner's row lock and then finds the condition false. The loser's answer (the record
now stored) comes from the same round trip when it can, and from one more read otherwise.
"""

from __future__ import annotations

from typing import Any

from ...clock import ServerClock
from ...errors import StoreUnavailableError
from ..keys import KeyRecord
from ._db import NOT_APPLIED, PostgresDB

__all__ = ["MIGRATIONS", "PostgresKeyStore"]

MIGRATIONS = [
    """
    CREATE TABLE surefoot_keys (
        key TEXT PRIMARY KEY,
        fingerprint TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('running', 'done')),
        result TEXT,
        owner TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        lease_until DOUBLE PRECISION NOT NULL,
        expires_at DOUBLE PRECISION
    );
    CREATE INDEX surefoot_keys_expiry ON surefoot_keys (expires_at) WHERE expires_at IS NOT NULL
    """
]

_COLS = "key, fingerprint, state, result, owner, created_at, lease_until, expires_at"

_CLAIM = f"""
WITH ins AS (
    INSERT INTO surefoot_keys AS k ({_COLS})
    VALUES (%(key)s, %(fp)s, 'running', NULL, %(owner)s, %(now)s, %(lease)s, NULL)
    ON CONFLICT (key) DO UPDATE SET
        fingerprint = excluded.fingerprint, state = 'running', result = NULL,
        owner = excluded.owner, created_at = excluded.created_at,
        lease_until = excluded.lease_until, expires_at = NULL
    WHERE (k.state = 'done' AND k.expires_at IS NOT NULL AND k.expires_at <= excluded.created_at)
       OR (k.state = 'running' AND k.lease_until <= excluded.created_at
           AND k.fingerprint = excluded.fingerprint)
    RETURNING {_COLS}
)
SELECT true, {_COLS} FROM ins
UNION ALL
SELECT false, {_COLS} FROM surefoot_keys
WHERE key = %(key)s AND NOT EXISTS (SELECT 1 FROM ins)
"""


def _row(r: Any) -> KeyRecord:
    return KeyRecord(
        r[0], r[1], r[2], r[3], r[4], float(r[5]), float(r[6]), None if r[7] is None else r[7]
    )


class PostgresKeyStore:
    """Idempotency records in ``surefoot_keys``; safe across processes and machines.

    Args:
        db: the database (``PostgresDB``).
    """

    def __init__(self, db: PostgresDB) -> None:
        self.db = db
        db.migrate("keys", MIGRATIONS)

    def server_clock(self) -> ServerClock:
        """The database's clock, for an ``IdempotentExecutor`` given this store itself."""
        return ServerClock(self.db.server_time)

    def claim(
        self, key: str, fingerprint: str, owner: str, now: float, lease_until: float
    ) -> tuple[bool, KeyRecord]:
        params = {"key": key, "fp": fingerprint, "owner": owner, "now": now, "lease": lease_until}

        def send(conn: Any) -> list[Any]:
            self.db.round_trips += 1
            return list(conn.execute(_CLAIM, params).fetchall())

        def landed(conn: Any) -> Any:
            # This claim's row: this owner, this claim's time, still running.
            row = conn.execute(
                f"SELECT true, {_COLS} FROM surefoot_keys WHERE key = %s AND owner = %s "
                "AND created_at = %s AND state = 'running'",
                (key, owner, now),
            ).fetchone()
            return NOT_APPLIED if row is None else [row]

        for _ in range(10):
            rows = self.db.run(send, resolve=landed)
            if rows:
                return bool(rows[0][0]), _row(rows[0][1:])
            # The conflicting row was committed after this statement's snapshot; read it.
            current = self.get(key)
            if current is not None:
                return False, current
        raise StoreUnavailableError(
            self.db.url,
            f"idempotency key {key!r} was deleted by another process between each of 10 claims "
            "and reads; stop whatever is deleting it, then retry",
        )

    def complete(self, key: str, owner: str, result: str, expires_at: float | None) -> bool:
        return self._change(
            "UPDATE surefoot_keys SET state = 'done', result = %s, expires_at = %s "
            "WHERE key = %s AND owner = %s AND state = 'running'",
            (result, expires_at, key, owner),
            # landed: the key is done by this owner with this result
            "SELECT 1 FROM surefoot_keys WHERE key = %s AND owner = %s AND state = 'done' "
            "AND result = %s",
            (key, owner, result),
        )

    def release(self, key: str, owner: str) -> bool:
        return self._change(
            "DELETE FROM surefoot_keys WHERE key = %s AND owner = %s AND state = 'running'",
            (key, owner),
            # landed: no running claim of this owner is left
            "SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM surefoot_keys WHERE key = %s "
            "AND owner = %s AND state = 'running')",
            (key, owner),
        )

    def get(self, key: str) -> KeyRecord | None:
        rows = self.db.execute(
            f"SELECT {_COLS} FROM surefoot_keys WHERE key = %s", (key,), write=False
        )
        return _row(rows[0]) if rows else None

    def delete(self, key: str) -> bool:
        return self._change(
            "DELETE FROM surefoot_keys WHERE key = %s",
            (key,),
            "SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM surefoot_keys WHERE key = %s)",
            (key,),
        )

    def purge(self, now: float) -> int:
        def one(conn: Any) -> int:
            return int(
                conn.execute(
                    "DELETE FROM surefoot_keys WHERE state = 'done' AND expires_at IS NOT NULL "
                    "AND expires_at <= %s",
                    (now,),
                ).rowcount
            )

        return self.db.run(one)

    def _change(
        self, sql: str, args: tuple[Any, ...], landed_sql: str, landed_args: tuple[Any, ...]
    ) -> bool:
        """One change; when its answer is lost, ``landed_sql`` (one row when the change is
        in the database) finds out whether it landed (see ``PostgresDB.run``)."""

        def one(conn: Any) -> bool:
            return bool(conn.execute(sql, args).rowcount > 0)

        def landed(conn: Any) -> Any:
            return True if conn.execute(landed_sql, landed_args).fetchone() else NOT_APPLIED

        return self.db.run(one, resolve=landed)

    def __repr__(self) -> str:
        return f"PostgresKeyStore({self.db.url!r})"
