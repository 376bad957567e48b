"""No durable journal in memory: a journal that dies with the process cannot resume a run."""

from __future__ import annotations

from typing import NoReturn

from ...errors import ConfigError

__all__ = ["refuse_journal"]


def refuse_journal() -> NoReturn:
    """Refuse: durable runs need a journal that outlives the process.

    Raises:
        ConfigError: always, saying which URL to use instead.
    """
    raise ConfigError(
        "memory:// cannot hold a durable journal: it dies with the process, so no run "
        "could ever resume. Use 'sqlite://' (a fresh temporary file) in tests, or "
        "'sqlite:///runs.db'."
    )
