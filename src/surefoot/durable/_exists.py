"""``App(url, create=False)``: open only a journal that exists, never make a new empty one.

A worker pointed at a mistyped path would otherwise create a fresh journal there and wait
forever for runs that are in another file. With ``create=False`` the app refuses, before
anything is written, a SQLite file that does not exist or holds no durable journal, and a
PostgreSQL schema without one.
"""

from __future__ import annotations

import os
import sqlite3
from typing import Any

from .. import storage
from ..errors import ConfigError

__all__ = ["check_opened", "check_sqlite"]

_HINT = (
    "with create=False the app opens only an existing journal; check the URL, or create "
    "the journal on purpose (App(url, create=True), `surefoot worker --create`)"
)


def _no_journal(url: str, what: str) -> ConfigError:
    return ConfigError(f"no durable journal at {storage.redact(url)!r}: {what}; {_HINT}")


def check_sqlite(url: str) -> None:
    """Before opening: refuse a SQLite URL whose file is missing or holds no journal.

    Raises:
        ConfigError: ``sqlite://`` (always a new file), a missing file, or a file without
            the durable journal's schema. The file system is left as it was.
    """
    if not url.startswith("sqlite:"):
        return
    if url.split("?", 1)[0].rstrip("/") == "sqlite:":  # parse_url would make the temp file
        raise _no_journal(url, "this URL always makes a new, empty journal")
    path = storage.parse_url(url).path
    if not path or path == ":memory:":
        raise _no_journal(url, "this URL always makes a new, empty journal")
    if not os.path.isfile(path):
        raise _no_journal(url, f"the file {path!r} does not exist")
    try:
        # Read-only. A file with no -wal beside it is read as immutable, so looking makes
        # no -wal/-shm files; one with a -wal (a journal in use) is read with it, since its
        # newest pages may be there.
        live = os.path.exists(path + "-wal")
        mode = "ro" if live else "ro&immutable=1"
        conn = sqlite3.connect(f"file:{path}?mode={mode}", uri=True)
    except sqlite3.Error as exc:
        raise _no_journal(url, f"{path!r} cannot be opened ({exc})") from None
    try:
        has_meta = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name='surefoot_schema'"
        ).fetchone()
        row = (
            conn.execute(_VERSION.format(meta="surefoot_schema"), ("durable",)).fetchone()
            if has_meta
            else None
        )
    except sqlite3.Error as exc:
        raise _no_journal(url, f"{path!r} is not a SQLite database ({exc})") from None
    finally:
        conn.close()
    if not row:
        raise _no_journal(url, f"{path!r} holds no durable journal (an empty or other file)")


def check_opened(url: str, st: Any) -> None:
    """After opening, before the journal's tables are created: refuse a PostgreSQL schema
    without the durable journal.

    Raises:
        ConfigError: the schema holds no durable journal (nothing was created).
    """
    db = getattr(st, "db", None)
    if storage.parse_url(url).scheme != "postgresql" or db is None:
        return
    schema = db.schema
    has_meta = db.execute(
        "SELECT 1 FROM information_schema.tables WHERE table_schema = %s "
        "AND table_name = 'surefoot_schema'",
        (schema,),
        write=False,
    )
    rows = (
        db.execute(
            _VERSION.format(meta=f"{schema}.surefoot_schema").replace("?", "%s"),
            ("durable",),
            write=False,
        )
        if has_meta
        else []
    )
    if not rows:
        raise _no_journal(url, f"the schema {schema!r} holds no durable journal")


_VERSION = "SELECT version FROM {meta} WHERE component = ?"
