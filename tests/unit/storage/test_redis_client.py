"""RedisStorage: URLs, error translation, what Redis does not offer, prefixes, state scripts."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from surefoot import FakeClock, storage
from surefoot.errors import (
    ConfigError,
    ConflictError,
    SchemaVersionError,
    StoreUnavailableError,
)
from surefoot.storage.redis import RedisStorage
from surefoot.storage.redis._client import LAYOUT

pytestmark = pytest.mark.services


@pytest.fixture
def rs(redis_url: str) -> Iterator[RedisStorage]:
    """A RedisStorage on a fresh key prefix, deleted afterwards."""
    st = storage.open(f"{redis_url}?prefix=sf_t_{uuid.uuid4().hex[:12]}")
    assert isinstance(st, RedisStorage)
    yield st
    st.db.delete_prefix()
    st.close()


def test_unreachable_server_is_store_unavailable() -> None:
    """A Redis that is not there fails at open, naming the URL and what to check."""
    with pytest.raises(StoreUnavailableError, match="server is running") as info:
        storage.open("redis://:secret@127.0.0.1:1/0?socket_timeout=1&reconnect_timeout=0")
    assert "secret" not in str(info.value)
    assert info.value.__cause__ is not None


@pytest.mark.parametrize("query", ["prefix=has space", "socket_timeout=soon"])
def test_bad_options_are_config_errors(redis_url: str, query: str) -> None:
    """Bad query options raise ConfigError naming the option."""
    with pytest.raises(ConfigError):
        storage.open(f"{redis_url}?{query}")


def test_journal_and_keystore_are_refused(rs: RedisStorage) -> None:
    """Redis refuses the Journal and KeyStore with an error naming the backends that offer them."""
    with pytest.raises(ConfigError, match="postgresql://"):
        rs.journal()
    with pytest.raises(ConfigError, match="sqlite:///"):
        rs.keystore()


def test_prefixes_isolate_and_delete_prefix_cleans_up(rs: RedisStorage, redis_url: str) -> None:
    """Two prefixes on one server do not see each other; delete_prefix removes only its own."""
    other = storage.open(f"{redis_url}?prefix=sf_t_{uuid.uuid4().hex[:12]}")
    assert isinstance(other, RedisStorage)
    try:
        rs.statestore("ns").write("k", '"a"', author="x", trust="t", expect=None, now=1.0)
        other.statestore("ns").write("k", '"b"', author="y", trust="t", expect=None, now=1.0)
        rec = rs.statestore("ns").read("k")
        assert rec is not None and rec.value == '"a"'
        # the hash, its revision counter, its change log, its index and their marks, the
        # layout mark
        assert rs.db.delete_prefix() == 6
        assert rs.statestore("ns").read("k") is None
        kept = other.statestore("ns").read("k")
        assert kept is not None and kept.value == '"b"'
    finally:
        other.db.delete_prefix()
        other.close()


def test_prefix_written_by_a_newer_surefoot_fails_clearly(redis_url: str) -> None:
    """A prefix marked with a newer key layout is refused at open, named, and left untouched."""
    url = f"{redis_url}?prefix=sf_t_{uuid.uuid4().hex[:12]}"
    st = storage.open(url)
    assert isinstance(st, RedisStorage)
    mark = st.db.key("layout")
    try:
        assert st.db.client.get(mark) == str(LAYOUT)
        st.statestore("ns").write("k", '"v"', author="x", trust="t", expect=None, now=1.0)
        st.db.client.set(mark, str(LAYOUT + 1))
        with pytest.raises(SchemaVersionError, match="newer surefoot") as info:
            storage.open(url)
        assert "upgrade surefoot" in str(info.value) and "prefix" in str(info.value)
        assert st.db.client.get(mark) == str(LAYOUT + 1)
        assert st.statestore("ns").read("k") is not None
    finally:
        st.db.delete_prefix()
        st.close()


def test_versioned_write_is_one_script_per_write(rs: RedisStorage) -> None:
    """A versioned write and a refused one are one round trip each; the refusal changes nothing."""
    st = rs.statestore("team")
    before = rs.db.round_trips
    st.write("k", '"a"', author="x", trust="t", expect=0, now=1.5)
    with pytest.raises(ConflictError) as info:
        st.write("k", '"b"', author="y", trust="t", expect=0, now=2.0)
    assert rs.db.round_trips - before == 2
    assert (info.value.version, info.value.value, info.value.author) == (1, "a", "x")
    assert st.revision() == 1
    rec = st.read("k")
    assert rec is not None and (rec.version, rec.written_at) == (1, 1.5)


def test_fence_conflict_names_the_lease_key(rs: RedisStorage) -> None:
    """A stale fence raises ConflictError on the lease key with the fenced version expected."""
    st = rs.statestore("team")
    st.write("lease", '"w1"', author="w1", trust="t", expect=None, now=1.0)
    st.write("lease", '"w2"', author="w2", trust="t", expect=None, now=2.0)
    with pytest.raises(ConflictError) as info:
        st.write("k", '"v"', author="w1", trust="t", expect=None, now=3.0, fence=("lease", 1))
    assert (info.value.key, info.value.expected, info.value.version) == ("lease", 1, 2)
    assert st.read("k") is None


def _flaky(redis_url: str, clock: FakeClock) -> RedisStorage:
    st = storage.open(f"{redis_url}?prefix=sf_t_{uuid.uuid4().hex[:12]}&reconnect_timeout=2")
    assert isinstance(st, RedisStorage)
    st.db.clock = clock
    return st


def test_refused_connections_back_off_within_the_bound(redis_url: str) -> None:
    """A server refusing connections is retried with growing jittered waits (on the clock)
    until reconnect_timeout, then StoreUnavailableError."""
    import redis

    clock = FakeClock()
    st = _flaky(redis_url, clock)
    calls = 0

    def refuse(_: object) -> None:
        nonlocal calls
        calls += 1
        raise redis.ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    with pytest.raises(StoreUnavailableError, match="cannot reach Redis"):
        st.db.call(refuse)
    assert calls == len(clock.sleeps) + 1 >= 4
    assert sum(clock.sleeps) <= 2.0
    ceilings = [min(2.0, 0.05 * 2**i) for i in range(len(clock.sleeps))]
    assert all(c / 2 <= s <= c for s, c in zip(clock.sleeps, ceilings, strict=True))
    st.close()


def test_lost_reply_of_a_write_is_not_retried_blindly(redis_url: str) -> None:
    """A write whose connection broke after sending is reported as of unknown outcome, not
    re-sent; an idempotent one is re-sent after a back-off."""
    import redis

    clock = FakeClock()
    st = _flaky(redis_url, clock)
    calls = 0

    def broken_once(_: object) -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise redis.ConnectionError("Connection closed by server.")
        return "ok"

    with pytest.raises(StoreUnavailableError, match="may or may not"):
        st.db.call(broken_once)
    assert calls == 1 and clock.sleeps == []
    calls = 0
    assert st.db.call(broken_once, idempotent=True) == "ok"
    assert calls == 2 and len(clock.sleeps) == 1
    st.close()


def test_durable_app_on_redis_is_refused_clearly(rs: RedisStorage) -> None:
    """durable.App on a redis:// URL fails on first use with the ConfigError naming the
    backends that hold a journal, not with a driver error."""
    from surefoot import durable

    app = durable.App(rs.url)
    try:
        with pytest.raises(ConfigError, match=r"sqlite:///path\.db or postgresql://"):
            app.list_runs()
    finally:
        app.close()


def test_closing_the_sender_of_a_lost_reply_names_it_by_id_and_address(
    rs: RedisStorage, redis_url: str
) -> None:
    """After a server restart ids start again from 1: a lost reply's sender id may then name
    another client's connection. The kill names the sender by id and address, so that other
    connection survives; the sender itself (both matching) is closed."""
    import redis as redis_py

    db = rs.db
    conn = db.client.connection_pool.get_connection()  # held: as a sender whose reply was lost
    other = redis_py.Redis.from_url(redis_url.split("?")[0])
    try:
        assert conn.surefoot_client_id > 0 and conn.surefoot_client_addr  # CLIENT INFO read
        other_id = int(other.client_id())
        # an id that names the other connection, with the address of the one that sent
        sender = (other_id, conn.surefoot_client_addr)
        got = db._resolve(sender, lambda: "found", ConnectionError("lost"), 1e18)
        assert got == "found"
        ids = {int(c["id"]) for c in other.client_list()}
        assert other_id in ids  # not closed: it is not the sender
        mine = (conn.surefoot_client_id, conn.surefoot_client_addr)
        assert db._resolve(mine, lambda: "found", ConnectionError("lost"), 1e18) == "found"
        ids = {int(c["id"]) for c in other.client_list()}
        assert conn.surefoot_client_id not in ids  # the sender, named by both, is closed
    finally:
        other.close()
        conn.disconnect()
