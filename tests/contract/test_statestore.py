"""StateStore contract: one suite for every backend.

Every test runs against memory, SQLite, PostgreSQL and Redis (``BACKENDS``); the server
backends come from the service fixtures, which skip when the server is absent (and fail
under ``SUREFOOT_REQUIRE_SERVICES=1``).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _backends import BACKENDS, backend_url
from hypothesis import settings
from hypothesis import strategies as hs
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from surefoot import storage
from surefoot.clock import FakeClock
from surefoot.errors import ConflictError, StoreUnavailableError
from surefoot.statebus import Store
from surefoot.storage.state import StateStore


def _url(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    return backend_url(kind, tmp_path, request, "state")


@pytest.fixture(params=BACKENDS)
def state_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A storage URL for each backend."""
    return _url(request.param, tmp_path, request)


@pytest.fixture
def state(state_url: str) -> Iterator[Any]:
    """A StateStore in a namespace no other test uses."""
    st = storage.open(state_url)
    try:
        yield st.statestore(f"t-{uuid.uuid4().hex[:10]}")
    finally:
        st.close()


def _w(s: Any, key: str, value: str, expect: int | None = None, **kw: Any) -> Any:
    return s.write(
        key,
        value,
        author=kw.pop("author", "a"),
        trust="trusted",
        expect=expect,
        now=kw.pop("now", 1.0),
        **kw,
    )


def test_is_a_statestore(state: Any) -> None:
    """The backend implements the protocol."""
    assert isinstance(state, StateStore)


def test_versions_count_writes_per_key_and_revision_counts_all(state: Any) -> None:
    """Per-key versions start at 1; the global revision rises by one per write."""
    assert state.read("a") is None and state.revision() == 0
    r1 = _w(state, "a", '"x"')
    r2 = _w(state, "b", '"y"')
    r3 = _w(state, "a", '"z"', author="b", now=2.0)
    assert (r1.version, r1.revision) == (1, 1)
    assert (r2.version, r2.revision) == (1, 2)
    assert (r3.version, r3.revision, r3.author, r3.written_at) == (2, 3, "b", 2.0)
    assert state.read("a") == r3
    assert state.revision() == 3
    assert list(state.snapshot()) == ["a", "b"]


def test_expect_zero_creates_only(state: Any) -> None:
    """expect=0 writes a new key and refuses an existing one, naming its version and author."""
    _w(state, "k", '"v1"', expect=0)
    with pytest.raises(ConflictError) as ei:
        _w(state, "k", '"v2"', expect=0, author="b")
    assert (ei.value.kind, ei.value.key, ei.value.expected, ei.value.version) == (
        "version", "k", 0, 1
    )  # fmt: skip
    assert (ei.value.value, ei.value.author) == ("v1", "a")
    assert state.read("k").value == '"v1"'


def test_stale_expect_is_refused_and_writes_nothing(state: Any) -> None:
    """A write expecting an older version raises ConflictError with the current value."""
    _w(state, "k", '"v1"')
    _w(state, "k", '"v2"', author="b")
    with pytest.raises(ConflictError) as ei:
        _w(state, "k", '"mine"', expect=1)
    assert (ei.value.version, ei.value.value, ei.value.author) == (2, "v2", "b")
    assert state.read("k").version == 2 and state.revision() == 2


def test_expect_on_a_missing_key_is_a_conflict_at_version_zero(state: Any) -> None:
    """Expecting version 3 of a key that does not exist is refused (version 0)."""
    with pytest.raises(ConflictError) as ei:
        _w(state, "nope", '"x"', expect=3)
    assert ei.value.version == 0 and ei.value.value is None
    assert state.read("nope") is None


def test_matching_expect_writes(state: Any) -> None:
    """A write expecting the current version succeeds and bumps it."""
    _w(state, "k", '"v1"')
    assert _w(state, "k", '"v2"', expect=1).version == 2


def test_fence_must_match_the_lease_version(state: Any) -> None:
    """A fenced write succeeds only while the lease key is at the fenced version."""
    _w(state, "lease", '"held"')
    assert _w(state, "k", '"x"', fence=("lease", 1)).version == 1
    _w(state, "lease", '"taken"', author="b")
    with pytest.raises(ConflictError) as ei:
        _w(state, "k", '"late"', fence=("lease", 1))
    assert (ei.value.kind, ei.value.key, ei.value.version) == ("fence", "lease", 2)
    with pytest.raises(ConflictError):
        _w(state, "new", '"late"', fence=("lease", 1))
    assert state.read("k").value == '"x"' and state.read("new") is None


def test_fence_on_a_missing_lease_key_is_refused(state: Any) -> None:
    """A fence at version 0 on a lease key that does not exist never matches: no lease, no write."""
    with pytest.raises(ConflictError) as ei:
        _w(state, "k", '"x"', fence=("lease", 0))
    got = (ei.value.kind, ei.value.key, ei.value.expected, ei.value.version)
    assert got == ("fence", "lease", 0, 0)
    assert "does not exist" in str(ei.value) and "lease" in str(ei.value)
    assert state.read("k") is None and state.revision() == 0


def test_store_lease_expiry_and_fencing_on_every_backend(state_url: str) -> None:
    """Through Store: a live lease excludes, an expired one is taken over, and the old
    holder's fenced write is refused while the new holder's succeeds."""
    clock = FakeClock()
    st = Store(state_url, namespace=f"lease-{uuid.uuid4().hex[:8]}", clock=clock)
    try:
        for name in ("a0", "a1"):
            st.register_agent(name)
        a, b = st.session("a0"), st.session("a1")
        old = a.acquire("report", 2.0)
        assert old is not None and b.acquire("report", 2.0) is None
        clock.advance(3.0)  # a0's model call outlived its lease
        new = b.acquire("report", 2.0)
        assert new is not None and new.epoch > old.epoch
        with pytest.raises(ConflictError) as ei:
            a.write_fenced("report", ["late"], old)
        assert ei.value.version == new.epoch and "lease" in str(ei.value)
        assert b.write_fenced("report", ["fresh"], new).value == ["fresh"]
        assert not st.release(old) and st.release(new)
        assert st.read("report").value == ["fresh"]  # type: ignore[union-attr]
    finally:
        st.close()


def test_namespaces_do_not_meet(state_url: str) -> None:
    """Two namespaces of one storage have separate keys and revisions."""
    st = storage.open(state_url)
    try:
        a = st.statestore(f"a-{uuid.uuid4().hex[:8]}")
        b = st.statestore(f"b-{uuid.uuid4().hex[:8]}")
        _w(a, "k", '"a"')
        assert b.read("k") is None and b.revision() == 0 and a.revision() == 1
    finally:
        st.close()


def test_corrupt_sqlite_file_is_a_clear_error(tmp_path: Path) -> None:
    """A file that is not SQLite is reported, named, and left untouched."""
    bad = tmp_path / "team.db"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreUnavailableError) as ei:
        storage.open(f"sqlite:///{bad}").statestore("x")
    assert "team.db" in str(ei.value)
    assert bad.read_bytes() == b"this is not a database" * 100


class StoreVsDict(RuleBasedStateMachine):
    """Random writes (blind, versioned, stale, fenced) against a backend and a dict."""

    url = "memory://"

    def __init__(self) -> None:
        super().__init__()
        self.st = storage.open(self.url)
        self.s = self.st.statestore(f"sm-{uuid.uuid4().hex[:10]}")
        self.model: dict[str, tuple[str, int, str]] = {}
        self.revision = 0

    keys = hs.sampled_from(["a", "b", "c"])
    values = hs.integers(0, 50).map(lambda i: f'"{i}"')
    authors = hs.sampled_from(["x", "y"])

    @rule(key=keys, value=values, author=authors)
    def blind_write(self, key: str, value: str, author: str) -> None:
        rec = _w(self.s, key, value, author=author)
        version = self.model.get(key, ("", 0, ""))[1] + 1
        self.revision += 1
        self.model[key] = (value, version, author)
        assert (rec.version, rec.revision) == (version, self.revision)

    @rule(key=keys, value=values, delta=hs.integers(-2, 2))
    def versioned_write(self, key: str, value: str, delta: int) -> None:
        current = self.model.get(key, ("", 0, ""))[1]
        expect = max(0, current + delta)
        if expect == current:
            rec = _w(self.s, key, value, expect=expect)
            self.revision += 1
            self.model[key] = (value, current + 1, "a")
            assert rec.version == current + 1
        else:
            with pytest.raises(ConflictError) as ei:
                _w(self.s, key, value, expect=expect)
            assert ei.value.version == current

    @rule(key=keys, value=values, lease=keys, delta=hs.integers(-1, 1))
    def fenced_write(self, key: str, value: str, lease: str, delta: int) -> None:
        held = self.model.get(lease, ("", 0, ""))[1]
        fence = (lease, max(0, held + delta))
        if lease in self.model and fence[1] == held:  # a missing lease never matches
            rec = _w(self.s, key, value, fence=fence)
            self.revision += 1
            self.model[key] = (value, self.model.get(key, ("", 0, ""))[1] + 1, "a")
            assert rec.version == self.model[key][1]
        else:
            with pytest.raises(ConflictError) as ei:
                _w(self.s, key, value, fence=fence)
            assert (ei.value.key, ei.value.version) == (lease, held)

    @invariant()
    def agrees(self) -> None:
        snap = self.s.snapshot()
        assert {k: (r.value, r.version, r.author) for k, r in snap.items()} == self.model
        assert self.s.revision() == self.revision

    def teardown(self) -> None:
        self.st.close()


@pytest.mark.parametrize("kind", BACKENDS)
def test_state_machine_agrees_with_a_dict(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Any sequence of writes leaves the backend equal to a plain dict model."""
    url = _url(kind, tmp_path, request)
    machine = type(f"StoreVsDict_{kind}", (StoreVsDict,), {"url": url})
    machine.TestCase.settings = settings(max_examples=25, stateful_step_count=15, deadline=None)
    machine.TestCase().runTest()


_INCREMENTER = textwrap.dedent(
    """
    import sys
    from surefoot import storage
    from surefoot.errors import ConflictError
    url, n = sys.argv[1], int(sys.argv[2])
    s = storage.open(url).statestore("counter")
    conflicts = done = 0
    while done < n:
        r = s.read("c")
        cur, ver = (int(r.value), r.version) if r else (0, 0)
        try:
            s.write("c", str(cur + 1), author="p", trust="trusted", expect=ver, now=0.0)
            done += 1
        except ConflictError:
            conflicts += 1
    print(conflicts)
    """
)


def test_sqlite_processes_never_lose_a_versioned_increment(tmp_path: Path) -> None:
    """Three processes incrementing one key with expect=version end at exactly 3 × n."""
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    storage.open(url).statestore("counter")  # create the schema once
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _INCREMENTER, url, "40"], stdout=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    try:
        outs = [p.communicate(timeout=60)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert all(p.returncode == 0 for p in procs)
    rec = storage.open(url).statestore("counter").read("c")
    assert rec is not None and int(rec.value) == 120 and rec.version == 120
    assert all(o.strip().isdigit() for o in outs)
