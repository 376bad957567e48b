"""PostgreSQL backend: many workers on many machines, through psycopg 3 and a pool.

URL: ``postgresql://user:password@host:5432/dbname?schema=surefoot&pool_min=1&pool_max=10``.

==================== ========== ==========================================================
option               default    meaning
==================== ========== ==========================================================
``schema``           surefoot   schema holding surefoot's tables (created on first use)
``pool_min``         1          connections each process keeps open
``pool_max``         10         most connections each process opens
``connect_timeout``  5          seconds for one connection attempt
``reconnect_timeout`` 30        seconds of bounded back-off before ``StoreUnavailableError``
==================== ========== ==========================================================

Every other query option (``sslmode``, ``application_name``, …) is passed to libpq.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...clock import Clock, ServerClock
from ..url import StorageURL, parse_url
from ._db import OPTIONS, Listener, PostgresDB

if TYPE_CHECKING:
    from ._journal import PostgresJournal
    from ._keys import PostgresKeyStore
    from ._state import PostgresStateStore
    from ._stream import PostgresStream

__all__ = ["OPTIONS", "Listener", "PostgresDB", "PostgresStorage"]


class PostgresStorage:
    """Hands out the PostgreSQL implementations of the storage protocols for one database.

    Args:
        url: a ``postgresql://`` URL (string or parsed).
        clock: waits between reconnect attempts (``SystemClock`` by default).

    Raises:
        ConfigError: a bad option in the URL.
        MissingExtraError: psycopg is not installed.
        StoreUnavailableError: the server cannot be reached with this URL.
    """

    def __init__(self, url: StorageURL | str, *, clock: Clock | None = None) -> None:
        parsed = parse_url(url) if isinstance(url, str) else url
        self.url = parsed.url
        self.db = PostgresDB(parsed, clock=clock)
        self._server_clock: ServerClock | None = None

    def server_clock(self) -> ServerClock:
        """PostgreSQL's clock (``clock_timestamp()``), shared by this storage's journal,
        idempotency keys and Store: leases are judged on the database's time, not on each
        process's (``surefoot.clock.server_clock_for``)."""
        if self._server_clock is None:
            self._server_clock = ServerClock(self.db.server_time)
        return self._server_clock

    def keystore(self) -> PostgresKeyStore:
        from ._keys import PostgresKeyStore

        return PostgresKeyStore(self.db)

    def statestore(self, namespace: str = "default") -> PostgresStateStore:
        from ._state import PostgresStateStore

        return PostgresStateStore(self.db, namespace)

    def stream(self, name: str) -> PostgresStream:
        from ._stream import PostgresStream

        return PostgresStream(self.db, name)

    def streams(self) -> dict[str, int]:
        """Every stream here: names (sorted) with their kept message counts."""
        from ._stream import postgres_streams

        return postgres_streams(self.db)

    def journal(self) -> PostgresJournal:
        from ._journal import PostgresJournal

        return PostgresJournal(self.db)

    def close(self) -> None:
        """Close the connection pool."""
        self.db.close()

    def __repr__(self) -> str:
        return f"PostgresStorage({self.db.url!r}, schema={self.db.schema!r})"
