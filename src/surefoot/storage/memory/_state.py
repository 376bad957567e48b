"""In-memory ``StateStore``: versioned keys, their change log and watches under one lock."""

from __future__ import annotations

import threading
from typing import Any

from ...errors import CompactedError
from ..checks import DEFAULT_MAX_VALUE_BYTES, check_size
from ..history import WatchRead, change_kind, compaction_victims, txn_plan
from ..merges import apply, log_entry, lower_trust
from ..state import (
    MergeOutcome,
    StateChange,
    StateRecord,
    TxnOp,
    expires_at,
    next_lineage,
    write_conflict,
)

__all__ = ["MemoryStateStore"]


def _current(rec: StateRecord | None) -> tuple[int, str | None, str] | None:
    if rec is None:
        return None
    return (rec.version, rec.value if rec.merge_op != "$dead" else None, rec.author)


class MemoryStateStore:
    """Versioned keys of one namespace in a dict; every method holds one lock.

    A deleted or expired key stays as a tombstone record (``merge_op`` ``$dead``) so its
    version keeps counting; reads never return it.

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
        self._ttl: dict[str, float] = {}
        self._log: list[StateChange] = []
        self._revision = 0
        self._compacted = 0
        self._key_compacted: dict[str, int] = {}
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)

    # -- reads ---------------------------------------------------------------------------

    def _live(self, key: str, now: float | None) -> StateRecord | None:
        rec = self._rows.get(key)
        if rec is None or rec.merge_op == "$dead":
            return None
        at = self._ttl.get(key)
        if at is not None and now is not None and at <= now:
            return None
        return rec

    def read(self, key: str, now: float | None = None) -> StateRecord | None:
        with self._lock:
            return self._live(key, now)

    def snapshot(self, now: float | None = None) -> dict[str, StateRecord]:
        with self._lock:
            return {k: r for k in sorted(self._rows) if (r := self._live(k, now)) is not None}

    def revision(self) -> int:
        return self._revision

    def lost_updates(self) -> int:
        with self._lock:
            return sum(r.version - r.lineage for r in self._rows.values())

    # -- the log ---------------------------------------------------------------------------

    def _append(self, rec: StateRecord) -> StateChange:
        """Store ``rec`` (revision already taken) and log it; under the lock."""
        self._rows[rec.key] = rec
        ttl_at = rec.expires_at
        if ttl_at is None:
            self._ttl.pop(rec.key, None)
        else:
            self._ttl[rec.key] = ttl_at
        dead = rec.merge_op == "$dead"
        kind = (rec.merge_log or "delete") if dead else change_kind(rec.merge_op)
        ch = StateChange(
            rec.revision,
            rec.key,
            kind,
            None if dead else rec.value,
            rec.version,
            rec.author,
            rec.trust,
            rec.written_at,
            ttl_at,
        )
        self._log.append(ch)
        self._changed.notify_all()
        return ch

    def _sweep(self, now: float) -> int:
        due = sorted((at, k) for k, at in self._ttl.items() if at <= now)
        for _, key in due:
            cur = self._rows[key]
            self._revision += 1
            self._append(
                StateRecord(
                    key,
                    "null",
                    cur.version + 1,
                    self._revision,
                    "system",
                    "system",
                    now,
                    cur.lineage + 1,
                    "$dead",
                    "expire",
                )
            )
        return len(due)

    def expire(self, now: float) -> int:
        with self._lock:
            return self._sweep(now)

    def changes(
        self, after: int, *, prefix: str = "", limit: int = 100, upto: int | None = None
    ) -> list[StateChange]:
        with self._lock:
            return self._scan(after, prefix, limit, upto)

    def watch_read(
        self, after: int, *, prefix: str = "", limit: int = 100, now: float
    ) -> WatchRead:
        with self._lock:
            out = self._scan(after, prefix, limit, None)
            scanned = out[-1].revision if len(out) >= limit else max(self._revision, after)
            return WatchRead(out, scanned, any(at <= now for at in self._ttl.values()))

    def _scan(self, after: int, prefix: str, limit: int, upto: int | None) -> list[StateChange]:
        if after < self._compacted:
            raise CompactedError(f"namespace {self.namespace!r}", after + 1, self._oldest_kept())
        out: list[StateChange] = []
        for ch in self._log:  # kept in revision order
            if ch.revision <= after or not ch.key.startswith(prefix):
                continue
            if (upto is not None and ch.revision > upto) or len(out) >= limit:
                break
            out.append(ch)
        return out

    def _oldest_kept(self) -> int:
        return self._log[0].revision if self._log else self._revision + 1

    def history(self, key: str) -> list[StateChange]:
        with self._lock:
            return [ch for ch in self._log if ch.key == key]

    def read_at(self, key: str, revision: int) -> StateChange | None:
        with self._lock:
            kept = [ch for ch in self._log if ch.key == key]
            found = None
            for ch in kept:
                if ch.revision > revision:
                    break
                found = ch
            if found is None and self._key_compacted.get(key, 0) > 0:
                # No kept change at or before ``revision``, and older ones were removed:
                # the answer is gone, not "absent".
                oldest = kept[0].revision if kept else self._revision + 1
                raise CompactedError(f"key {key!r}", revision, oldest)
            return found if found is not None and found.value is not None else None

    def compact(self, *, keep: int | None, before: float | None) -> int:
        with self._lock:
            gone, marks = compaction_victims(
                [(ch.key, ch.revision, ch.at) for ch in self._log], keep, before
            )
            if not gone:
                return 0
            for key, rev in marks.items():
                self._key_compacted[key] = max(self._key_compacted.get(key, 0), rev)
            self._log = [ch for ch in self._log if ch.revision not in gone]
            self._compacted = max(self._compacted, max(gone))
            return len(gone)

    def compacted(self) -> int:
        return self._compacted

    def wait(self, after: int, timeout: float) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: self._revision > after, timeout)

    # -- writes ----------------------------------------------------------------------------

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
        ttl: float | None = None,
    ) -> StateRecord:
        check_size(self.url, f"the value of key {key!r}", value, self.max_value_bytes)
        ttl_at = expires_at(now, ttl)
        with self._lock:
            self._sweep(now)
            self._check_fence(key, expect, fence)
            cur = self._rows.get(key)
            self._check_expect(key, expect, fence, cur)
            version = cur.version if cur is not None else 0
            lineage = next_lineage(version, cur.lineage if cur else 0, expect, seen)
            self._revision += 1
            rec = StateRecord(
                key,
                value,
                version + 1,
                self._revision,
                author,
                trust,
                now,
                lineage,
                expires_at=ttl_at,
            )
            self._append(rec)
            return rec

    def _check_fence(self, key: str, expect: int | None, fence: tuple[str, int] | None) -> None:
        if fence is not None:
            lease = self._live(fence[0], None)
            if lease is None or lease.version != fence[1]:  # a missing lease never matches
                raise write_conflict(
                    "fence", key, expect, fence, _current(self._rows.get(fence[0]))
                )

    @staticmethod
    def _check_expect(
        key: str, expect: int | None, fence: tuple[str, int] | None, cur: StateRecord | None
    ) -> None:
        version = cur.version if cur is not None else 0
        dead = cur is None or cur.merge_op == "$dead"
        if expect is not None and expect != version and not (dead and expect == 0):
            raise write_conflict("conflict", key, expect, fence, _current(cur))

    def delete(
        self,
        key: str,
        *,
        author: str,
        trust: str,
        expect: int | None,
        now: float,
        fence: tuple[str, int] | None = None,
    ) -> StateChange | None:
        with self._lock:
            self._sweep(now)
            self._check_fence(key, expect, fence)
            cur = self._rows.get(key)
            self._check_expect(key, expect, fence, cur)
            if cur is None or cur.merge_op == "$dead":
                return None
            return self._tombstone(cur, author, trust, now)

    def _tombstone(self, cur: StateRecord, author: str, trust: str, now: float) -> StateChange:
        self._revision += 1
        return self._append(
            StateRecord(
                cur.key,
                "null",
                cur.version + 1,
                self._revision,
                author,
                trust,
                now,
                cur.lineage + 1,
                "$dead",
                "delete",
            )
        )

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
            self._sweep(now)
            old = self._rows.get(key)
            cur = self._live(key, None)
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
                (old.version if old else 0) + 1,
                self._revision,
                author,
                lower_trust(cur.trust if cur else None, trust),
                now,
                (old.lineage if old else 0) + 1,
                op,
                log,
                cur.expires_at if cur is not None else None,
            )
            self._append(rec)
            return MergeOutcome.of(rec, True)

    def txn(
        self,
        compare: list[tuple[str, int]],
        success: list[TxnOp],
        failure: list[TxnOp],
        *,
        author: str,
        trust: str,
        now: float,
    ) -> tuple[bool, list[StateChange], tuple[str, int, str | None, str] | None]:
        for op in (*success, *failure):
            if op[0] == "put":
                check_size(self.url, f"the value of key {op[1]!r}", op[2], self.max_value_bytes)
        with self._lock:
            self._sweep(now)
            failed = None
            for key, version in compare:
                cur = self._live(key, None)
                have = cur.version if cur is not None else 0
                if have != version:
                    failed = (key, have, cur.value if cur else None, cur.author if cur else "")
                    break
            made = []
            for op in txn_plan(success if failed is None else failure):
                old = self._rows.get(op[1])
                if op[0] == "delete":
                    if old is not None and old.merge_op != "$dead":
                        made.append(self._tombstone(old, author, trust, now))
                    continue
                self._revision += 1
                rec = StateRecord(
                    op[1],
                    op[2],
                    (old.version if old else 0) + 1,
                    self._revision,
                    author,
                    trust,
                    now,
                    (old.lineage if old else 0) + 1,
                    expires_at=expires_at(now, op[3]),
                )
                made.append(self._append(rec))
            return failed is None, made, failed

    def __repr__(self) -> str:
        return f"MemoryStateStore({self.namespace!r}, keys={len(self._rows)})"
