"""In-memory KeyStore: one dict under a lock (this process only)."""

from __future__ import annotations

import threading
from dataclasses import replace

from ..keys import KeyRecord

__all__ = ["MemoryKeyStore"]


class MemoryKeyStore:
    """Idempotency records in a dict; every method holds the lock for its whole change."""

    def __init__(self) -> None:
        self._rows: dict[str, KeyRecord] = {}
        self._lock = threading.Lock()

    def claim(
        self, key: str, fingerprint: str, owner: str, now: float, lease_until: float
    ) -> tuple[bool, KeyRecord]:
        with self._lock:
            cur = self._rows.get(key)
            if cur is not None:
                expired = (
                    cur.state == "done" and cur.expires_at is not None and cur.expires_at <= now
                )
                abandoned = (
                    cur.state == "running"
                    and cur.lease_until <= now
                    and cur.fingerprint == fingerprint
                )
                if not (expired or abandoned):
                    return False, cur
            rec = KeyRecord(key, fingerprint, "running", None, owner, now, lease_until, None)
            self._rows[key] = rec
            return True, rec

    def complete(self, key: str, owner: str, result: str, expires_at: float | None) -> bool:
        with self._lock:
            cur = self._rows.get(key)
            if cur is None or cur.owner != owner or cur.state != "running":
                return False
            self._rows[key] = replace(cur, state="done", result=result, expires_at=expires_at)
            return True

    def release(self, key: str, owner: str) -> bool:
        with self._lock:
            cur = self._rows.get(key)
            if cur is None or cur.owner != owner or cur.state != "running":
                return False
            del self._rows[key]
            return True

    def get(self, key: str) -> KeyRecord | None:
        with self._lock:
            return self._rows.get(key)

    def delete(self, key: str) -> bool:
        with self._lock:
            return self._rows.pop(key, None) is not None

    def purge(self, now: float) -> int:
        with self._lock:
            gone = [
                k
                for k, r in self._rows.items()
                if r.state == "done" and r.expires_at is not None and r.expires_at <= now
            ]
            for k in gone:
                del self._rows[k]
            return len(gone)
