"""PostgreSQL done right: psycopg 3, a connection pool, one schema, numbered migrations.

Connections are in autocommit mode, so a single statement is one round trip and one commit;
work that needs several statements runs in an explicit transaction (``run(fn, tx=True)``).
Statements sent one after another share one connection kept out of the pool (the lane, see
``_take``), so a run stepping alone pays no pool bookkeeping per step.
Losing the server is handled in one place, :meth:`PostgresDB.run`:

* no connection could be had (server down, restarting, pool exhausted): back off and try
  again until ``reconnect_timeout`` has passed, then raise ``StoreUnavailableError``;
* the connection broke in the middle of a transaction, before ``COMMIT`` was sent: nothing was
  applied, so the whole transaction is run again on a fresh connection;
* the connection broke while a write was being committed: the outcome is unknown. A write
  the caller declared idempotent (dedup by id, insert-if-absent) is sent again. A write that
  can be recognised (``resolve``) is looked for: first the old session is made to end (it is
  terminated, and waited for until ``pg_stat_activity`` no longer shows it, so nothing of it
  can still commit), then ``resolve`` reads whether the write landed: found, its answer is
  returned; not found, it is sent again. Otherwise, or when the old session cannot be seen
  gone within ``reconnect_timeout``, ``OutcomeUnknownError`` says so and the caller decides.
  The old session is named by its pid and its ``backend_start`` (read when the connection
  was made, in the statement that sets its ``search_path``): after a server restart, or
  once the old backend has exited, the pid alone could name another, unrelated session.

Serialization failures and deadlocks roll the transaction back and are retried the same way.
"""

from __future__ import annotations

import os
import random
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ...backoff import RECONNECT
from ...clock import Clock, SystemClock
from ...errors import (
    ConfigError,
    CorruptionError,
    MissingExtraError,
    OutcomeUnknownError,
    SchemaVersionError,
    StoreUnavailableError,
)
from ..checks import DEFAULT_MAX_VALUE_BYTES, value_limit
from ..url import StorageURL, redact
from ._prepared import PreparedWrite

__all__ = ["NOT_APPLIED", "OPTIONS", "Listener", "PostgresDB", "import_psycopg"]

T = TypeVar("T")

#: What a ``resolve`` function returns when the write it looks for did not land.
NOT_APPLIED: Any = object()

#: URL query options read by surefoot (all others are passed to libpq, like ``sslmode``).
OPTIONS = {
    "schema": "surefoot",  # where surefoot's tables live; one schema per deployment or test
    "pool_min": "1",  # connections the pool keeps open
    "pool_max": "10",  # most connections the pool opens (per process)
    "connect_timeout": "5",  # seconds for one connection attempt
    "reconnect_timeout": "30",  # seconds of bounded back-off before StoreUnavailableError
    "max_value_bytes": str(DEFAULT_MAX_VALUE_BYTES),  # largest value or step result; 0: none
}

_OK = 0  # psycopg.pq.ConnStatus.OK
_IDLE = 0  # psycopg.pq.TransactionStatus.IDLE
_TUPLES_OK = 2  # psycopg.pq.ExecStatus.TUPLES_OK: a statement that returned rows
_LANE_TURN = 60.0  # seconds a connection stays the lane's before it goes back to the pool

# SQLSTATEs of a migration finding what it creates already there: duplicate_table (tables,
# indexes), duplicate_column, duplicate_object (constraints, triggers), duplicate_function
_DUPLICATE = frozenset({"42P07", "42701", "42710", "42723"})

# Run on each new pooled connection: its search_path, and its backend's start time.
_CONFIGURE = (
    "SELECT set_config('search_path', %s, false), "
    "(SELECT backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid())"
)

_SCHEMA_RE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")

# libpq messages of a server that is not answering *yet*: worth waiting for at open.
_TRANSIENT = (
    "connection refused",
    "timeout expired",
    "timed out",
    "starting up",
    "shutting down",
    "in recovery",
    "closed the connection unexpectedly",
)


def import_psycopg() -> tuple[Any, Any]:
    """Import ``psycopg`` and ``psycopg_pool`` lazily.

    Raises:
        MissingExtraError: the ``postgres`` extra is not installed.
    """
    try:
        import psycopg
        import psycopg_pool
    except ImportError as exc:
        raise MissingExtraError("postgres", "postgresql:// stores") from exc
    return psycopg, psycopg_pool


def _hint(message: str) -> str:
    """What to check, from libpq's message."""
    low = message.lower()
    if "password authentication failed" in low or "no password supplied" in low:
        return "check the user name and password in the URL"
    if "role" in low and "does not exist" in low:
        return "check the user name in the URL (that role does not exist)"
    if "database" in low and "does not exist" in low:
        return "check the database name in the URL, or create it (createdb NAME)"
    if "could not translate host name" in low or "failed to resolve host" in low:
        return "check the host name in the URL"
    if "connection refused" in low or "timeout" in low or "timed out" in low:
        return "check that the server is running and listening on that host and port"
    if "starting up" in low or "shutting down" in low or "recovery" in low:
        return "the server is restarting; try again shortly"
    return "check the URL and that the server accepts connections"


def _sender(conn: Any) -> tuple[int, Any]:
    """Who ``conn`` is on the server: its backend's pid and ``backend_start`` (``None`` on a
    connection the pool's ``configure`` did not see)."""
    return conn.pgconn.backend_pid, getattr(conn, "surefoot_backend_start", None)


class PostgresDB:
    """One PostgreSQL database (and one schema in it), shared by a ``PostgresStorage``.

    Args:
        parsed: the parsed ``postgresql://`` URL; see :data:`OPTIONS` for its query options.
        clock: waits between reconnect attempts (``SystemClock`` by default).

    Attributes:
        url: the URL without its password.
        schema: the schema holding surefoot's tables.
        commits: statements and transactions committed through this object (tests count them).
        round_trips: statements sent to the server (tests count them).

    Raises:
        ConfigError: a bad option value.
        MissingExtraError: psycopg is not installed.
        StoreUnavailableError: the server cannot be reached with this URL.
    """

    def __init__(self, parsed: StorageURL, *, clock: Clock | None = None) -> None:
        self.psycopg, pool_mod = import_psycopg()
        self.url = redact(parsed.url)
        opts = {k: parsed.options.get(k, v) for k, v in OPTIONS.items()}
        self.schema = opts["schema"]
        if not _SCHEMA_RE.match(self.schema):
            raise ConfigError(
                f"schema must be a lower-case SQL identifier (letters, digits, _), got "
                f"{self.schema!r} in {self.url!r}"
            )
        self.pool_min = self._int(opts, "pool_min", 0)
        self.pool_max = self._int(opts, "pool_max", 1)
        if self.pool_max < self.pool_min:
            raise ConfigError(
                f"pool_max ({self.pool_max}) must be >= pool_min ({self.pool_min}) in {self.url!r}"
            )
        self.connect_timeout = self._int(opts, "connect_timeout", 1)
        self.reconnect_timeout = float(self._int(opts, "reconnect_timeout", 0))
        self.max_value_bytes = value_limit(self.url, opts)
        self.clock: Clock = clock or SystemClock()
        self.commits = 0
        self.round_trips = 0
        self._lock = threading.Lock()
        self._rng = random.Random(f"{os.getpid()}:{self.url}")
        self._migrated: set[str] = set()
        self._prepared: dict[tuple[str, tuple[str, ...], bool], PreparedWrite] = {}
        self._lane: Any = None  # see _take
        self._lane_until = 0.0
        self._lane_lock = threading.Lock()
        self._clock_conn: Any = None  # see server_time
        self._clock_lock = threading.Lock()
        self._lane_on = self.pool_max >= 2  # one connection alone stays the pool's
        self.conninfo = self._conninfo(parsed.url)
        self._probe()
        schema = self.schema

        def configure(conn: Any) -> None:
            # One round trip, as ``SET search_path`` alone was: the schema, and when this
            # backend started, which with its pid names it alone (see ``_resolve``).
            row = conn.execute(_CONFIGURE, (schema,)).fetchone()
            conn.surefoot_backend_start = row[1]

        self.pool = pool_mod.ConnectionPool(
            self.conninfo,
            min_size=self.pool_min,
            max_size=self.pool_max,
            kwargs={"autocommit": True, "connect_timeout": self.connect_timeout},
            configure=configure,
            timeout=max(1.0, float(self.connect_timeout)),
            open=False,
            name=f"surefoot-{schema}",
        )
        self.pool.open(wait=False)

    def _int(self, opts: dict[str, str], name: str, minimum: int) -> int:
        try:
            value = int(opts[name])
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise ConfigError(
                f"{name} must be a whole number >= {minimum}, got {opts[name]!r} in {self.url!r}"
            )
        return value

    @staticmethod
    def _conninfo(url: str) -> str:
        """The URL for libpq: surefoot's own query options removed."""
        parts = urlsplit(url)
        query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)]
        kept = [(k, v) for k, v in query if k not in OPTIONS]
        scheme = "postgresql"
        return urlunsplit((scheme, parts.netloc, parts.path, urlencode(kept), parts.fragment))

    def _probe(self) -> None:
        """Connect once, so a wrong URL fails now with a clear message.

        A server that is not answering yet (refused, timed out, starting up or shutting
        down: a restart, or a worker started before its database) is retried with the same
        bounded back-off for up to ``reconnect_timeout``; wrong credentials, an unknown
        database or host fail at once. ``?reconnect_timeout=0`` fails at once in every case.
        """
        deadline = self.clock.monotonic() + self.reconnect_timeout
        failed = 0
        while True:
            try:
                conn = self.psycopg.connect(self.conninfo, connect_timeout=self.connect_timeout)
            except self.psycopg.Error as exc:
                failed += 1
                text = str(exc).lower()
                transient = any(m in text for m in _TRANSIENT)
                if not transient or self.clock.monotonic() + RECONNECT.ceiling(failed) > deadline:
                    raise self.unavailable(exc) from exc
                self.clock.sleep(RECONNECT.wait(failed, self._rng))
                continue
            conn.close()
            return

    def unavailable(self, exc: BaseException, doing: str = "connect to") -> StoreUnavailableError:
        """A ``StoreUnavailableError`` for ``exc`` naming the URL and what to check."""
        text = " ".join(str(exc).split()).rstrip(" .?!")
        hint = _hint(text)
        return StoreUnavailableError(
            self.url,
            f"cannot {doing} PostgreSQL at {self.url!r}: {text}. {hint[0].upper()}{hint[1:]}.",
        )

    def close(self) -> None:
        """Close the pool and every connection in it (and the clock's)."""
        self._drop_lane(5.0)
        self.pool.close()
        with self._clock_lock:
            if self._clock_conn is not None:
                self._clock_conn.close()
                self._clock_conn = None

    # -- running statements ------------------------------------------------------------

    def _retryable_rollback(self, exc: BaseException) -> bool:
        errors = self.psycopg.errors
        return isinstance(exc, errors.SerializationFailure | errors.DeadlockDetected)

    def run(
        self,
        fn: Callable[[Any], T],
        *,
        tx: bool = False,
        write: bool = True,
        idempotent: bool = False,
        resolve: Callable[[Any], Any] | None = None,
    ) -> T:
        """Run ``fn(conn)`` on a pooled connection, reconnecting within ``reconnect_timeout``.

        Args:
            fn: does the work; gets an autocommit ``psycopg.Connection``.
            tx: run ``fn`` inside one transaction (``BEGIN`` … ``COMMIT``).
            write: the work writes (counted in ``commits``).
            idempotent: sending ``fn`` again after a lost reply is safe (it leaves the same
                state as once, or one the protocol tolerates, like a claimed run whose lease
                then expires), so it is retried when the connection breaks while committing.
            resolve: for a write that is not idempotent but can be recognised:
                ``resolve(conn)`` returns what ``fn`` would have returned if the write is
                in the database, else ``NOT_APPLIED``; it runs after the session that sent
                the write has ended (see the module's docstring).

        Raises:
            StoreUnavailableError: no connection within ``reconnect_timeout``.
            OutcomeUnknownError: the connection broke while a non-idempotent write was
                committing, and whether it landed could not be found out.
        """
        psycopg = self.psycopg
        deadline = self.clock.monotonic() + self.reconnect_timeout
        failed = 0
        while True:
            phase = "connect"
            try:
                conn, lane = self._take()
                sender = _sender(conn) if resolve is not None else (0, None)
                try:
                    phase = "body"
                    if tx:
                        with conn.transaction():
                            result = fn(conn)
                            phase = "commit"
                    else:
                        phase = "commit"  # in autocommit the statement is its own commit
                        result = fn(conn)
                        if conn.pgconn.transaction_status != _IDLE:
                            conn.commit()  # ``fn`` began a transaction: as ``with conn``
                except BaseException:
                    if not conn.closed:
                        try:  # as ``with conn``: nothing of a failed ``fn`` stays open
                            conn.rollback()
                        except Exception:
                            pass
                    raise
                finally:
                    self._give(conn, lane)
                if write:
                    with self._lock:
                        self.commits += 1
                return result
            except psycopg.Error as exc:
                lost = isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError)
                rolled_back = self._retryable_rollback(exc)
                if not (lost or rolled_back or phase == "connect"):
                    raise
                if lost:  # the other pooled connections are likely stale too (server restart)
                    self._purge()
                if lost and phase == "commit" and write and not idempotent and not rolled_back:
                    found = self._resolve(sender, resolve, exc, deadline)
                    if found is not NOT_APPLIED:
                        if write:
                            with self._lock:
                                self.commits += 1
                        return found  # type: ignore[no-any-return]
                    # Not there, and the session that sent it is gone: sending it again
                    # cannot make it land twice.
                last: BaseException = exc
            except self._pool_timeout() as exc:
                last = exc
            failed += 1
            if self.clock.monotonic() + RECONNECT.ceiling(failed) > deadline:
                raise self.unavailable(last, "reach") from last
            # Bounded back-off (the core schedule), seeded per process so workers
            # reconnecting after a restart spread out.
            self.clock.sleep(RECONNECT.wait(failed, self._rng))

    def _resolve(
        self,
        sender: tuple[int, Any],
        resolve: Callable[[Any], Any] | None,
        exc: BaseException,
        deadline: float,
    ) -> Any:
        """Whether a write whose commit answer was lost landed: its answer, or NOT_APPLIED.

        The session that sent it, ``sender`` (its pid and ``backend_start``), is terminated
        (only if it is this user's, in this database, and not the asking session) and waited
        for until ``pg_stat_activity`` no longer lists it: a backend leaves that view after
        its last transaction committed or rolled back, so from then on the write is in the
        database or never will be. Both must match: after a server restart (or once the
        sender exited) its pid may be another session's, which is left alone.
        """
        pid, started = sender
        text = " ".join(str(exc).split())
        why = (
            f"lost the connection to PostgreSQL at {self.url!r} while a write was committing "
            f"({text}); it may or may not have been applied"
        )
        if resolve is None or not pid or started is None:
            raise OutcomeUnknownError(
                self.url, f"{why}. Read the current state before writing again."
            ) from exc
        failed = 0
        while True:
            try:
                with self.pool.connection() as conn:
                    conn.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = %s "
                        "AND backend_start = %s AND pid <> pg_backend_pid() "
                        "AND datname = current_database() AND usename = current_user",
                        (pid, started),
                    )
                    gone = conn.execute(
                        "SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = %s "
                        "AND backend_start = %s)",
                        (pid, started),
                    ).fetchone()[0]
                    if gone:
                        return resolve(conn)
            except self.psycopg.Error:
                self._purge()
            except self._pool_timeout():
                pass
            failed += 1
            if self.clock.monotonic() + RECONNECT.ceiling(failed) > deadline:
                raise OutcomeUnknownError(
                    self.url,
                    f"{why}, and its session (backend {pid}) could not be seen ended within "
                    f"reconnect_timeout ({self.reconnect_timeout:g} s) to find out. Read the "
                    "current state before writing again.",
                ) from exc
            self.clock.sleep(RECONNECT.wait(failed, self._rng))

    # The lane: one connection kept out of the pool for whichever thread finds it free.
    # Taking a pooled connection costs ~28,000 instructions of psycopg_pool (getconn and
    # putconn: stats, logging calls, its lock and deque), ``pool.connection()`` ~54,000;
    # the lane's lock next to nothing: a journalled step's ``commit`` went from 68,600 to
    # 43,800 instructions with it (callgrind, 2026-12-01; 182,000 before the prepared
    # statement). A run stepping alone, the common case, always finds the lane free;
    # threads that find it busy use the pool as before. It goes back to the pool when its
    # connection broke or was left in a transaction, every ``_LANE_TURN`` seconds (so the
    # pool's ``max_lifetime`` still renews it), and when the database closes. With
    # ``pool_max=1`` there is no lane: it would hold the only connection.

    def _take(self) -> tuple[Any, bool]:
        """A connection, and whether it is the lane's."""
        if self._lane_on and self._lane_lock.acquire(blocking=False):
            conn = self._lane
            if conn is None:
                try:
                    conn = self.pool.getconn()
                except BaseException:
                    self._lane_lock.release()
                    raise
                self._lane, self._lane_until = conn, self.clock.monotonic() + _LANE_TURN
            return conn, True
        return self.pool.getconn(), False

    def _give(self, conn: Any, lane: bool) -> None:
        """Give back what ``_take`` gave (the pool rolls back or replaces a bad connection)."""
        if not lane:
            self.pool.putconn(conn)
            return
        try:
            pg = conn.pgconn
            if (
                pg.status != _OK  # closed or broken
                or pg.transaction_status != _IDLE
                or self.clock.monotonic() > self._lane_until
            ):
                self._lane = None
                self.pool.putconn(conn)
        finally:
            self._lane_lock.release()

    def _drop_lane(self, wait: float) -> None:
        """Give the lane's connection back to the pool (waiting up to ``wait`` s for it)."""
        if self._lane_lock.acquire(timeout=wait):
            try:
                conn, self._lane = self._lane, None
                if conn is not None:
                    self.pool.putconn(conn)
            finally:
                self._lane_lock.release()

    def count_commit(self) -> None:
        """Count one commit made outside ``run(write=True)`` (a write that may be empty)."""
        with self._lock:
            self.commits += 1

    def _pool_timeout(self) -> type[BaseException]:
        _, pool_mod = import_psycopg()
        exc: type[BaseException] = pool_mod.PoolTimeout
        return exc

    def _purge(self) -> None:
        try:
            self._drop_lane(0.0)  # checked with the others
            self.pool.check()
        except Exception:  # the check itself can fail while the server is down
            pass

    def execute(
        self,
        sql: str,
        params: Sequence[Any] | dict[str, Any] | None = None,
        *,
        write: bool = True,
        idempotent: bool = False,
    ) -> list[tuple[Any, ...]]:
        """Run one statement (one round trip, its own commit) and return its rows."""

        def one(conn: Any) -> list[tuple[Any, ...]]:
            cur = conn.execute(sql, params)
            self.round_trips += 1
            # Whether it returned rows, from the result's status: ``cur.description`` builds
            # a Column per column (psycopg type lookups included), ~40% of the client's time
            # reading a run row of 25 columns (cProfile, 2026-12-01).
            res = cur.pgresult
            return cur.fetchall() if res is not None and res.status == _TUPLES_OK else []

        return self.run(one, write=write, idempotent=idempotent)

    def server_time(self) -> float:
        """The server's wall clock, seconds since the epoch (one round trip).

        Read on a connection of its own, never the pool's: the time is asked for anywhere,
        also while this thread holds the pool's only connection (the default
        ``pool_max=1``), where waiting for the pool would stall until its timeout.

        Raises:
            psycopg.Error: the server cannot be reached (``ServerClock`` keeps its last
                reading).
        """
        with self._clock_lock:
            conn = self._clock_conn
            if conn is None or conn.closed:
                conn = self._clock_conn = self.psycopg.connect(
                    self.conninfo, autocommit=True, connect_timeout=self.connect_timeout
                )
            try:
                row = conn.execute("SELECT extract(epoch FROM clock_timestamp())").fetchone()
            except BaseException:
                conn.close()
                raise
            self.round_trips += 1
            return float(row[0])

    def prepared(self, sql: str, types: Sequence[str], *, idempotent: bool) -> PreparedWrite:
        """``sql`` as a :class:`PreparedWrite` (one per statement and types)."""
        key = (sql, tuple(types), idempotent)
        with self._lock:
            found = self._prepared.get(key)
            if found is None:
                found = self._prepared[key] = PreparedWrite(self, sql, types, idempotent=idempotent)
        return found

    # -- schema ------------------------------------------------------------------------

    def migrate(self, component: str, migrations: Sequence[str]) -> None:
        """Bring ``component``'s tables to the newest of ``migrations`` (numbered from 1).

        Runs in one transaction under an advisory lock, so workers starting together do not
        race. Applied versions are recorded in ``<schema>.surefoot_schema``.

        Raises:
            SchemaVersionError: the schema belongs to another program (tables but no
                ``surefoot_schema``, or ``component``'s tables and no record of them), or it
                was written by a newer surefoot.
            CorruptionError: the record of ``component`` cannot be true: a version below 1,
                or one a migration above which finds its tables already there (a damaged
                or edited row). Nothing was changed.
        """
        if component in self._migrated:
            return
        schema = self.schema

        def apply(conn: Any) -> None:
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"surefoot:{schema}",))
            tables = [
                r[0]
                for r in conn.execute(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                    (schema,),
                )
            ]
            if tables and "surefoot_schema" not in tables:
                raise SchemaVersionError(
                    self.url,
                    f"schema {schema!r} in {self.url!r} is not a surefoot schema (it has "
                    f"tables {', '.join(sorted(tables)[:5])} and no surefoot_schema); it was "
                    "left untouched. Pick another one with ?schema=NAME.",
                )
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS surefoot_schema "
                "(component TEXT PRIMARY KEY, version INTEGER NOT NULL)"
            )
            row = conn.execute(
                "SELECT version FROM surefoot_schema WHERE component = %s", (component,)
            ).fetchone()
            current = row[0] if row else 0
            if row and current < 1:
                raise self._damaged_record(component, f"the version is {current!r}")
            if current > len(migrations):
                raise SchemaVersionError(
                    self.url,
                    f"schema {schema!r} in {self.url!r} has {component} schema version "
                    f"{current}, newer than this surefoot knows ({len(migrations)}); upgrade "
                    "surefoot. Nothing was changed.",
                )
            for number in range(current + 1, len(migrations) + 1):
                try:
                    conn.execute(migrations[number - 1])
                except self.psycopg.Error as exc:
                    if getattr(exc, "sqlstate", None) not in _DUPLICATE:
                        raise
                    text = " ".join(str(exc).split())
                    if current == 0:
                        raise SchemaVersionError(
                            self.url,
                            f"schema {schema!r} in {self.url!r} already has a table, index "
                            f"or column of surefoot's {component} store ({text}) that this "
                            f"surefoot did not create (no {component!r} row in "
                            "surefoot_schema): another program made it, or the record was "
                            "lost. It was left untouched. Pick another schema with "
                            "?schema=NAME, or move that table away.",
                        ) from exc
                    raise self._damaged_record(
                        component,
                        f"it says version {current}, but migration {number}'s tables are "
                        f"already there ({text})",
                    ) from exc
            if current < len(migrations):
                conn.execute(
                    "INSERT INTO surefoot_schema(component, version) VALUES (%s, %s) "
                    "ON CONFLICT (component) DO UPDATE SET version = excluded.version",
                    (component, len(migrations)),
                )

        try:
            self.run(apply, tx=True)
        except self.psycopg.errors.InsufficientPrivilege as exc:
            raise StoreUnavailableError(
                self.url,
                f"cannot create surefoot's tables in schema {schema!r} at {self.url!r}: "
                f"{' '.join(str(exc).split())}. Ask an administrator to run `CREATE SCHEMA "
                f"{schema} AUTHORIZATION <this user>` (or grant CREATE on the database), or "
                "point ?schema= at a schema this user owns.",
            ) from exc
        self._migrated.add(component)

    def _damaged_record(self, component: str, found: str) -> CorruptionError:
        """The error for a ``surefoot_schema`` row of ``component`` that cannot be true."""
        return CorruptionError(
            self.url,
            f"{self.schema}.surefoot_schema ({component})",
            f"schema {self.schema!r} in {self.url!r}: the record of which {component} "
            f"migrations it has applied (table {self.schema}.surefoot_schema) is damaged or "
            f"was edited: {found}. It was refused and nothing was changed. Restore the "
            "schema from a backup, or set the row back to the version its tables are at "
            "(docs/reliability.md, section 4).",
        )

    def drop_schema(self) -> None:
        """Drop the whole schema and everything in it (tests, ``surefoot`` resets)."""
        self.execute(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE")
        self._migrated.clear()

    # -- LISTEN / NOTIFY ---------------------------------------------------------------

    def channel(self, name: str) -> str:
        """The NOTIFY channel for ``name`` in this schema."""
        return f"{self.schema}.{name}"

    def notify(self, name: str, payload: str = "") -> None:
        """Send a notification on ``name`` (delivered when the sender's transaction commits)."""
        self.execute("SELECT pg_notify(%s, %s)", (self.channel(name), payload), write=False)

    def listener(self, name: str) -> Listener:
        """A :class:`Listener` on channel ``name`` (its own connection, outside the pool)."""
        return Listener(self, name)


class Listener:
    """Waits for ``NOTIFY`` on one channel; with polling as the fallback.

    ``wait(timeout)`` returns ``True`` when a notification arrived and ``False`` when the
    timeout passed; if the connection is lost it waits out the timeout (the caller polls)
    and reconnects on the next call. Use it to wake idle workers, never as the only signal.
    """

    def __init__(self, db: PostgresDB, name: str) -> None:
        self.db = db
        self.channel = db.channel(name)
        self._conn: Any = None
        self.received = 0
        self.connections = 0  # LISTENs made: a new one missed what was sent before it
        self.payloads: list[str] = []  # of the notifications the last ``wait`` received

    def _connect(self) -> Any:
        if self._conn is None or self._conn.closed:
            psycopg = self.db.psycopg
            conn = psycopg.connect(
                self.db.conninfo, autocommit=True, connect_timeout=self.db.connect_timeout
            )
            conn.execute(psycopg.sql.SQL("LISTEN {}").format(psycopg.sql.Identifier(self.channel)))
            self._conn = conn
            self.connections += 1
        return self._conn

    def wait(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds for a notification; ``True`` if one came (its
        payload and those of any queued with it are in ``payloads``)."""
        self.payloads = []
        try:
            conn = self._connect()
            got = False
            for n in conn.notifies(timeout=timeout, stop_after=1):
                got = True
                self.payloads.append(n.payload)
            # drain any others queued with it, without waiting
            for n in conn.notifies(timeout=0.0):
                self.payloads.append(n.payload)
        except self.db.psycopg.Error:
            self.close()
            self.db.clock.sleep(timeout)
            return False
        if got:
            self.received += 1
        return got

    def close(self) -> None:
        """Close the listening connection."""
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass

    def __enter__(self) -> Listener:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
