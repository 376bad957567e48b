"""Storage backends behind a few small protocols, chosen by URL.

==========================  ===========================================================
URL                         backend
==========================  ===========================================================
``memory://``               this process only; ``memory://name`` is shared within it
``sqlite:///runs.db``       embedded default (relative path); ``sqlite:////abs/runs.db``
``sqlite://``               a fresh temporary file
``postgresql://…``          PostgreSQL through psycopg 3 (extra ``surefoot[postgres]``)
``redis://…``               Redis through redis-py (extra ``surefoot[redis]``)
==========================  ===========================================================

SQLite query options: ``?synchronous=FULL|NORMAL`` (default FULL), ``&busy_timeout=5000`` (ms),
``&check=off|quick|full`` (``PRAGMA quick_check`` / ``integrity_check`` at open; default off),
``&witness=off|on|accept`` (a synced count of the file's commits in ``<db>-witness``, beside
it, checked at open: lost commits refused; needs ``synchronous=FULL``; default off).
Every backend: ``?max_value_bytes=N``, the largest value, message or step result accepted
(default 1 MiB, 0: no limit); a larger one raises ``ValueTooLargeError``.
Drivers are imported lazily; a missing one names the extra to install.
"""

from __future__ import annotations

from .backend import Storage
from .url import StorageURL, parse_url, redact

__all__ = [
    "Storage",
    "StorageURL",
    "journal_missing",
    "open",
    "parse_url",
    "redact",
    "sqlite_tables",
]


def sqlite_tables(path: str) -> set[str]:
    """The tables of SQLite file ``path``, read without creating or changing anything.

    Raises:
        ConfigError: ``path`` is not a SQLite database.
    """
    from .sqlite import tables_of

    return tables_of(path)


def open(url: str) -> Storage:  # shadows the builtin on purpose: storage.open(url)
    """Open the storage named by ``url`` and return it.

    Raises:
        ConfigError: the URL is malformed or names an unknown scheme.
        MissingExtraError: the backend's driver is not installed.
        StoreUnavailableError / SchemaVersionError: the database cannot be used.
    """
    parsed = parse_url(url)
    if parsed.scheme == "memory":
        from .memory import MemoryStorage

        return MemoryStorage.named(parsed)
    if parsed.scheme == "sqlite":
        from .sqlite import SQLiteStorage

        return SQLiteStorage(parsed)
    if parsed.scheme == "postgresql":
        from .postgres import PostgresStorage

        return PostgresStorage(parsed)
    from .redis import RedisStorage

    return RedisStorage(parsed)


def journal_missing(url: str) -> str | None:
    """Why ``url`` holds no durable journal yet, or None if it does; creates nothing.

    SQLite: the file must exist and record surefoot's ``durable`` schema; the file is only
    read (byte for byte unchanged, no ``-wal``/``-shm`` left beside it). PostgreSQL: the
    URL's schema must hold surefoot's tables with the ``durable`` component (reads only).
    Other URLs, and files that are not databases at all, are left to the journal's own
    checks (None).

    Raises:
        ConfigError: the URL is malformed.
        StoreUnavailableError: the PostgreSQL server cannot be reached with this URL.
    """
    parsed = parse_url(url)
    if parsed.scheme == "sqlite":
        from .sqlite._probe import sqlite_journal_missing

        return sqlite_journal_missing(parsed.path)
    if parsed.scheme == "postgresql":
        from .postgres._probe import postgres_journal_missing

        return postgres_journal_missing(parsed)
    return None
