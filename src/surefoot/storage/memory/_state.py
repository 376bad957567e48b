"""In-memory ``StateStore``: versioned keys under one lock (this process only)."""

from __future__ import annotations

import threading

from ...codec import loads
from ...errors import ConflictError
from ..base import StateRecord, fence_conflict

__all__ = ["MemoryStateStore"]


class MemoryStateStore:
    """Versioned keys of one namespace in a dict; every method holds one lock.

    Args:
        namespace: the namespace's name (shown in errors).
    """

    def __init__(self, namespace: str = "default") -> None:
        self.namespace = namespace
        self._rows: dict[str, StateRecord] = {}
        self._revision = 0
        self._lock = threading.Lock()

    def read(self, key: str) -> StateRecord | None:
        return self._rows.get(key)

    def write(
        self,
        key: str,
        value: str,
        *,
        author: str,
        trust: str,
        expect: int | None,
        now: float,
        fence: tuple[str, int] | None = None,
    ) -> StateRecord:
        with self._lock:
            if fence is not None:
                lease = self._rows.get(fence[0])
                held = lease.version if lease is not None else 0
                if lease is None or held != fence[1]:  # a missing lease never matches
                    raise fence_conflict(
                        fence[0],
                        fence[1],
                        held,
                        loads(lease.value) if lease is not None else None,
                        lease.author if lease is not None else "",
                    )
            cur = self._rows.get(key)
            version = cur.version if cur is not None else 0
            if expect is not None and expect != version:
                raise ConflictError(
                    key,
                    expect,
                    version,
                    loads(cur.value) if cur is not None else None,
                    cur.author if cur is not None else "",
                )
            self._revision += 1
            rec = StateRecord(key, value, version + 1, self._revision, author, trust, now)
            self._rows[key] = rec
            return rec

    def snapshot(self) -> dict[str, StateRecord]:
        with self._lock:
            return dict(sorted(self._rows.items()))

    def revision(self) -> int:
        return self._revision

    def __repr__(self) -> str:
        return f"MemoryStateStore({self.namespace!r}, keys={len(self._rows)})"
