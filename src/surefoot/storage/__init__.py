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

SQLite query options: ``?synchronous=FULL|NORMAL`` (default FULL), ``&busy_timeout=5000`` (ms).
Drivers are imported lazily; a missing one names the extra to install.
"""

from __future__ import annotations

from .base import Storage
from .url import StorageURL, parse_url, redact

__all__ = ["Storage", "StorageURL", "open", "parse_url", "redact", "sqlite_tables"]


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
