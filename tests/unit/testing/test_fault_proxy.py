"""FaultProxy: each fault shown against the real PostgreSQL and Redis (a dropped reply to a
COMMIT or EXEC leaves the client with an error while the server applied the transaction; a
reset rolls back; a blackhole makes a client time out; heal restores), plus the framing of
both wire protocols without a server."""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from surefoot.errors import ConfigError
from surefoot.testing import FaultProxy
from surefoot.testing._framing import PgClient, PgServer, RespClient, RespServer, is_commit

# -- the wire protocols, without a server --------------------------------------------------


def pg(kind: bytes, body: bytes) -> bytes:
    return kind + struct.pack("!I", len(body) + 4) + body


def startup() -> bytes:
    body = struct.pack("!I", 196608) + b"user\x00postgres\x00\x00"
    return struct.pack("!I", len(body) + 4) + body


@pytest.mark.parametrize(
    ("query", "commit"),
    [
        (b"COMMIT", True),
        (b"commit;", True),
        (b"  END TRANSACTION ;", True),
        (b"COMMIT WORK", True),
        (b"COMMIT PREPARED 'tx1'", True),
        (b"BEGIN; INSERT INTO t VALUES (1); COMMIT", True),
        (b"SELECT CASE WHEN true THEN 1 ELSE 2 END", False),
        (b"INSERT INTO commits VALUES (1)", False),
        (b"ROLLBACK", False),
    ],
)
def test_commit_statements_are_recognised(query: bytes, commit: bool) -> None:
    """COMMIT / END (with WORK, TRANSACTION, PREPARED, or last in a batch) and nothing else."""
    assert is_commit(query + b"\x00") is commit


def test_postgres_client_messages_are_split_and_commits_found() -> None:
    """An SSL request, the startup, a simple COMMIT and an extended-protocol COMMIT (Parse,
    Bind, Execute, Sync), fed a byte at a time, come out whole and classified."""
    stream = (
        struct.pack("!II", 8, 80877103)
        + startup()
        + pg(b"Q", b"COMMIT\x00")
        + pg(b"P", b"s1\x00COMMIT\x00\x00\x00")
        + pg(b"B", b"\x00s1\x00\x00\x00\x00\x00\x00\x00")
        + pg(b"E", b"\x00\x00\x00\x00\x00")
        + pg(b"S", b"")
        + pg(b"B", b"\x00s1\x00\x00\x00\x00\x00\x00\x00")  # the prepared COMMIT again
        + pg(b"E", b"\x00\x00\x00\x00\x00")
    )
    framer = PgClient()
    msgs = [m for i in range(len(stream)) for m in framer.feed(stream[i : i + 1])]
    assert [m.kind for m in msgs] == ["negotiate", "startup", "Q", "P", "B", "E", "S", "B", "E"]
    assert [m.commit for m in msgs] == [False, False, True, False, False, True, False, False, True]
    assert [m.replies for m in msgs] == [0, 0, 1, 0, 0, 0, 1, 0, 0]
    assert b"".join(m.raw for m in msgs) == stream


def test_statements_carry_their_sql_and_whether_they_open_or_abandon_a_block() -> None:
    """A Query's text, and an Execute's (its prepared statement's, then its parameters),
    with BEGIN / ROLLBACK marked, so the proxy can follow blocks and match statements."""
    stream = (
        pg(b"Q", b"BEGIN\x00")
        + pg(b"P", b"\x00INSERT INTO steps VALUES ($1)\x00\x00\x00")
        + pg(b"B", b"\x00\x00\x00\x00\x00\x01\x00\x00\x00\x04key7\x00\x00")
        + pg(b"E", b"\x00\x00\x00\x00\x00")
        + pg(b"Q", b"ROLLBACK\x00")
        + pg(b"Q", b"start transaction isolation level serializable\x00")
    )
    framer = PgClient()
    framer.startup = False
    msgs = [m for m in framer.feed(stream) if m.kind in ("Q", "E")]
    assert [m.text.split(b" \x00")[0] for m in msgs] == [
        b"BEGIN",
        b"INSERT INTO steps VALUES ($1)",
        b"ROLLBACK",
        b"start transaction isolation level serializable",
    ]
    assert b"key7" in msgs[1].text  # the bound parameters follow the SQL
    assert [(m.begin, m.rollback, m.commit) for m in msgs] == [
        (True, False, False),
        (False, False, False),
        (False, True, False),
        (True, False, False),
    ]


def test_postgres_server_ready_messages_carry_the_transaction_status() -> None:
    """ReadyForQuery messages are counted and their status kept, across partial reads."""
    s = PgServer()
    data = pg(b"C", b"INSERT 0 1\x00") + pg(b"Z", b"T") + pg(b"C", b"COMMIT\x00") + pg(b"Z", b"I")
    s.feed(data[:9])
    assert s.ready == 0
    s.feed(data[9:22])
    assert (s.ready, s.status) == (1, "T")
    s.feed(data[22:])
    assert (s.ready, s.status) == (2, "I")


def test_redis_commands_and_replies_are_counted_whole() -> None:
    """Commands (RESP arrays and inline) and replies (nested arrays, nulls, RESP3 maps; a
    push is not a reply) are framed across partial reads."""
    c = RespClient()
    cmds = (
        b"*1\r\n$5\r\nMULTI\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n"
        b"*1\r\n$4\r\nexec\r\nPING\r\n"
    )
    got = [m for i in range(0, len(cmds), 3) for m in c.feed(cmds[i : i + 3])]
    assert [(m.kind, m.commit) for m in got] == [
        ("MULTI", False),
        ("SET", False),
        ("EXEC", True),
        ("PING", False),
    ]
    s = RespServer()
    replies = (
        b"+OK\r\n+QUEUED\r\n*2\r\n$-1\r\n*1\r\n:5\r\n>2\r\n+a\r\n+b\r\n%1\r\n+k\r\n$1\r\nv\r\n"
    )
    s.feed(replies[:17])
    assert s.replies == 2
    s.feed(replies[17:])
    assert s.replies == 4


def test_bad_arguments_are_clear_errors() -> None:
    """A scheme it cannot speak, a fault for the other protocol or a bad count are refused."""
    with pytest.raises(ConfigError, match="scheme 'mysql'"):
        FaultProxy("mysql://127.0.0.1/db")
    with pytest.raises(ConfigError, match="needs a postgres proxy"):
        FaultProxy("redis://127.0.0.1:6379").drop_reply_to_commit()
    with pytest.raises(ConfigError, match="times must be"):
        FaultProxy("postgresql://127.0.0.1/test").drop_reply_to_commit(times=0)
    with pytest.raises(ConfigError, match="probability"):
        FaultProxy(("127.0.0.1", 1)).reset(probability=1.5)
    with pytest.raises(ConfigError, match="not a URL"):
        _ = FaultProxy(("127.0.0.1", 1)).url
    with pytest.raises(ConfigError, match="not a regular expression"):
        FaultProxy("redis://127.0.0.1:6379").drop_reply_to_exec(matching="(")


def test_the_url_keeps_credentials_but_the_repr_does_not() -> None:
    """proxy.url keeps user, password and database; repr shows only where it forwards."""
    with FaultProxy("postgresql://u:secret@127.0.0.1:5432/test?application_name=x") as proxy:
        assert proxy.url == f"postgresql://u:secret@127.0.0.1:{proxy.port}/test?application_name=x"
        assert "secret" not in repr(proxy)


# -- PostgreSQL ----------------------------------------------------------------------------


@pytest.fixture
def pg_table(pg_url: str) -> Iterator[tuple[str, str]]:
    """(url, table) in a schema of this test only, dropped after."""
    psycopg = pytest.importorskip("psycopg")
    schema = f"sf_proxy_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(f"CREATE TABLE {schema}.t (v int)")
    yield pg_url, f"{schema}.t"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


def rows(url: str, table: str) -> list[int]:
    import psycopg

    with psycopg.connect(url) as conn:
        return [r[0] for r in conn.execute(f"SELECT v FROM {table} ORDER BY v")]


@pytest.mark.services
def test_dropped_commit_reply_leaves_the_client_unsure_and_the_row_written(
    pg_table: tuple[str, str],
) -> None:
    """The client's commit fails with a lost connection, yet a direct connection sees the
    row: the transaction was applied. Simple query and extended protocol (a pipeline)."""
    import psycopg

    url, table = pg_table
    with FaultProxy(url) as proxy:
        with psycopg.connect(proxy.url) as conn:
            conn.execute(f"INSERT INTO {table} VALUES (1)")
            conn.commit()  # goes through
            conn.execute(f"INSERT INTO {table} VALUES (2)")
            proxy.drop_reply_to_commit()
            with pytest.raises(psycopg.OperationalError):
                conn.commit()
        assert rows(url, table) == [1, 2]
        conn = psycopg.connect(proxy.url)
        proxy.drop_reply_to_commit()
        with pytest.raises(psycopg.OperationalError), conn.pipeline():
            conn.execute(f"INSERT INTO {table} VALUES (3)")
            conn.commit()
        conn.close()
        assert rows(url, table) == [1, 2, 3]
        counts = proxy.counts()
    assert (counts.commits_seen, counts.replies_dropped, counts.connections) == (3, 2, 2)


@pytest.mark.services
def test_drop_reply_to_commit_by_count_and_by_seeded_probability(pg_table: tuple[str, str]) -> None:
    """times=2 drops the next two commit replies only; a probability drops some, as many
    as the clients saw fail, and every transaction was applied either way."""
    import psycopg

    url, table = pg_table

    def commit_each(proxy: FaultProxy, values: range) -> int:
        failed = 0
        for v in values:
            with psycopg.connect(proxy.url) as conn:
                conn.execute(f"INSERT INTO {table} VALUES ({v})")
                try:
                    conn.commit()
                except psycopg.OperationalError:
                    failed += 1
        return failed

    with FaultProxy(url) as proxy:
        proxy.drop_reply_to_commit(times=2)
        assert commit_each(proxy, range(0, 4)) == 2
        assert proxy.counts().replies_dropped == 2
    with FaultProxy(url, seed=3) as proxy:
        proxy.drop_reply_to_commit(times=None, probability=0.5)
        failed = commit_each(proxy, range(4, 14))
        assert 0 < failed < 10 and proxy.counts().replies_dropped == failed
    assert rows(url, table) == list(range(14))


@pytest.mark.services
def test_implicit_commits_and_matching_statements(pg_table: tuple[str, str]) -> None:
    """implicit=True drops the reply to a statement run on its own (autocommit), and
    ``matching`` picks which: a SELECT and a non-matching transaction pass, the matching
    INSERT is applied with its reply dropped."""
    import psycopg

    url, table = pg_table
    with FaultProxy(url) as proxy:
        proxy.drop_reply_to_commit(implicit=True, matching=rf"INSERT INTO {table}\b")
        with psycopg.connect(proxy.url, autocommit=True) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
            with pytest.raises(psycopg.OperationalError):
                conn.execute(f"INSERT INTO {table} VALUES (7)")
        assert rows(url, table) == [7]
        proxy.drop_reply_to_commit(matching=rf"INSERT INTO {table}\b")
        with psycopg.connect(proxy.url) as conn:
            conn.execute("SELECT 2")
            conn.commit()  # a transaction that does not match commits normally
            conn.execute(f"INSERT INTO {table} VALUES (8)")
            with pytest.raises(psycopg.OperationalError):
                conn.commit()
        assert rows(url, table) == [7, 8]
        assert proxy.counts().replies_dropped == 2


@pytest.mark.services
def test_a_store_on_postgres_resolves_the_unknown_outcome_of_a_dropped_commit(
    pg_url: str,
) -> None:
    """surefoot's PostgreSQL state store, through the proxy: a versioned write whose commit
    reply is dropped is found applied (its session ended, the write read back from the log)
    and answered with its version; the next write goes through. A transaction, which
    carries nothing to recognise it by, is reported as OutcomeUnknownError."""
    from surefoot import storage
    from surefoot.errors import OutcomeUnknownError
    from surefoot.statebus import Store

    url = f"{pg_url}?schema=sf_proxy_{uuid.uuid4().hex[:10]}"
    with FaultProxy(url) as proxy:
        store = Store(proxy.url)
        direct = Store(url)
        try:
            store.write("warm", 0)  # migrations and pool connections are made by now
            proxy.drop_reply_to_commit(implicit=True, matching="unsure-key")
            assert store.write("unsure-key", "v1", expect=0).version == 1
            entry = direct.read("unsure-key")
            assert entry is not None and (entry.value, entry.version) == ("v1", 1)
            assert store.write("unsure-key", "v2", expect=1).version == 2
            proxy.drop_reply_to_commit(matching="unsure-key")
            with pytest.raises(OutcomeUnknownError, match="may or may not"):
                store.txn({"unsure-key": 2}, [("put", "unsure-key", "v3")])
            assert proxy.counts().replies_dropped == 2
        finally:
            store.close()
            direct.close()
    st: Any = storage.open(url)
    st.db.drop_schema()
    st.close()


@pytest.mark.services
def test_reset_mid_transaction_rolls_back(pg_table: tuple[str, str]) -> None:
    """An RST inside a transaction: the client errs and the server rolled back."""
    import psycopg

    url, table = pg_table
    with FaultProxy(url) as proxy:
        conn = psycopg.connect(proxy.url)
        conn.execute(f"INSERT INTO {table} VALUES (1)")
        proxy.reset()
        with pytest.raises(psycopg.OperationalError):
            conn.execute(f"INSERT INTO {table} VALUES (2)")
            conn.commit()
        conn.close()
        assert proxy.counts().resets == 1
    assert rows(url, table) == []


@pytest.mark.services
def test_blackhole_times_out_a_client_and_heal_restores(pg_table: tuple[str, str]) -> None:
    """Connecting through a blackhole hits the client's connect timeout; after heal a new
    connection works."""
    import psycopg

    url, _ = pg_table
    with FaultProxy(url) as proxy:
        proxy.blackhole()
        with pytest.raises(psycopg.OperationalError, match="timeout"):
            psycopg.connect(proxy.url, connect_timeout=2)
        assert proxy.counts().held >= 1
        proxy.heal()
        with psycopg.connect(proxy.url, connect_timeout=5) as conn:
            assert conn.execute("SELECT 41 + 1").fetchone() == (42,)


# -- Redis -----------------------------------------------------------------------------------


@pytest.fixture
def redis_keys(redis_url: str) -> Iterator[tuple[str, Any, str]]:
    """(url, a direct client, a key prefix of this test only), keys deleted after."""
    redis = pytest.importorskip("redis")
    prefix = f"sf_proxy:{uuid.uuid4().hex[:10]}:"
    direct = redis.Redis.from_url(redis_url)
    yield redis_url, direct, prefix
    keys = list(direct.scan_iter(match=prefix + "*"))
    if keys:
        direct.delete(*keys)
    direct.close()


def no_retry_client(url: str, **kw: Any) -> Any:
    """A redis-py client that does not retry (redis-py retries lost connections by default,
    which would send the transaction again)."""
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    return redis.Redis.from_url(url, retry=Retry(NoBackoff(), 0), **kw)


@pytest.mark.services
def test_dropped_exec_and_script_replies_leave_the_writes_applied(
    redis_keys: tuple[str, Any, str],
) -> None:
    """MULTI/EXEC and EVAL through the proxy: the client gets a connection error, and a
    direct client sees every write applied."""
    import redis

    url, direct, p = redis_keys
    with FaultProxy(url) as proxy:
        r = no_retry_client(proxy.url)
        pipe = r.pipeline(transaction=True)
        pipe.set(p + "a", "1")
        pipe.incr(p + "n")
        proxy.drop_reply_to_exec()
        with pytest.raises(redis.ConnectionError):
            pipe.execute()
        assert (direct.get(p + "a"), direct.get(p + "n")) == (b"1", b"1")
        proxy.drop_reply_to_exec()
        with pytest.raises(redis.ConnectionError):
            r.eval("return redis.call('INCR', KEYS[1])", 1, p + "n")
        assert direct.get(p + "n") == b"2"
        assert r.incr(p + "n") == 3  # disarmed: replies flow again
        r.close()
        counts = proxy.counts()
    assert (counts.commits_seen, counts.replies_dropped) == (2, 2)


@pytest.mark.services
def test_drop_reply_to_exec_matching_picks_the_script_call(
    redis_keys: tuple[str, Any, str],
) -> None:
    """``matching`` on Redis: a script call on another key passes; the one on the
    matching key is applied and its reply dropped; a MULTI block matches by its commands."""
    import redis

    url, direct, p = redis_keys
    script = "return redis.call('INCR', KEYS[1])"
    with FaultProxy(url) as proxy:
        r = no_retry_client(proxy.url)
        proxy.drop_reply_to_exec(times=2, matching="target")
        assert r.eval(script, 1, p + "other") == 1
        with pytest.raises(redis.ConnectionError):
            r.eval(script, 1, p + "target")
        pipe = r.pipeline(transaction=True)
        pipe.incr(p + "other")
        assert pipe.execute() == [2]
        pipe = r.pipeline(transaction=True)
        pipe.incr(p + "target")
        with pytest.raises(redis.ConnectionError):
            pipe.execute()
        r.close()
        assert proxy.counts().replies_dropped == 2
    assert (direct.get(p + "other"), direct.get(p + "target")) == (b"2", b"2")


@pytest.mark.services
def test_reset_inside_multi_applies_nothing(redis_keys: tuple[str, Any, str]) -> None:
    """A reset after MULTI, before EXEC: the queued transaction never runs."""
    import redis

    url, direct, p = redis_keys
    with FaultProxy(url) as proxy:
        r = no_retry_client(proxy.url)
        proxy.reset()
        pipe = r.pipeline(transaction=True)
        pipe.set(p + "a", "1")
        with pytest.raises(redis.ConnectionError):
            pipe.execute()
        r.close()
        assert proxy.counts().resets == 1
    assert direct.get(p + "a") is None


@pytest.mark.services
def test_blackhole_and_delay_time_out_a_client_and_heal_restores(
    redis_keys: tuple[str, Any, str],
) -> None:
    """A client with a short socket timeout times out in a blackhole and behind a long
    delay; after heal the same proxy answers."""
    import redis

    url, direct, p = redis_keys
    direct.set(p + "k", "v")
    with FaultProxy(url) as proxy:
        r = no_retry_client(proxy.url, socket_timeout=0.5)
        assert r.get(p + "k") == b"v"
        proxy.blackhole()
        with pytest.raises(redis.TimeoutError):
            r.get(p + "k")
        proxy.heal()
        r.close()
        proxy.delay(3.0)
        r = no_retry_client(proxy.url, socket_timeout=0.5)
        with pytest.raises(redis.TimeoutError):
            r.get(p + "k")
        r.close()
        proxy.heal()
        r = no_retry_client(proxy.url, socket_timeout=5)
        assert r.get(p + "k") == b"v"
        r.close()
        counts = proxy.counts()
    assert counts.held >= 1 and counts.delayed >= 1
