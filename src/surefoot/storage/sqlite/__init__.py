"""The embedded default backend: one SQLite file, many threads and processes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...errors import ConfigError
from ..checks import value_limit
from ..url import StorageURL, parse_url
from ._db import WAL_PRESIZE, SQLiteDB
from ._inspect import tables_of

if TYPE_CHECKING:
    from ._journal import SQLiteJournal
    from ._keys import SQLiteKeyStore
    from ._state import SQLiteStateStore
    from ._stream import SQLiteStream

__all__ = ["SQLiteDB", "SQLiteStorage", "tables_of"]


class SQLiteStorage:
    """Hands out the SQLite implementations of the storage protocols for one file."""

    def __init__(self, url: StorageURL | str) -> None:
        parsed = parse_url(url) if isinstance(url, str) else url
        self.url = parsed.url
        opts = parsed.options
        try:
            busy = int(opts.get("busy_timeout", "10000"))
        except ValueError:
            raise ConfigError(
                f"busy_timeout must be whole milliseconds, got {opts['busy_timeout']!r}"
            ) from None
        try:
            presize = int(opts.get("wal_presize", str(WAL_PRESIZE)))
        except ValueError:
            raise ConfigError(
                f"wal_presize must be whole frames (0: off), got {opts['wal_presize']!r}"
            ) from None
        self.db = SQLiteDB(
            parsed.path,
            synchronous=opts.get("synchronous", "FULL"),
            busy_timeout_ms=busy,
            max_value_bytes=value_limit(parsed.safe, opts),
            wal_presize=presize,
            check=opts.get("check", "off"),
            witness=opts.get("witness", "off"),
        )
        self.db.conn()  # fail now, clearly, if the file is unusable

    def keystore(self) -> SQLiteKeyStore:
        from ._keys import SQLiteKeyStore

        return SQLiteKeyStore(self.db)

    def statestore(self, namespace: str = "default") -> SQLiteStateStore:
        from ._state import SQLiteStateStore

        return SQLiteStateStore(self.db, namespace)

    def stream(self, name: str) -> SQLiteStream:
        from ._stream import SQLiteStream

        return SQLiteStream(self.db, name)

    def streams(self) -> dict[str, int]:
        """Every stream here: names (sorted) with their kept message counts."""
        from ._stream import sqlite_streams

        return sqlite_streams(self.db)

    def journal(self) -> SQLiteJournal:
        from ._journal import SQLiteJournal

        return SQLiteJournal(self.db)

    def close(self) -> None:
        self.db.close()

    def __repr__(self) -> str:
        return f"SQLiteStorage({self.db.path!r})"
