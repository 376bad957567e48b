"""Redis backend: shared state and streams for agents in many processes, through redis-py.

URL: ``redis://[:password@]host:6379/0?prefix=surefoot`` (``rediss://`` for TLS).

===================== ========== ========================================================
option                default    meaning
===================== ========== ========================================================
``prefix``            surefoot   every key starts with ``prefix:``; one per deployment/test
``socket_timeout``    5          seconds for one command
``reconnect_timeout`` 30         seconds of bounded back-off before ``StoreUnavailableError``
===================== ========== ========================================================

Redis offers the ``StateStore`` and the ``Stream``. It does not offer the durable ``Journal``
or the idempotency ``KeyStore``: Redis acknowledges writes before they reach the disk, and a
journal that can forget a committed step would repeat an effect. Use ``sqlite:///…`` or
``postgresql://…`` for those.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NoReturn

from ...clock import Clock, ServerClock
from ...errors import ConfigError
from ..url import StorageURL, parse_url
from ._client import OPTIONS, RedisDB

if TYPE_CHECKING:
    from ._state import RedisStateStore
    from ._stream import RedisStream

__all__ = ["OPTIONS", "RedisDB", "RedisStorage"]


class RedisStorage:
    """Hands out the Redis implementations of ``StateStore`` and ``Stream``.

    Args:
        url: a ``redis://`` URL (string or parsed).
        clock: waits between reconnect attempts (``SystemClock`` by default).

    Raises:
        ConfigError: a bad option in the URL.
        MissingExtraError: redis-py is not installed.
        StoreUnavailableError: the server cannot be reached with this URL.
    """

    def __init__(self, url: StorageURL | str, *, clock: Clock | None = None) -> None:
        parsed = parse_url(url) if isinstance(url, str) else url
        self.url = parsed.url
        self.db = RedisDB(parsed, clock=clock)
        self._server_clock: ServerClock | None = None

    def server_clock(self) -> ServerClock:
        """Redis's clock (``TIME``): Store leases are judged on the server's time, not on
        each process's (``surefoot.clock.server_clock_for``)."""
        if self._server_clock is None:

            def read() -> float:
                secs, micros = self.db.call(lambda r: r.time(), write=False, idempotent=True)
                return int(secs) + int(micros) / 1e6

            self._server_clock = ServerClock(read)
        return self._server_clock

    def _unsupported(self, what: str) -> NoReturn:
        raise ConfigError(
            f"Redis does not offer the {what} ({self.db.url!r}): Redis acknowledges writes "
            "before they are on disk, so a crash could forget a committed record. Use "
            "sqlite:///path.db or postgresql://… for it (state and streams can stay on Redis)."
        )

    def keystore(self) -> NoReturn:
        """Not offered on Redis.

        Raises:
            ConfigError: always; use SQLite or PostgreSQL for idempotency records.
        """
        self._unsupported("idempotency KeyStore")

    def journal(self) -> NoReturn:
        """Not offered on Redis.

        Raises:
            ConfigError: always; use SQLite or PostgreSQL for durable runs.
        """
        self._unsupported("durable Journal")

    def statestore(self, namespace: str = "default") -> RedisStateStore:
        from ._state import RedisStateStore

        return RedisStateStore(self.db, namespace)

    def stream(self, name: str) -> RedisStream:
        from ._stream import RedisStream

        return RedisStream(self.db, name)

    def streams(self) -> dict[str, int]:
        """Every stream here: names (sorted) with their kept message counts."""
        from ._stream import redis_streams

        return redis_streams(self.db)

    def close(self) -> None:
        """Close the client's connections."""
        self.db.close()

    def __repr__(self) -> str:
        return f"RedisStorage({self.db.url!r}, prefix={self.db.prefix!r})"
