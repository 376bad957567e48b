"""Whether a PostgreSQL schema holds a durable journal, found with reads only (no schema or
table is created, no migration runs)."""

from __future__ import annotations

from ..url import StorageURL, redact
from ._db import PostgresDB

__all__ = ["postgres_journal_missing"]


def postgres_journal_missing(parsed: StorageURL) -> str | None:
    """Why the URL's schema holds no journal yet, or None if it does.

    Raises:
        StoreUnavailableError: the server cannot be reached with this URL.
    """
    db = PostgresDB(parsed)
    try:
        schema, where = db.schema, redact(parsed.url)
        found = db.execute(
            "SELECT 1 FROM information_schema.tables WHERE table_schema = %s "
            "AND table_name = 'surefoot_schema'",
            (schema,),
            write=False,
        )
        if not found:
            return f"schema {schema!r} at {where!r} has no surefoot tables"
        row = db.execute(
            f"SELECT version FROM {schema}.surefoot_schema WHERE component = 'durable'",
            write=False,
        )
        return None if row else f"schema {schema!r} at {where!r} has no journal"
    finally:
        db.close()
