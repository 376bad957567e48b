"""Look inside a SQLite file without changing it: which tables it holds."""

from __future__ import annotations

import os
import sqlite3
import urllib.parse

from ...errors import ConfigError

__all__ = ["tables_of"]


def tables_of(path: str) -> set[str]:
    """The names of the tables in SQLite file ``path``, read through a read-only connection.

    Nothing is created or migrated: a command that only looks can tell a journal from a
    statebus file or a ledger before it opens anything for writing.

    Raises:
        ConfigError: ``path`` is not a SQLite database (naming it).
    """
    uri = f"file:{urllib.parse.quote(os.path.abspath(path))}?mode=ro"
    try:
        con = sqlite3.connect(uri, uri=True)
        try:
            rows = con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        raise ConfigError(f"{path!r} is not a SQLite database ({exc})") from None
    return {r[0] for r in rows}
