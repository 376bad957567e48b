"""What both SDK adapters share: lazy imports, the SDK-retries warning, key hiding."""

from __future__ import annotations

import asyncio
import importlib
import sys
import threading
import urllib.parse
import warnings
import weakref
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from ..errors import ConfigError, MissingExtraError
from ..redaction import redact_url  # for reprs and messages: the one URL redaction

__all__ = [
    "PerLoop",
    "Secret",
    "check_base_url",
    "load_sdk",
    "name_url_in_connection_error",
    "redact_url",
    "warn_sdk_retries",
]

_PACKAGE = str(Path(__file__).resolve().parents[1])


class PerLoop:
    """One async SDK client per event loop: an HTTP pool must not outlive the loop it was
    made in (a second ``asyncio.run`` would meet "Event loop is closed").

    Each client is closed when its loop shuts down its async generators (``asyncio.run``
    does as it ends, and the durable executor's loop as the app closes): a suspended
    async generator, made with the client, closes it then. Without that, a client nobody
    ``aclose``-d kept its connections until the garbage collector dropped them ("unclosed
    transport" ResourceWarnings, at any later point of the program).
    """

    def __init__(self, make: Callable[[], Any]) -> None:
        self._make = make
        self._lock = threading.Lock()
        # loop -> (client, the generator that closes it at the loop's shutdown)
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[Any, Any]] = (
            weakref.WeakKeyDictionary()
        )

    def get(self) -> Any:
        """The client of the running loop (made on first use)."""
        loop = asyncio.get_running_loop()
        entry = self._by_loop.get(loop)
        if entry is None:
            with self._lock:
                entry = self._by_loop.get(loop)
                if entry is None:
                    client = self._make()
                    closer = self._close_at_shutdown(loop, client)
                    # Its first step, here: the loop's hooks record it, so the loop's
                    # shutdown_asyncgens will close it (it awaits nothing before its yield).
                    _step(closer.__anext__())
                    entry = self._by_loop[loop] = (client, closer)
        return entry[0]

    def pop(self) -> Any:
        """Forget the running loop's client and return it (None if it has none): the
        caller closes it."""
        with self._lock:
            entry = self._by_loop.pop(asyncio.get_running_loop(), None)
        if entry is None:
            return None
        client, closer = entry
        _step(closer.aclose())  # it finds its entry gone and closes nothing
        return client

    async def _close_at_shutdown(self, loop: asyncio.AbstractEventLoop, client: Any) -> Any:
        try:
            yield
        finally:
            with self._lock:
                entry = self._by_loop.get(loop)
                mine = entry is not None and entry[0] is client
                if mine:
                    del self._by_loop[loop]
            if mine:
                await client.close()


def _step(awaitable: Any) -> None:
    """Run one step of an async generator that does not await in it (its first, or its
    close when its ``finally`` has nothing to await), without a task."""
    try:
        awaitable.send(None)
    except StopIteration:
        return
    raise RuntimeError("an async generator step awaited; it must not")  # pragma: no cover


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


def check_base_url(base_url: str | None, env: str) -> str | None:
    """``base_url`` if an HTTP client can reach it (``http://`` or ``https://`` and a host).

    ``ftp://…``, a typo such as ``htp://…`` or a bare ``127.0.0.1:8089/v1`` would fail
    only at the first call, as a connection error retried as transient.

    Raises:
        ConfigError: names the (redacted) value, where it came from and what to write.
    """
    if base_url is None:
        return None
    try:
        parts = urllib.parse.urlsplit(base_url)
        host = parts.hostname
    except ValueError:
        parts, host = None, None
    if parts is not None and parts.scheme.lower() in ("http", "https") and host:
        return base_url
    raise ConfigError(
        f"base_url (or {env}) must be an http:// or https:// URL with a host, like "
        f"'http://127.0.0.1:8080/v1', got {redact_url(base_url)!r}"
    )


def name_url_in_connection_error(exc: BaseException, base_url: str | None) -> None:
    """Make an SDK's connection error ("Connection error.") name the (redacted) endpoint.

    The exception keeps its type (callers catch ``openai.APIConnectionError``); its message
    gains the URL once, so the error that ends the retries says where it could not connect.
    """
    names = {c.__name__ for c in type(exc).__mro__}
    if "APIConnectionError" not in names or getattr(exc, "_surefoot_named_url", False):
        return
    where = redact_url(base_url) if base_url else "the provider's default endpoint"
    first = exc.args[0] if exc.args else str(exc)
    text = f"{first} (could not reach {where}: check base_url and that the server is up)"
    exc.args = (text, *exc.args[1:])
    if isinstance(getattr(exc, "message", None), str):
        exc.message = text  # type: ignore[attr-defined]
    exc._surefoot_named_url = True  # type: ignore[attr-defined]


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
