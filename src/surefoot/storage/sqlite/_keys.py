"""SQLite KeyStore: one table; a claim is a single insert-if-absent statement."""

from __future__ import annotations

from typing import Any

from ..keys import KeyRecord
from ._db import SQLiteDB

__all__ = ["SQLiteKeyStore"]

MIGRATIONS = [
    """
    CREATE TABLE surefoot_keys (
        key TEXT PRIMARY KEY,
        fingerprint TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('running', 'done')),
        result TEXT,
        owner TEXT NOT NULL,
        created_at REAL NOT NULL,
        lease_until REAL NOT NULL,
        expires_at REAL
    );
    CREATE INDEX surefoot_keys_expiry ON surefoot_keys(expires_at) WHERE expires_at IS NOT NULL
    """
]

_COLS = "key, fingerprint, state, result, owner, created_at, lease_until, expires_at"

# Insert if absent; take over only an expired done record or an abandoned running one with
# the same fingerprint. RETURNING yields a row only when this statement wrote it.
_CLAIM = f"""
INSERT INTO surefoot_keys ({_COLS}) VALUES (?, ?, 'running', NULL, ?, ?, ?, NULL)
ON CONFLICT(key) DO UPDATE SET
    fingerprint = excluded.fingerprint, state = 'running', result = NULL,
    owner = excluded.owner, created_at = excluded.created_at,
    lease_until = excluded.lease_until, expires_at = NULL
WHERE (surefoot_keys.state = 'done' AND surefoot_keys.expires_at IS NOT NULL
       AND surefoot_keys.expires_at <= excluded.created_at)
   OR (surefoot_keys.state = 'running' AND surefoot_keys.lease_until <= excluded.created_at
       AND surefoot_keys.fingerprint = excluded.fingerprint)
RETURNING {_COLS}
"""


def _row(r: Any) -> KeyRecord:
    return KeyRecord(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7])


class SQLiteKeyStore:
    """Idempotency records in ``surefoot_keys``; safe across threads and processes."""

    def __init__(self, db: SQLiteDB) -> None:
        """Open the store on ``db``, creating ``surefoot_keys`` on first use.

        Raises:
            SchemaVersionError: the file is not surefoot's, was written by a newer surefoot,
                or already has a ``surefoot_keys`` table surefoot did not create.
            StoreUnavailableError: the database cannot be used (corrupt, locked).
            StoreError: the driver refused a statement.
        """
        self.db = db
        db.migrate("keys", MIGRATIONS)

    def claim(
        self, key: str, fingerprint: str, owner: str, now: float, lease_until: float
    ) -> tuple[bool, KeyRecord]:
        with self.db.write() as c:
            got = c.execute(_CLAIM, (key, fingerprint, owner, now, lease_until)).fetchone()
            if got is not None:
                return True, _row(got)
            cur = c.execute(f"SELECT {_COLS} FROM surefoot_keys WHERE key = ?", (key,))
            return False, _row(cur.fetchone())

    def complete(self, key: str, owner: str, result: str, expires_at: float | None) -> bool:
        with self.db.write() as c:
            n = c.execute(
                "UPDATE surefoot_keys SET state = 'done', result = ?, expires_at = ? "
                "WHERE key = ? AND owner = ? AND state = 'running'",
                (result, expires_at, key, owner),
            ).rowcount
        return bool(n)

    def release(self, key: str, owner: str) -> bool:
        with self.db.write() as c:
            n = c.execute(
                "DELETE FROM surefoot_keys WHERE key = ? AND owner = ? AND state = 'running'",
                (key, owner),
            ).rowcount
        return bool(n)

    def get(self, key: str) -> KeyRecord | None:
        rows = self.db.read(f"SELECT {_COLS} FROM surefoot_keys WHERE key = ?", (key,))
        return _row(rows[0]) if rows else None

    def delete(self, key: str) -> bool:
        with self.db.write() as c:
            return bool(c.execute("DELETE FROM surefoot_keys WHERE key = ?", (key,)).rowcount)

    def purge(self, now: float) -> int:
        with self.db.write() as c:
            return c.execute(
                "DELETE FROM surefoot_keys WHERE state = 'done' AND expires_at IS NOT NULL "
                "AND expires_at <= ?",
                (now,),
            ).rowcount
