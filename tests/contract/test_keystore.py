"""KeyStore contract: one suite for every backend: memory, SQLite, and PostgreSQL when it is
reachable (skipped otherwise, a failure under SUREFOOT_REQUIRE_SERVICES=1)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from surefoot import storage
from surefoot.storage.keys import KeyStore


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def keystore_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh storage URL per backend."""
    if request.param == "postgresql":  # a schema of this test only, dropped afterwards
        url = f"{request.getfixturevalue('pg_url')}?schema=sf_t_{uuid.uuid4().hex[:12]}"
        yield url
        _drop_schema(url)
        return
    yield "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'keys.db'}"


def _drop_schema(url: str) -> None:
    st: Any = storage.open(url)
    st.db.drop_schema()
    st.close()


@pytest.fixture
def keys(keystore_url: str) -> Iterator[Any]:
    """The KeyStore of a fresh store."""
    st = storage.open(keystore_url)
    try:
        yield st.keystore()
    finally:
        st.close()


def test_is_a_keystore(keys: Any) -> None:
    """The backend implements the protocol."""
    assert isinstance(keys, KeyStore)


def test_claim_inserts_once(keys: Any) -> None:
    """The first claim wins; a second owner sees the running record."""
    won, rec = keys.claim("k", "fp", "a", 100.0, 400.0)
    assert won and rec.state == "running" and rec.owner == "a"
    won2, rec2 = keys.claim("k", "fp", "b", 101.0, 401.0)
    assert not won2 and rec2.owner == "a" and rec2.state == "running"


def test_complete_only_by_the_owner(keys: Any) -> None:
    """Only the owner completes; the result is stored with its expiry."""
    keys.claim("k", "fp", "a", 100.0, 400.0)
    assert not keys.complete("k", "b", '"x"', None)
    assert keys.complete("k", "a", '"x"', 500.0)
    rec = keys.get("k")
    assert rec.state == "done" and rec.result == '"x"' and rec.expires_at == 500.0
    assert not keys.complete("k", "a", '"y"', None)


def test_release_deletes_a_running_claim(keys: Any) -> None:
    """A failed action's claim is released so the next caller can run it."""
    keys.claim("k", "fp", "a", 100.0, 400.0)
    assert not keys.release("k", "b")
    assert keys.release("k", "a")
    assert keys.get("k") is None
    won, _ = keys.claim("k", "fp", "b", 101.0, 401.0)
    assert won


def test_expired_result_can_be_claimed_again(keys: Any) -> None:
    """A done record past expires_at counts as absent, even with another fingerprint."""
    keys.claim("k", "fp", "a", 100.0, 400.0)
    keys.complete("k", "a", "1", 200.0)
    won, _ = keys.claim("k", "other", "b", 150.0, 450.0)
    assert not won
    won, rec = keys.claim("k", "other", "b", 200.0, 500.0)
    assert won and rec.fingerprint == "other" and rec.result is None


def test_abandoned_claim_is_taken_over_only_after_its_lease(keys: Any) -> None:
    """A running record whose lease ran out is taken over by the same fingerprint only."""
    keys.claim("k", "fp", "dead", 100.0, 130.0)
    assert not keys.claim("k", "fp", "b", 120.0, 420.0)[0]
    assert not keys.claim("k", "other", "b", 140.0, 440.0)[0]
    won, rec = keys.claim("k", "fp", "b", 140.0, 440.0)
    assert won and rec.owner == "b"
    assert not keys.complete("k", "dead", "1", None)  # the zombie cannot complete


def test_purge_and_delete(keys: Any) -> None:
    """purge removes expired results only; delete removes any record."""
    keys.claim("a", "fp", "o", 0.0, 10.0)
    keys.complete("a", "o", "1", 5.0)
    keys.claim("b", "fp", "o", 0.0, 10.0)
    keys.complete("b", "o", "1", None)
    keys.claim("c", "fp", "o", 0.0, 10.0)
    assert keys.purge(6.0) == 1
    assert keys.get("a") is None and keys.get("b") is not None
    assert keys.delete("c") and not keys.delete("c")
