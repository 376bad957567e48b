"""Whether a SQLite file holds a durable journal, found without creating or changing anything.

A file in WAL mode whose last connection closed has no ``-wal``/``-shm`` beside it, and the
main file holds every commit: it is read as ``immutable`` (SQLite then takes no locks and
creates no side files). When a ``-wal`` or ``-shm`` is there (a live writer), it is read
``mode=ro`` through them, so the newest commits are seen: the file and its ``-wal`` are
left as they were, and no file is added (the ``-shm``, shared memory of the connections,
gets the read mark every reader sets).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

__all__ = ["sqlite_journal_missing"]


def sqlite_journal_missing(path_text: str) -> str | None:
    """Why the file at ``path_text`` holds no journal yet, or None if it does (or if it is
    not a database at all: opening the journal says that more clearly)."""
    path = Path(path_text)
    shown = repr(str(path))
    if not path.exists():
        return f"the SQLite file {shown} does not exist"
    if path.is_dir():
        return None  # the journal's open says "is a directory"
    live = any(Path(f"{path}{s}").exists() for s in ("-wal", "-shm"))
    mode = "mode=ro" if live else "immutable=1"
    try:
        con = sqlite3.connect(f"{path.resolve().as_uri()}?{mode}", uri=True)
    except sqlite3.Error:
        return None
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "surefoot_schema" not in tables:
            names = ", ".join(sorted(tables)[:5])
            listed = f" (its tables: {names})" if tables else " (it is empty)"
            return f"the SQLite file {shown} has no surefoot journal in it{listed}"
        row = con.execute("SELECT version FROM surefoot_schema WHERE component = 'durable'")
        found = row.fetchone()
    except sqlite3.DatabaseError:
        return None  # not a database: the journal's open says so clearly
    finally:
        con.close()
    return None if found else f"the SQLite file {shown} has surefoot data but no journal"
