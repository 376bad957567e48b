"""The checks every backend applies alike: value sizes, seconds, keys and names.

Each storage protocol refuses the same bad input the same way on memory, SQLite,
PostgreSQL and Redis; the checks live here once.
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import ConfigError, ValueTooLargeError

__all__ = [
    "DEFAULT_MAX_VALUE_BYTES",
    "check_seconds",
    "check_size",
    "check_text",
    "value_limit",
]

DEFAULT_MAX_VALUE_BYTES = 1 << 20
"""The largest value a store accepts unless its URL says ``?max_value_bytes=N``: 1 MiB.

Agent state is text and small records (a report, findings, a plan: kilobytes, a long
transcript a few hundred); every write of a key rewrites its whole value, and every reader
fetches it, so a value past a megabyte makes each write and read cost milliseconds of I/O
and network and usually means a blob that belongs in a file or object store. The peers
draw the line in the same place: etcd refuses requests over 1.5 MiB, DynamoDB items over
400 KB, Temporal payloads over 2 MB."""


def value_limit(url: str, options: dict[str, str]) -> int:
    """The ``max_value_bytes`` option of a storage URL: bytes, 0 for no limit.

    Raises:
        ConfigError: not a whole number >= 0.
    """
    raw = options.get("max_value_bytes")
    if raw is None:
        return DEFAULT_MAX_VALUE_BYTES
    try:
        limit = int(raw)
    except ValueError:
        limit = -1
    if limit < 0:
        raise ConfigError(
            f"max_value_bytes must be a whole number of bytes >= 0 (0: no limit), got "
            f"{raw!r} in {url!r}; the default is {DEFAULT_MAX_VALUE_BYTES} (1 MiB)"
        )
    return limit


def check_size(url: str, what: str, text: str | None, limit: int) -> None:
    """Refuse ``text`` (codec JSON) when its UTF-8 size is over ``limit`` (0: no limit).

    Raises:
        ValueTooLargeError: naming ``what``, the size, the limit and how to raise it.
    """
    if text is None or not limit or len(text) * 4 <= limit:  # no character is over 4 bytes
        return
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise ValueTooLargeError(url, what, size, limit)


def check_seconds(what: str, value: Any, *, positive: bool = False) -> float:
    """A finite number of seconds >= 0 (> 0 with ``positive``), or a ConfigError naming it."""
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (positive and value == 0):
        bound = "> 0" if positive else ">= 0"
        raise ConfigError(f"{what} must be a finite number of seconds {bound}, got {value!r}")
    return float(value)


def check_text(what: str, value: str) -> str:
    """Refuse a key, id or name some backend cannot store, the same way on every backend.

    PostgreSQL text cannot hold NUL, and no backend but memory can encode a lone surrogate
    as UTF-8; checking here keeps memory, SQLite, PostgreSQL and Redis in agreement.

    Raises:
        ConfigError: naming what it is, the value and the fix.
    """
    if "\x00" in value:
        raise ConfigError(f"{what} {value!r} contains a NUL character; remove it")
    if value.isascii():  # no surrogate in ASCII text: nothing to encode to find out
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(
            f"{what} {value!r} contains a lone surrogate (not valid UTF-8); pass real text"
        ) from None
    return value
