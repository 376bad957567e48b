"""SQLite KeyStore: one table; a claim is a single insert-if-absent statement.

A running record's lease is a wall-clock time written by its owner's process, and SQLite
has no server clock: a process whose clock runs ahead would see a live owner's lease as
expired. So an owner holds a liveness lock file (``._liveness``) while it holds running
keys here, and a running record whose lease expired by the claimer's clock is taken over

* at once if its owner's lock is free (its process died) or it has none (the wall clock
  decides, as before);
* if its owner's process is alive (maybe paused), only once this process has seen the
  record unchanged (owner, ``created_at``, ``lease_until``) for the owner's whole lease
  (``lease_until - created_at``, both on the owner's clock) on its own monotonic clock.

The takeover is decided inside the claim's write transaction (the record cannot change
meanwhile); a claim of an absent or expired-done key is still the one statement.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from ..keys import KeyRecord
from ..sql.observed import Sightings
from ._db import SQLiteDB
from ._liveness import FileLiveness

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
       AND surefoot_keys.fingerprint = excluded.fingerprint AND ?)
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
        self._locks = FileLiveness(db.path) if FileLiveness.available(db.path) else None
        if self._locks is not None:  # at exit: remove the files of keys still held
            weakref.finalize(self, self._locks.close)
        self._sightings = Sightings()
        self._held: dict[str, int] = {}  # owner -> running keys it claimed here
        self._mutex = threading.Lock()
        db.migrate("keys", MIGRATIONS)

    def claim(
        self, key: str, fingerprint: str, owner: str, now: float, lease_until: float
    ) -> tuple[bool, KeyRecord]:
        with self.db.write() as c:
            params = (key, fingerprint, owner, now, lease_until)
            got = c.execute(_CLAIM, (*params, self._locks is None)).fetchone()
            if got is None and self._locks is not None:
                cur = c.execute(f"SELECT {_COLS} FROM surefoot_keys WHERE key = ?", (key,))
                if self._may_take(_row(cur.fetchone()), fingerprint, now):
                    got = c.execute(_CLAIM, (*params, True)).fetchone()
            if got is not None:
                self._sightings.forget(key)
                self._hold(owner)  # before the commit: no one sees the record without it
                return True, _row(got)
            cur = c.execute(f"SELECT {_COLS} FROM surefoot_keys WHERE key = ?", (key,))
            return False, _row(cur.fetchone())

    def _may_take(self, rec: KeyRecord, fingerprint: str, now: float) -> bool:
        """Whether running ``rec``, whose lease expired by the claimer's clock, may be taken
        over now (module docs): its owner is dead or unknown, or was seen unchanged here
        for its whole lease."""
        if rec.state != "running" or rec.lease_until > now or rec.fingerprint != fingerprint:
            return False  # not a takeover the claim makes
        assert self._locks is not None
        if rec.owner not in self._locks.alive({rec.owner}):
            return True
        seen = self._sightings.unchanged_for(rec.key, (rec.owner, rec.created_at, rec.lease_until))
        return seen >= rec.lease_until - rec.created_at

    def _hold(self, owner: str) -> None:
        """Hold ``owner``'s liveness lock while it holds running keys claimed here."""
        if self._locks is None:
            return
        with self._mutex:
            n = self._held.get(owner, 0)
            if n == 0 and not self._locks.hold(owner):
                return  # cannot be held: its keys are judged by the wall clock
            self._held[owner] = n + 1

    def _let_go(self, owner: str) -> None:
        """One running key of ``owner`` claimed here ended: its lock goes with the last."""
        if self._locks is None:
            return
        with self._mutex:
            n = self._held.get(owner, 0)
            if n <= 1:
                self._held.pop(owner, None)
                if n == 1:
                    self._locks.let_go(owner)
            else:
                self._held[owner] = n - 1

    def complete(self, key: str, owner: str, result: str, expires_at: float | None) -> bool:
        with self.db.write() as c:
            n = c.execute(
                "UPDATE surefoot_keys SET state = 'done', result = ?, expires_at = ? "
                "WHERE key = ? AND owner = ? AND state = 'running'",
                (result, expires_at, key, owner),
            ).rowcount
        self._let_go(owner)  # after the commit: the record was never running without it
        return bool(n)

    def release(self, key: str, owner: str) -> bool:
        with self.db.write() as c:
            n = c.execute(
                "DELETE FROM surefoot_keys WHERE key = ? AND owner = ? AND state = 'running'",
                (key, owner),
            ).rowcount
        self._let_go(owner)
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
