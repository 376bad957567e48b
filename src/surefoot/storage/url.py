"""Parse and redact storage URLs (``redact`` is ``surefoot.redaction.redact_url``)."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from urllib.parse import parse_qsl

from ..errors import ConfigError
from ..redaction import redact_url as redact

__all__ = ["StorageURL", "parse_url", "redact"]

SCHEMES = {
    "memory": "memory",
    "sqlite": "sqlite",
    "postgresql": "postgresql",
    "postgres": "postgresql",
    "redis": "redis",
    "rediss": "redis",
}


@dataclass(frozen=True, slots=True)
class StorageURL:
    """A parsed storage URL.

    Attributes:
        url: the URL as given.
        scheme: the backend: ``memory``, ``sqlite``, ``postgresql`` or ``redis``.
        path: the SQLite file path, or the memory store's name.
        options: query parameters.
    """

    url: str
    scheme: str
    path: str = ""
    options: dict[str, str] = field(default_factory=dict)

    @property
    def safe(self) -> str:
        """The URL without its password, for messages and logs."""
        return redact(self.url)


def parse_url(url: str) -> StorageURL:
    """Parse a storage URL.

    Raises:
        ConfigError: not a string, no scheme, or an unknown scheme.
    """
    if not isinstance(url, str) or "://" not in url:
        raise ConfigError(
            f"storage URL must look like 'sqlite:///runs.db', 'memory://', "
            f"'postgresql://host/db' or 'redis://host', got {url!r}"
        )
    raw_scheme, rest = url.split("://", 1)
    scheme = SCHEMES.get(raw_scheme.lower())
    if scheme is None:
        raise ConfigError(
            f"unknown storage scheme {raw_scheme!r} in {redact(url)!r}; use one of "
            "memory://, sqlite:///path.db, postgresql://…, redis://…"
        )
    path, _, query = rest.partition("?")
    options = dict(parse_qsl(query, keep_blank_values=True))
    if scheme == "sqlite":
        if path in ("", "/"):
            fd, tmp = tempfile.mkstemp(prefix="surefoot-", suffix=".db")
            os.close(fd)
            path = tmp
        elif path.startswith("/"):
            path = path[1:]  # sqlite:///rel.db -> rel.db ; sqlite:////abs.db -> /abs.db
        else:
            raise ConfigError(
                f"SQLite URL {url!r} needs three slashes: 'sqlite:///relative.db' or "
                "'sqlite:////absolute/path.db'"
            )
        path = os.path.expanduser(path)
    elif scheme == "memory":
        path = path.strip("/")
    return StorageURL(url=url, scheme=scheme, path=path, options=options)
