"""In-memory ``StateStore``: versioned keys under one lock (this process only)."""

from __future__ import annotations

import threading
from typing import Any

from ..base import (
    DEFAULT_MAX_VALUE_BYTES,
    MergeOutcome,
    StateRecord,
    check_size,
    next_lineage,
    write_conflict,
)
from ..merges import apply, log_entry, lower_trust

__all__ = ["MemoryStateStore"]


def _current(rec: StateRecord | None) -> tuple[int, str, str] | None:
    return (rec.version, rec.value, rec.author) if rec is not None else None


class MemoryStateStore:
    """Versioned keys of one namespace in a dict; every method holds one lock.

    Args:
        namespace: the namespace's name (shown in errors).
        max_value_bytes: the largest value accepted (0: no limit).
        url: the storage URL (shown in errors).
    """

    def __init__(
        self,
        namespace: str = "default",
        *,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
        url: str = "memory://",
    ) -> None:
        self.namespace = namespace
        self.max_value_bytes = max_value_bytes
        self.url = url
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
        seen: tuple[int, int] | None = None,
    ) -> StateRecord:
        check_size(self.url, f"the value of key {key!r}", value, self.max_value_bytes)
        with self._lock:
            if fence is not None:
                lease = self._rows.get(fence[0])
                if lease is None or lease.version != fence[1]:  # a missing lease never matches
                    raise write_conflict("fence", key, expect, fence, _current(lease))
            cur = self._rows.get(key)
            version = cur.version if cur is not None else 0
            if expect is not None and expect != version:
                raise write_conflict("conflict", key, expect, fence, _current(cur))
            lineage = next_lineage(version, cur.lineage if cur else 0, expect, seen)
            self._revision += 1
            rec = StateRecord(key, value, version + 1, self._revision, author, trust, now, lineage)
            self._rows[key] = rec
            return rec

    def merge(
        self,
        key: str,
        op: str,
        arg: str,
        *,
        author: str,
        trust: str,
        now: float,
        merge_id: str | None = None,
        reducer: Any = None,
    ) -> MergeOutcome:
        check_size(self.url, f"the contribution to key {key!r}", arg, self.max_value_bytes)
        entry = log_entry(author, trust, now, merge_id, op, arg)
        with self._lock:
            cur = self._rows.get(key)
            state = (cur.value, cur.merge_op, cur.merge_log) if cur is not None else None
            out = apply(key, op, state, arg, entry, merge_id, reducer)
            if out is None:
                assert cur is not None
                return MergeOutcome.of(cur, False)
            value, log = out
            check_size(self.url, f"the value of key {key!r}", value, self.max_value_bytes)
            self._revision += 1
            rec = StateRecord(
                key,
                value,
                (cur.version if cur else 0) + 1,
                self._revision,
                author,
                lower_trust(cur.trust if cur else None, trust),
                now,
                (cur.lineage if cur else 0) + 1,
                op,
                log,
            )
            self._rows[key] = rec
            return MergeOutcome.of(rec, True)

    def snapshot(self) -> dict[str, StateRecord]:
        with self._lock:
            return dict(sorted(self._rows.items()))

    def revision(self) -> int:
        return self._revision

    def lost_updates(self) -> int:
        with self._lock:
            return sum(r.version - r.lineage for r in self._rows.values())

    def __repr__(self) -> str:
        return f"MemoryStateStore({self.namespace!r}, keys={len(self._rows)})"
