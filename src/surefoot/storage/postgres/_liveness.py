"""Process liveness of PostgreSQL workers: a session-level advisory lock per worker id.

A serving worker opens one dedicated connection (outside the pool) for the life of its app
and takes ``pg_try_advisory_lock`` on a key derived from the schema and its worker id. The
server releases a session's advisory locks when the session ends: when the worker's process
dies its socket closes and the server ends the session at once. Another worker that gets
``pg_try_advisory_xact_lock_shared`` on the key (released with its statement) knows the
holder's session is gone and may take its runs over without waiting out the lease.

Detected: the process died (SIGKILL, crash, exit), or its liveness connection was lost
(then the worker's runs are taken over and its next writes are refused by the epoch). Not
detected: a hung or stopped process (its session stays), a machine that vanished without
closing its sockets (the server keeps the session until TCP keepalive gives up): the lease
handles both.
"""

from __future__ import annotations

from typing import Any

from ._db import PostgresDB

__all__ = ["AdvisoryLiveness"]

_KEY = "hashtextextended(%s::TEXT || %s::TEXT, 0)"


class AdvisoryLiveness:
    """``hold`` this worker's advisory lock on its own connection; ``dead`` tells whose
    holders' sessions ended."""

    kind = "advisory"

    def __init__(self, db: PostgresDB) -> None:
        self.db = db
        self.prefix = f"surefoot.durable:{db.schema}:"
        self._conn: Any = None
        self._held: set[str] = set()

    def hold(self, worker_id: str) -> bool:
        """Hold this worker id's lock (idempotent; re-taken after a lost connection)."""
        psycopg = self.db.psycopg
        try:
            if self._conn is not None and not self._conn.closed:
                self._conn.execute("SELECT 1")  # still ours: the session (and lock) lives
                if worker_id in self._held:
                    return True
            else:
                self.close()
                self._conn = psycopg.connect(
                    self.db.conninfo, autocommit=True, connect_timeout=self.db.connect_timeout
                )
            for _ in range(20):  # a checker's shared lock may be held for an instant
                row = self._conn.execute(
                    f"SELECT pg_try_advisory_lock({_KEY})", (self.prefix, worker_id)
                ).fetchone()
                if row and row[0]:
                    self._held.add(worker_id)
                    return True
            return False
        except psycopg.Error:
            self.close()
            return False

    def dead(self, owners: set[str]) -> set[str]:
        """Those of ``owners`` whose advisory lock no session holds (one statement)."""
        if not owners:
            return set()
        rows = self.db.execute(
            "SELECT o FROM unnest(%s::TEXT[]) AS o "
            "WHERE pg_try_advisory_xact_lock_shared(hashtextextended(%s::TEXT || o, 0))",
            (sorted(owners), self.prefix),
            write=False,
            idempotent=True,
        )
        return {str(r[0]) for r in rows} - self._held

    def sweep(self, running: Any, only: set[str] | None = None) -> list[str]:
        """Nothing to sweep: the server drops a dead session's lock with the session."""
        return []

    def close(self) -> None:
        """Close the connection: the server releases the lock with the session."""
        conn, self._conn = self._conn, None
        self._held.clear()
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass
