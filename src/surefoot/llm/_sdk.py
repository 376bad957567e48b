"""What both SDK adapters share: lazy imports, the SDK-retries warning, key hiding."""

from __future__ import annotations

import importlib
import sys
import urllib.parse
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

from ..errors import MissingExtraError

__all__ = ["Secret", "load_sdk", "redact_url", "warn_sdk_retries"]

_PACKAGE = str(Path(__file__).resolve().parents[1])


class Secret:
    """An API key that shows as ``***`` in reprs, so printing a client's state leaks nothing."""

    __slots__ = ("_value",)

    def __init__(self, value: str | None) -> None:
        self._value = value

    def get(self) -> str | None:
        """The key itself (only for the SDK constructor)."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')" if self._value else "Secret(None)"

    __str__ = __repr__


def redact_url(url: str) -> str:
    """``url`` without a password or token in its user part (for reprs and messages)."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urllib.parse.urlunsplit(parts._replace(netloc=f"***@{host}"))


def load_sdk(name: str) -> ModuleType:
    """Import ``openai`` or ``anthropic``, or say which extra to install."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise MissingExtraError(name, f"the {name} adapter (surefoot.llm)") from exc


def _caller_stacklevel() -> int:
    """The stacklevel of the first frame outside surefoot (for warnings.warn from here)."""
    level = 1
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level


def warn_sdk_retries(client: Any, provider: str) -> None:
    """Warn when a client passed in still retries by itself (attempts would multiply)."""
    n = getattr(client, "max_retries", 0)
    if isinstance(n, int) and n > 0:
        warnings.warn(
            f"the {provider} client passed in has max_retries={n}: the SDK retries inside "
            f"every surefoot attempt, so one call can send up to (max_retries + 1) x "
            f"max_attempts requests and the SDK's waits ignore the deadline and budget. "
            f"Build it with max_retries=0 (or use client.with_options(max_retries=0)).",
            stacklevel=_caller_stacklevel(),
        )
