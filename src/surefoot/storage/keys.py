"""``KeyStore``: idempotency records, owned by ``surefoot.resilience``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["KeyRecord", "KeyStore"]


@dataclass(frozen=True, slots=True)
class KeyRecord:
    """One idempotency key as stored.

    Attributes:
        key: the key. fingerprint: a hash of the action and its arguments.
        state: ``running`` (the action is in flight) or ``done``.
        result: codec JSON of the result when done.
        owner: who claimed it (process and executor). created_at: when (``Clock.now()``).
        lease_until: a running record whose owner died can be taken over after this.
        expires_at: a done record counts as absent after this (None: never).
    """

    key: str
    fingerprint: str
    state: str
    result: str | None
    owner: str
    created_at: float
    lease_until: float
    expires_at: float | None


@runtime_checkable
class KeyStore(Protocol):
    """Idempotency records. Every method is one atomic statement (or one short transaction)."""

    def claim(
        self, key: str, fingerprint: str, owner: str, now: float, lease_until: float
    ) -> tuple[bool, KeyRecord]:
        """Insert a ``running`` record if the key is absent, or take it over if it expired
        (done, ``expires_at <= now``) or its owner's lease ran out (running, same
        fingerprint, ``lease_until <= now``). Returns (claimed, the record now stored)."""
        ...

    def complete(self, key: str, owner: str, result: str, expires_at: float | None) -> bool:
        """``running`` → ``done`` with ``result``, only if ``owner`` still holds the key."""
        ...

    def release(self, key: str, owner: str) -> bool:
        """Delete a ``running`` record held by ``owner`` (its action failed; a retry may run)."""
        ...

    def get(self, key: str) -> KeyRecord | None: ...
    def delete(self, key: str) -> bool: ...
    def purge(self, now: float) -> int:
        """Delete done records that expired at ``now``; returns how many."""
        ...
