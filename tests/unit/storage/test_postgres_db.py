"""PostgresDB: URLs, error translation, migrations, counters, reconnects, LISTEN/NOTIFY."""

from __future__ import annotations

import socket
import threading
import uuid
from collections.abc import Iterator

import pytest

from surefoot import storage
from surefoot.errors import (
    ConfigError,
    CorruptionError,
    SchemaVersionError,
    StoreUnavailableError,
)
from surefoot.storage.postgres import PostgresStorage

pytestmark = pytest.mark.services


def _schema() -> str:
    return f"sf_t_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def pg(pg_url: str) -> Iterator[PostgresStorage]:
    """A PostgresStorage on a fresh schema, dropped afterwards."""
    st = storage.open(f"{pg_url}?schema={_schema()}&reconnect_timeout=5")
    assert isinstance(st, PostgresStorage)
    yield st
    st.db.drop_schema()
    st.close()


class Proxy:
    """A TCP proxy to PostgreSQL that a test can cut, as if the server went away."""

    def __init__(self, port: int = 5432) -> None:
        self.target = ("127.0.0.1", port)
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.conns: list[socket.socket] = []
        self.up = True
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            if not self.up:
                client.close()
                continue
            server = socket.create_connection(self.target)
            self.conns += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        a.close()  # each direction's thread closes its source; the other closes the other

    def cut(self) -> None:
        """Refuse new connections and break the open ones."""
        self.up = False
        for s in self.conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.conns.clear()

    def restore(self) -> None:
        self.up = True

    def close(self) -> None:
        self.cut()
        self.sock.close()


def test_wrong_port_is_store_unavailable_with_hint_and_cause() -> None:
    """A server that is not there fails at open, naming the URL and what to check."""
    with pytest.raises(StoreUnavailableError) as info:
        storage.open(
            "postgresql://postgres:secret@127.0.0.1:1/test?connect_timeout=2&reconnect_timeout=0"
        )
    msg = str(info.value)
    assert "secret" not in msg and "***" in msg
    assert "server is running" in msg
    assert info.value.__cause__ is not None


def test_missing_database_and_role_say_what_to_check(pg_url: str) -> None:
    """A missing database or role gets a message naming the fix."""
    base = pg_url.rsplit("/", 1)[0]
    with pytest.raises(StoreUnavailableError, match="create it"):
        storage.open(f"{base}/sf_no_such_db")
    nobody = base.replace("postgres@", "sf_no_such_role@")
    with pytest.raises(StoreUnavailableError, match="user name"):
        storage.open(f"{nobody}/test")


@pytest.mark.parametrize(
    "query",
    ["schema=Bad-Name", "pool_min=x", "pool_max=0", "pool_min=5&pool_max=2", "connect_timeout=0"],
)
def test_bad_options_are_config_errors(pg_url: str, query: str) -> None:
    """Bad query options raise ConfigError naming the option."""
    with pytest.raises(ConfigError):
        storage.open(f"{pg_url}?{query}")


def test_libpq_options_pass_through(pg_url: str) -> None:
    """Options surefoot does not know (application_name) reach libpq; its own are stripped."""
    schema = _schema()
    st = storage.open(f"{pg_url}?schema={schema}&application_name=sf_probe_app&pool_max=2")
    assert isinstance(st, PostgresStorage)
    try:
        rows = st.db.execute("SELECT current_setting('application_name')", write=False)
        assert rows == [("sf_probe_app",)]
        assert "schema=" not in st.db.conninfo and "pool_max" not in st.db.conninfo
    finally:
        st.close()


def test_migrations_apply_in_order_once(pg: PostgresStorage) -> None:
    """Numbered migrations run once each; a second migrate is a no-op."""
    db = pg.db
    steps = ["CREATE TABLE t (a INT PRIMARY KEY)", "ALTER TABLE t ADD COLUMN b TEXT"]
    db.migrate("probe", steps)
    db.execute("INSERT INTO t VALUES (1, 'x')")
    db._migrated.clear()  # as a new process would
    db.migrate("probe", steps)  # would fail on a re-run of ALTER TABLE
    assert db.execute("SELECT version FROM surefoot_schema WHERE component='probe'") == [(2,)]
    db.migrate("probe", [*steps, "ALTER TABLE t ADD COLUMN c INT"])
    db._migrated.clear()
    db.migrate("probe", [*steps, "ALTER TABLE t ADD COLUMN c INT"])
    assert db.execute("SELECT a, b, c FROM t") == [(1, "x", None)]


def test_newer_schema_version_fails_clearly(pg: PostgresStorage) -> None:
    """A schema written by a newer surefoot raises SchemaVersionError and changes nothing."""
    db = pg.db
    db.migrate("probe", ["CREATE TABLE t (a INT)"])
    db.execute("UPDATE surefoot_schema SET version = 7 WHERE component = 'probe'")
    db._migrated.clear()
    with pytest.raises(SchemaVersionError, match="upgrade surefoot"):
        db.migrate("probe", ["CREATE TABLE t (a INT)"])
    assert db.execute("SELECT version FROM surefoot_schema WHERE component='probe'") == [(7,)]


def test_foreign_schema_is_left_untouched(pg_url: str) -> None:
    """A schema with someone else's tables (no surefoot_schema) is refused, not modified."""
    schema = _schema()
    st = storage.open(f"{pg_url}?schema={schema}")
    assert isinstance(st, PostgresStorage)
    try:
        st.db.execute(f"CREATE SCHEMA {schema}")
        st.db.execute(f"CREATE TABLE {schema}.theirs (x INT)")
        with pytest.raises(SchemaVersionError, match="not a surefoot schema"):
            st.db.migrate("probe", ["CREATE TABLE t (a INT)"])
        tables = st.db.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema=%s", (schema,)
        )
        assert tables == [("theirs",)]
    finally:
        st.db.drop_schema()
        st.close()


def test_concurrent_migrations_do_not_race(pg_url: str) -> None:
    """Four processes' worth of stores migrating at once all succeed (advisory lock)."""
    schema = _schema()
    stores = [storage.open(f"{pg_url}?schema={schema}&pool_max=2") for _ in range(4)]
    errors: list[BaseException] = []

    def go(st: PostgresStorage) -> None:
        try:
            st.db.migrate("probe", ["CREATE TABLE t (a INT)", "CREATE INDEX t_a ON t(a)"])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=go, args=(st,)) for st in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    try:
        assert errors == []
        rows = stores[0].db.execute("SELECT component, version FROM surefoot_schema")
        assert rows == [("probe", 2)]
    finally:
        stores[0].db.drop_schema()
        for st in stores:
            st.close()


def test_commit_counter_counts_writes_not_reads(pg: PostgresStorage) -> None:
    """Each write statement counts one commit; reads count none."""
    db = pg.db
    db.migrate("probe", ["CREATE TABLE t (a INT)"])
    before = db.commits
    for i in range(3):
        db.execute("INSERT INTO t VALUES (%s)", (i,))
    db.execute("SELECT count(*) FROM t", write=False)
    assert db.commits - before == 3


def test_listen_notify_wakes_and_times_out(pg: PostgresStorage) -> None:
    """A listener returns False on timeout and True when notified on its channel only."""
    with pg.db.listener("wake") as lis:
        assert lis.wait(0.05) is False
        pg.db.notify("other", "x")
        assert lis.wait(0.05) is False
        pg.db.notify("wake", "x")
        assert lis.wait(5.0) is True
        assert lis.received == 1


def test_broken_connections_reconnect_for_reads_and_refuse_blind_writes(pg_url: str) -> None:
    """After the server drops every connection, reads reconnect; a non-idempotent write that
    was in flight says its outcome is unknown; the next write succeeds on a new connection."""
    proxy = Proxy()
    schema = _schema()
    url = pg_url.replace(":5432/", f":{proxy.port}/")
    st = storage.open(f"{url}?schema={schema}&pool_min=2&pool_max=2&reconnect_timeout=10")
    assert isinstance(st, PostgresStorage)
    db = st.db
    try:
        db.migrate("probe", ["CREATE TABLE t (a INT)"])
        db.execute("INSERT INTO t VALUES (1)")
        proxy.cut()
        proxy.restore()
        assert db.execute("SELECT count(*) FROM t", write=False) == [(1,)]
        proxy.cut()
        proxy.restore()
        with pytest.raises(StoreUnavailableError, match="may or may not"):
            db.execute("INSERT INTO t VALUES (2)")
        db.execute("INSERT INTO t VALUES (3)")
        assert db.execute("SELECT a FROM t ORDER BY a", write=False) == [(1,), (3,)]
    finally:
        db.drop_schema()
        st.close()
        proxy.close()


def test_server_gone_fails_after_bounded_reconnect(pg_url: str) -> None:
    """With the server unreachable, a call gives up after reconnect_timeout, clearly."""
    proxy = Proxy()
    url = pg_url.replace(":5432/", f":{proxy.port}/")
    st = storage.open(f"{url}?schema={_schema()}&reconnect_timeout=1&connect_timeout=1")
    assert isinstance(st, PostgresStorage)
    try:
        st.db.execute("SELECT 1", write=False)
        proxy.cut()
        with pytest.raises(StoreUnavailableError, match="cannot reach PostgreSQL"):
            st.db.execute("SELECT 1", write=False)
    finally:
        st.close()
        proxy.close()


def test_schema_the_user_may_not_create_is_a_clear_error(pg: PostgresStorage, pg_url: str) -> None:
    """A user without CREATE rights gets a message saying how to create the schema."""
    role = f"sf_t_role_{uuid.uuid4().hex[:8]}"
    pg.db.execute(f"CREATE ROLE {role} LOGIN")
    try:
        url = pg_url.replace("postgres@", f"{role}@")
        st = storage.open(f"{url}?schema=sf_t_{uuid.uuid4().hex[:12]}")
        assert isinstance(st, PostgresStorage)
        try:
            with pytest.raises(StoreUnavailableError, match="CREATE SCHEMA") as info:
                st.db.migrate("probe", ["CREATE TABLE t (a INT)"])
            assert info.value.__cause__ is not None
        finally:
            st.close()
    finally:
        pg.db.execute(f"DROP ROLE {role}")


def test_listener_survives_a_dropped_connection(pg: PostgresStorage) -> None:
    """When its connection is killed the listener waits out the timeout (the caller polls),
    then reconnects and is woken by the next notification."""
    with pg.db.listener("wake") as lis:
        assert lis.wait(0.01) is False
        pid = lis._conn.info.backend_pid
        pg.db.execute("SELECT pg_terminate_backend(%s)", (pid,), write=False)
        assert lis.wait(0.01) is False
        assert lis.wait(0.01) is False  # reconnected and listening again
        pg.db.notify("wake")
        assert lis.wait(5.0) is True


def test_open_waits_for_a_server_that_is_starting(pg_url: str) -> None:
    """A server that refuses connections at open (restarting) is waited for, within
    reconnect_timeout; the store opens once it answers."""
    proxy = Proxy()
    proxy.cut()
    url = pg_url.replace(":5432/", f":{proxy.port}/")
    timer = threading.Timer(0.5, proxy.restore)
    timer.start()
    try:
        st = storage.open(f"{url}?schema={_schema()}&reconnect_timeout=20")
        assert isinstance(st, PostgresStorage)
        assert st.db.execute("SELECT 1", write=False) == [(1,)]
        st.close()
    finally:
        timer.cancel()
        proxy.close()


def test_open_does_not_wait_for_a_wrong_database(pg_url: str) -> None:
    """A definite refusal (unknown database) fails at once, even with a long reconnect window."""
    from surefoot import FakeClock

    base = pg_url.rsplit("/", 1)[0]
    clock = FakeClock()
    with pytest.raises(StoreUnavailableError, match="does not exist"):
        PostgresStorage(f"{base}/sf_no_such_db?reconnect_timeout=60", clock=clock)
    assert clock.sleeps == []


def _pid(db: object) -> int:
    rows = db.execute("SELECT pg_backend_pid()", write=False)  # type: ignore[attr-defined]
    return int(rows[0][0])


def test_statements_one_after_another_reuse_the_lane_not_the_pool(pg: PostgresStorage) -> None:
    """Statements sent one after another take the lane's connection: one session, and no
    connection asked of the pool after the first."""
    db = pg.db
    first = _pid(db)
    asked = db.pool.get_stats()["requests_num"]
    assert {_pid(db) for _ in range(20)} == {first}
    assert db.pool.get_stats()["requests_num"] == asked


def test_a_thread_that_finds_the_lane_busy_uses_the_pool(pg: PostgresStorage) -> None:
    """While one thread holds the lane, another thread's statement runs on a pooled
    connection (another session) instead of waiting for it."""
    db = pg.db
    lane = _pid(db)
    inside, release = threading.Event(), threading.Event()

    def hold(conn: object) -> int:
        inside.set()
        release.wait(10)
        return int(conn.info.backend_pid)  # type: ignore[attr-defined]

    held: list[int] = []
    t = threading.Thread(target=lambda: held.append(db.run(hold, write=False)))
    t.start()
    try:
        assert inside.wait(10)
        assert _pid(db) != lane
    finally:
        release.set()
        t.join(10)
    assert held == [lane]


def test_a_pool_of_one_connection_has_no_lane(pg_url: str) -> None:
    """With pool_max=1 the one connection stays the pool's (a lane would starve the others)."""
    st = storage.open(f"{pg_url}?schema={_schema()}&pool_min=1&pool_max=1")
    assert isinstance(st, PostgresStorage)
    try:
        _pid(st.db)
        asked = st.db.pool.get_stats()["requests_num"]
        _pid(st.db)
        assert st.db.pool.get_stats()["requests_num"] == asked + 1
    finally:
        st.close()


def test_a_lane_whose_session_was_killed_is_replaced(pg: PostgresStorage, pg_url: str) -> None:
    """The server ends the lane's session; the next statement reconnects on a new one."""
    import psycopg

    db = pg.db
    lane = _pid(db)
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (lane,))
    assert _pid(db) not in (lane, 0)


def test_closing_ends_the_lanes_session_too(pg_url: str) -> None:
    """close() ends every session, the lane's included (none is left on the server)."""
    import psycopg

    st = storage.open(f"{pg_url}?schema={_schema()}")
    assert isinstance(st, PostgresStorage)
    lane = _pid(st.db)
    st.close()
    with psycopg.connect(pg_url, autocommit=True) as admin:
        rows = admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (lane,))
        assert rows.fetchall() == []


def test_a_schema_record_below_its_tables_is_refused_as_damage(pg: PostgresStorage) -> None:
    """Issue 27, section 4: a surefoot_schema row lowered (damaged or edited) made the
    migration run again and fail with psycopg's DuplicateColumn; now CorruptionError naming
    the schema, the recorded version and what was found, and nothing changed."""
    db = pg.db
    steps = ["CREATE TABLE t (a INT)", "ALTER TABLE t ADD COLUMN b INT", "CREATE INDEX ti ON t(a)"]
    db.migrate("probe", steps)
    db.execute("UPDATE surefoot_schema SET version = 1 WHERE component = 'probe'")
    db._migrated.clear()
    with pytest.raises(CorruptionError) as caught:
        db.migrate("probe", steps)
    text = str(caught.value)
    assert db.schema in text and "says version 1" in text and '"b"' in text
    assert "restore the schema from a backup" in text.lower()
    assert db.execute("SELECT version FROM surefoot_schema WHERE component='probe'") == [(1,)]
    db.execute("UPDATE surefoot_schema SET version = 0 WHERE component = 'probe'")
    with pytest.raises(CorruptionError, match="the version is 0"):
        db.migrate("probe", steps)


def test_no_record_of_tables_that_exist_is_a_schema_version_error(pg: PostgresStorage) -> None:
    """The row gone but the tables there: another program's, or a lost record; not the
    driver's DuplicateTable."""
    db = pg.db
    db.migrate("probe", ["CREATE TABLE t (a INT)"])
    db.execute("DELETE FROM surefoot_schema WHERE component = 'probe'")
    db._migrated.clear()
    with pytest.raises(SchemaVersionError, match="did not create"):
        db.migrate("probe", ["CREATE TABLE t (a INT)"])


class _PgConnRenamed:
    """``pgconn`` of a connection, with ``backend_pid`` replaced."""

    def __init__(self, pgconn: object, pid: int) -> None:
        self._pgconn = pgconn
        self.backend_pid = pid

    def __getattr__(self, name: str) -> object:
        return getattr(self._pgconn, name)


class _Renamed:
    """A pooled connection whose pid now names another session (as after a server restart,
    where pids are handed out again): all its own but ``pgconn.backend_pid``."""

    def __init__(self, conn: object, pid: int) -> None:
        self._conn = conn
        self.pgconn = _PgConnRenamed(conn.pgconn, pid)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._conn, name)


def test_a_lost_replys_sender_is_terminated_by_pid_and_start_never_pid_alone(
    pg: PostgresStorage, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a lost commit reply the sending session is terminated before the write is looked
    for. If its pid now names another live session of the same user and database (a server
    restart hands pids out again), that session is left alone: the sender is named by its
    pid and its backend_start. The sender itself, both matching, is terminated."""
    import psycopg

    db = pg.db
    other = psycopg.connect(pg_url, autocommit=True)  # unrelated: same user, same database
    real = db.pool.getconn()  # the sender

    def lost(conn: object) -> None:
        raise psycopg.OperationalError("server closed the connection unexpectedly")

    try:
        renamed = _Renamed(real, other.pgconn.backend_pid)
        monkeypatch.setattr(db, "_take", lambda: (renamed, False))
        monkeypatch.setattr(db, "_give", lambda conn, lane: None)
        assert db.run(lost, resolve=lambda conn: "found") == "found"
        assert other.execute("SELECT 1").fetchone() == (1,)  # not terminated
        monkeypatch.setattr(db, "_take", lambda: (real, False))
        assert db.run(lost, resolve=lambda conn: "found") == "found"
        with psycopg.connect(pg_url, autocommit=True) as admin:
            rows = admin.execute(
                "SELECT 1 FROM pg_stat_activity WHERE pid = %s", (real.pgconn.backend_pid,)
            )
            assert rows.fetchall() == []  # the sender, named by both, is gone
    finally:
        other.close()
        db.pool.putconn(real)
