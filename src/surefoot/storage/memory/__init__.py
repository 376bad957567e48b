"""In-process storage: fast, for tests and single-process use. ``memory://name`` is shared
by every ``open`` of the same name in this process; ``memory://`` is always fresh."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn, TypeVar

from ..checks import value_limit
from ..url import StorageURL, parse_url

if TYPE_CHECKING:
    from ._keys import MemoryKeyStore
    from ._state import MemoryStateStore
    from ._stream import MemoryStream

__all__ = ["MemoryStorage"]

T = TypeVar("T")


class MemoryStorage:
    """Hands out the in-memory implementations of the storage protocols."""

    _named: ClassVar[dict[str, MemoryStorage]] = {}
    _named_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, url: str = "memory://") -> None:
        self.url = url
        self.max_value_bytes = value_limit(url, parse_url(url).options)
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

    def _get(self, kind: str, name: str, factory: Callable[[], T]) -> T:
        with self.lock:
            obj: T | None = self._objects.get((kind, name))
            if obj is None:
                obj = self._objects[(kind, name)] = factory()
            return obj

    def keystore(self) -> MemoryKeyStore:
        from ._keys import MemoryKeyStore

        return self._get("keys", "", MemoryKeyStore)

    def statestore(self, namespace: str = "default") -> MemoryStateStore:
        from ._state import MemoryStateStore

        return self._get(
            "state",
            namespace,
            lambda: MemoryStateStore(namespace, max_value_bytes=self.max_value_bytes, url=self.url),
        )

    def stream(self, name: str) -> MemoryStream:
        from ._stream import MemoryStream

        return self._get(
            "stream",
            name,
            lambda: MemoryStream(name, max_value_bytes=self.max_value_bytes, url=self.url),
        )

    def streams(self) -> dict[str, int]:
        """The streams opened in this storage: names (sorted) with kept message counts."""
        from ._stream import list_streams

        with self.lock:
            found = {n: o for (k, n), o in self._objects.items() if k == "stream"}
        return list_streams(found)

    def journal(self) -> NoReturn:
        """Not offered in memory.

        Raises:
            ConfigError: always; a journal must outlive the process (use ``sqlite://``).
        """
        from ._journal import refuse_journal

        refuse_journal()

    def close(self) -> None:
        """Nothing to release; data lives as long as the process (or this object)."""

    def __repr__(self) -> str:
        return f"MemoryStorage({self.url!r})"
