"""In-process storage: fast, for tests and single-process use. ``memory://name`` is shared
by every ``open`` of the same name in this process; ``memory://`` is always fresh."""

from __future__ import annotations

import threading
from typing import Any, ClassVar

from ..url import StorageURL

__all__ = ["MemoryStorage"]


class MemoryStorage:
    """Hands out the in-memory implementations of the storage protocols."""

    _named: ClassVar[dict[str, MemoryStorage]] = {}
    _named_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, url: str = "memory://") -> None:
        self.url = url
        self.lock = threading.RLock()
        self._objects: dict[tuple[str, str], Any] = {}

    @classmethod
    def named(cls, parsed: StorageURL) -> MemoryStorage:
        """The shared instance for ``memory://name``, or a fresh one for ``memory://``."""
        if not parsed.path:
            return cls(parsed.url)
        with cls._named_lock:
            inst = cls._named.get(parsed.path)
            if inst is None:
                inst = cls._named[parsed.path] = cls(parsed.url)
            return inst

    def _get(self, kind: str, name: str, factory: Any) -> Any:
        with self.lock:
            obj = self._objects.get((kind, name))
            if obj is None:
                obj = self._objects[(kind, name)] = factory()
            return obj

    def keystore(self) -> Any:
        from ._keys import MemoryKeyStore  # type: ignore[import-not-found, unused-ignore]

        return self._get("keys", "", MemoryKeyStore)

    def statestore(self, namespace: str = "default") -> Any:
        from ._state import MemoryStateStore  # type: ignore[import-not-found, unused-ignore]

        return self._get("state", namespace, lambda: MemoryStateStore(namespace))

    def stream(self, name: str) -> Any:
        from ._stream import MemoryStream  # type: ignore[import-not-found, unused-ignore]

        return self._get("stream", name, lambda: MemoryStream(name))

    def journal(self) -> Any:
        from ._journal import MemoryJournal  # type: ignore[import-not-found, unused-ignore]

        return self._get("journal", "", MemoryJournal)

    def close(self) -> None:
        """Nothing to release; data lives as long as the process (or this object)."""

    def __repr__(self) -> str:
        return f"MemoryStorage({self.url!r})"
