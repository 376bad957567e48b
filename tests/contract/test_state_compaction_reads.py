"""Reads across a compaction: the review's findings, one contract, four backends.

``read_at`` answers every revision at or after a key's oldest kept change and raises
``CompactedError`` for older ones, never a silent "absent"; compaction by age removes only a
prefix of each key's changes (by revision), whatever the writers' clocks said; a compaction
committing while ``read_at`` runs cannot delete the answer it already read; an expiry sweep
commits even when the conditional write that ran it conflicts.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _backends import BACKENDS, backend_url

from surefoot import storage
from surefoot.errors import CompactedError, ConflictError


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh storage URL on each backend."""
    return backend_url(str(request.param), tmp_path, request, "cr")


@pytest.fixture
def ns(url: str) -> Iterator[Any]:
    """A namespace's StateStore on that backend."""
    st = storage.open(url)
    yield st.statestore("ns")
    st.close()


def _put(ns: Any, key: str, value: str, at: float, **kw: Any) -> Any:
    return ns.write(key, value, author="u", trust="trusted", expect=None, now=at, **kw)


def test_read_at_answers_from_the_oldest_kept_revision_and_raises_before(ns: Any) -> None:
    """k@1, k@2, j@3, k@4, keep=1: k at 2 and 3 is gone (raise), at 4 it is v4."""
    _put(ns, "k", '"v1"', 1.0)
    _put(ns, "k", '"v2"', 2.0)
    _put(ns, "j", '"x"', 3.0)
    _put(ns, "k", '"v4"', 4.0)
    assert ns.read_at("k", 3).value == '"v2"'
    assert ns.compact(keep=1, before=None) == 2
    for rev in (1, 2, 3):
        with pytest.raises(CompactedError) as ei:
            ns.read_at("k", rev)
        assert ei.value.oldest == 4
    assert ns.read_at("k", 4).value == '"v4"'
    assert ns.read_at("j", 3).value == '"x"' and ns.read_at("j", 2) is None  # never compacted


def test_age_compaction_removes_only_a_prefix_of_each_key(ns: Any) -> None:
    """A writer 40 s behind: v2 (rev 2) is "older" than v1 (rev 1) but v1 cannot go alone."""
    _put(ns, "k", '"v1"', 50.0)
    _put(ns, "k", '"v2"', 10.0)
    _put(ns, "k", '"v3"', 60.0)
    assert ns.compact(keep=None, before=20.0) == 0  # rev 1 is not before 20: nothing older
    assert [c.revision for c in ns.history("k")] == [1, 2, 3]
    assert ns.read_at("k", 2).value == '"v2"'
    assert ns.compact(keep=None, before=55.0) == 2
    assert [c.revision for c in ns.history("k")] == [3]
    with pytest.raises(CompactedError):
        ns.read_at("k", 2)


def _interleave(ns: Any, then: Any) -> bool:
    """Run ``then`` right after the backend's first read inside the next call."""
    db = getattr(ns, "db", None)
    name = {"SQLiteDB": "read", "PostgresDB": "execute"}.get(type(db).__name__, "call")
    if db is None or not hasattr(db, name):
        return False  # the in-memory store answers under one lock: there is no "between"
    orig = getattr(db, name)
    fired: list[bool] = []

    def hooked(*args: Any, **kw: Any) -> Any:
        out = orig(*args, **kw)
        if not fired:
            fired.append(True)
            then()
        return out

    setattr(db, name, hooked)
    return True


def test_a_compaction_during_read_at_does_not_delete_its_answer(url: str, ns: Any) -> None:
    """Another process compacts between read_at's reads: the answer is v1, or a raise."""
    for i in range(3):
        _put(ns, "k", f'"v{i}"', 100.0 + i)
    other = storage.open(url)
    try:
        other_ns = ns if url.startswith("memory") else other.statestore("ns")
        hooked = _interleave(ns, lambda: other_ns.compact(keep=1, before=None))
        assert ns.read_at("k", 2).value == '"v1"'
        if not hooked:
            assert other_ns.compact(keep=1, before=None) == 2
    finally:
        other.close()
    with pytest.raises(CompactedError):
        ns.read_at("k", 2)


def test_an_expiry_sweep_commits_even_when_the_write_conflicts(ns: Any) -> None:
    """k expires at 1; a write expecting version 1 at 5 conflicts, but the expiry is logged
    at revision 2 on every backend (and the same for a conditional delete)."""
    _put(ns, "k", '"v1"', 0.0, ttl=1.0)
    with pytest.raises(ConflictError):
        ns.write("k", '"v2"', author="u", trust="trusted", expect=1, now=5.0)
    assert [(c.revision, c.kind) for c in ns.history("k")] == [(1, "put"), (2, "expire")]
    _put(ns, "j", '"v1"', 5.0, ttl=1.0)  # revision 3, expires at 6
    with pytest.raises(ConflictError):
        ns.delete("j", author="u", trust="trusted", expect=1, now=10.0)
    assert [(c.revision, c.kind) for c in ns.history("j")] == [(3, "put"), (4, "expire")]
