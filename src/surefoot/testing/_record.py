"""The fake provider's request log: one JSON line per request, on disk as it arrives."""

from __future__ import annotations

import json
import os
import threading
from dataclasses import asdict
from typing import Any

from ..errors import ConfigError

__all__ = ["RequestLog", "record_of"]

_LAST_MESSAGE_CHARS = 200


def record_of(r: Any) -> dict[str, Any]:
    """The line written for ``r`` (a ``Received``): every field but the messages and the
    headers, plus the caller's own ``x-`` headers (not the SDK's ``x-stainless-*``) and the
    last message's text (first 200 characters), enough to tell the steps of a run apart."""
    out = asdict(r)
    del out["messages"], out["headers"]
    out["headers"] = {
        k: v for k, v in r.headers.items() if k.startswith("x-") and not k.startswith("x-stainless")
    }
    last = r.messages[-1] if r.messages else None
    content = last.get("content") if isinstance(last, dict) else None
    out["last_message"] = content[:_LAST_MESSAGE_CHARS] if isinstance(content, str) else None
    return out


class RequestLog:
    """Appends one JSON line per request to ``path`` and flushes it before the reply goes out,
    so a line is on disk for every reply a client saw, even if the server is SIGKILLed.

    Raises:
        ConfigError: the file cannot be opened for appending (names the path).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        try:
            self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - held open
        except OSError as exc:
            raise ConfigError(
                f"cannot record requests to {self.path!r}: {exc.strerror or exc}; give a "
                "writable file path"
            ) from None
        self._lock = threading.Lock()

    def write(self, r: Any) -> None:
        """Append ``r``'s line and flush it."""
        line = json.dumps(record_of(r), sort_keys=True, default=str) + "\n"
        with self._lock:
            if not self._file.closed:
                self._file.write(line)
                self._file.flush()

    def close(self) -> None:
        """Close the file."""
        with self._lock:
            self._file.close()
