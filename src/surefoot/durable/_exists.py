"""``App(url, create=False)``: open only a journal that exists, never make a new empty one.

A worker pointed at a mistyped path would otherwise create a fresh journal there and wait
forever for runs that are in another file. With ``create=False`` the app refuses, before
anything is written, a SQLite file that does not exist or holds no durable journal, and a
PostgreSQL schema without one. Looking is storage's ``journal_missing`` (reads only).
"""

from __future__ import annotations

from .. import storage
from ..errors import ConfigError

__all__ = ["check_exists"]

_HINT = (
    "with create=False the app opens only an existing journal; check the URL, or create "
    "the journal on purpose (App(url, create=True), `surefoot worker --create`)"
)


def _no_journal(url: str, what: str) -> ConfigError:
    return ConfigError(f"{storage.redact(url)!r} holds no durable journal: {what}; {_HINT}")


def check_exists(url: str) -> None:
    """Before opening: refuse a URL that names no existing durable journal.

    Raises:
        ConfigError: ``sqlite://`` (always a new file), a missing SQLite file, a file or a
            PostgreSQL schema without the durable journal. Nothing is created or changed.
        StoreUnavailableError: the PostgreSQL server cannot be reached with this URL.
    """
    if url.startswith("sqlite:"):
        if url.split("?", 1)[0].rstrip("/") == "sqlite:":  # parse_url would make a temp file
            raise _no_journal(url, "this URL always makes a new, empty journal")
        path = storage.parse_url(url).path
        if not path or path == ":memory:":
            raise _no_journal(url, "this URL always makes a new, empty journal")
    why = storage.journal_missing(url)
    if why is not None:
        raise _no_journal(url, why)
