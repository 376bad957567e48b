"""``App(url, create=False)``: open only a journal that exists, never make a new empty one.

A worker pointed at a mistyped path would otherwise create a fresh journal there and wait
forever for runs that are in another file. With ``create=False`` the app refuses, before
anything is written, a SQLite file that does not exist or holds no durable journal, and a
PostgreSQL schema without one. Looking is storage's ``journal_missing`` (reads only).

Reading never creates a journal, whatever ``create`` says: ``App(url).list_runs()``,
``show``, ``cancel`` … on a URL that holds none are refused by :func:`check_readable` with
one line, and no file, schema or table is made (:class:`ReadingHost` is the app as run
management sees it).
"""

from __future__ import annotations

from typing import Protocol

from .. import storage
from ..clock import Clock
from ..errors import ConfigError
from ..storage.journal import Journal
from ._manage import OperationsHost
from ._registry import Registry
from ._runner import Executor
from ._tokens import TokenHub

__all__ = ["ReadingHost", "check_exists", "check_readable"]

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


def _always_new(url: str) -> bool:
    """``sqlite://`` and ``sqlite:///:memory:``: a journal that exists only for this app."""
    if not url.startswith("sqlite:"):
        return False
    if url.split("?", 1)[0].rstrip("/") == "sqlite:":
        return True
    path = storage.parse_url(url).path
    return not path or path == ":memory:"


def check_readable(url: str) -> None:
    """Before a read opens the journal: refuse a URL that holds none; nothing is created.

    Raises:
        ConfigError: a SQLite file that does not exist or holds no journal, a PostgreSQL
            schema without one.
        StoreUnavailableError: the PostgreSQL server cannot be reached with this URL.
    """
    if _always_new(url):
        return
    why = storage.journal_missing(url)
    if why is not None:
        raise ConfigError(
            f"{storage.redact(url)!r} holds no durable journal: {why}. Nothing was created "
            "(reading never creates a journal); check the URL, or start a run there first"
        )


class OpeningHost(OperationsHost, Protocol):
    """An app that can open its journal for reading only (``App.existing_journal``)."""

    def existing_journal(self) -> Journal: ...


class ReadingHost:
    """An app as run management (``list_runs``, ``show``, ``cancel`` …) sees it: the same
    app's settings, read live, and its journal opened only if it exists (see
    :func:`check_readable`)."""

    def __init__(self, app: OpeningHost) -> None:
        self._app = app

    @property
    def journal(self) -> Journal:
        return self._app.existing_journal()

    @property
    def url(self) -> str:
        return self._app.url

    @property
    def clock(self) -> Clock:
        return self._app.clock

    @property
    def poll(self) -> float:
        return self._app.poll

    @property
    def executor(self) -> Executor:
        return self._app.executor

    @property
    def registry(self) -> Registry:
        return self._app.registry

    @property
    def tokens(self) -> TokenHub:
        return self._app.tokens

    @property
    def worker_id(self) -> str:
        return self._app.worker_id

    @property
    def lease(self) -> float:
        return self._app.lease
