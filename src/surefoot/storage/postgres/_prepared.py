"""A write sent very often (a journalled step): prepared once per connection, run by libpq.

psycopg's ``Connection.execute`` spends ~120,000 instructions in the client on the step's
statement (a cursor, the query's conversion, a dumper per parameter, its prepared-statement
bookkeeping, its wait loop), more than the floor benchmark's whole ``INSERT`` (~97,000).
A :class:`PreparedWrite` prepares its statement on a connection the first time it meets it
(``PQprepare``, with the parameters' types, so the server parses and plans it once) and then
sends only the parameters (``PQexecPrepared`` through ``psycopg.pq``, the documented libpq
wrapper, in binary format: exact numbers, no quoting). The call releases the GIL while it
waits, like psycopg's own wait. Measured with callgrind on a 100-step workflow: ~25,000
instructions per execution instead of ~120,000 (2026-12-01).

It runs through the database's ``run`` (:class:`Runner`: the ``PostgresDB``) like every
other statement (reconnect, retry after a
lost reply when idempotent, the commit counted). A statement the server no longer knows
(psycopg sends ``DEALLOCATE ALL`` after a rollback of a connection where it prepared
statements of its own) is prepared again and sent again: it failed before it ran.
"""

from __future__ import annotations

import functools
import hashlib
import re
import struct
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Protocol

__all__ = ["TYPES", "PreparedWrite", "Runner"]

#: The SQL types a prepared parameter may have: (type oid, how a Python value is sent in
#: binary). Text is encoded in the connection's client encoding (see ``_encoder``).
TYPES: dict[str, tuple[int, Callable[[Any], bytes]]] = {
    "text": (25, str.encode),
    "int4": (23, struct.Struct(">i").pack),
    "int8": (20, struct.Struct(">q").pack),
    "float8": (701, struct.Struct(">d").pack),
}

_COMMAND_OK = 1  # psycopg.pq.ExecStatus.COMMAND_OK
_DONE = (_COMMAND_OK, 2)  # and TUPLES_OK: a statement that returns rows
_SQLSTATE = ord("C")  # psycopg.pq.DiagnosticField.SQLSTATE
_NOT_PREPARED = b"26000"  # invalid_sql_statement_name: the server does not know the name
_ALREADY_PREPARED = b"42P05"  # duplicate_prepared_statement: prepared here before
_PLACEHOLDER = re.compile(r"%s")


class Runner(Protocol):
    """What a prepared write runs on: the ``PostgresDB`` (its connections, reconnects and
    retries, its round-trip count, and the psycopg module it loaded)."""

    round_trips: int
    psycopg: Any

    def run(self, fn: Callable[[Any], int], *, idempotent: bool = False) -> int:
        """``fn(conn)`` on a pooled connection, its own commit; its result."""
        ...


class PreparedWrite:
    """One write statement, prepared per connection and run as its own transaction.

    Args:
        db: the database it runs on.
        sql: the statement with ``%s`` placeholders (no literal ``%s`` in it).
        types: the SQL type of each placeholder, in order (keys of :data:`TYPES`).
        idempotent: sending it again after a lost reply leaves the same state.

    Calling it with one value per placeholder (``None`` is NULL) returns the row count
    (the rows written, or returned by a statement that returns rows).
    """

    def __init__(self, db: Runner, sql: str, types: Sequence[str], *, idempotent: bool) -> None:
        if sql.count("%s") != len(types) or not set(types) <= TYPES.keys():
            raise ValueError(
                f"types {types!r} do not fit the placeholders of {sql!r}: give one type per "
                f"%s placeholder, each one of {', '.join(TYPES)}"
            )
        n = iter(range(1, len(types) + 1))
        self.db = db
        self.sql = _PLACEHOLDER.sub(lambda _: f"${next(n)}", sql).encode()
        self.types = tuple(types)
        self.idempotent = idempotent
        digest = hashlib.sha1(self.sql + repr(self.types).encode()).hexdigest()
        self.name = f"surefoot_{digest[:20]}".encode()  # the same statement, the same name
        self._oids = [TYPES[t][0] for t in self.types]
        self._formats = [1] * len(self.types)  # every parameter in binary
        # per connection: the encoders, once the statement is prepared on it
        self._ready: weakref.WeakKeyDictionary[Any, tuple[Callable[[Any], bytes], ...]] = (
            weakref.WeakKeyDictionary()
        )
        self._last: tuple[Any, tuple[Callable[[Any], bytes], ...]] = (None, ())

    def __call__(self, params: Sequence[Any]) -> int:
        return self.db.run(functools.partial(self._send, params), idempotent=self.idempotent)

    def _send(self, params: Sequence[Any], conn: Any) -> int:
        last = self._last  # the lane's connection, nearly always: no weak-dict lookup
        if last[0] is conn:
            encoders = last[1]
        else:
            encoders = self._ready.get(conn) or self._prepare(conn)
            self._last = (conn, encoders)
        values = [None if v is None else enc(v) for enc, v in zip(encoders, params, strict=True)]
        pg = conn.pgconn
        self.db.round_trips += 1
        res = pg.exec_prepared(self.name, values, self._formats)
        if res.status not in _DONE:
            if res.error_field(_SQLSTATE) != _NOT_PREPARED:
                raise self._error(conn, res)
            del self._ready[conn]  # deallocated: it failed before it ran, so send it again
            self._last = (None, ())
            self._prepare(conn)
            res = pg.exec_prepared(self.name, values, self._formats)
            if res.status not in _DONE:
                raise self._error(conn, res)
        return int(res.command_tuples or 0)

    def _prepare(self, conn: Any) -> tuple[Callable[[Any], bytes], ...]:
        res = conn.pgconn.prepare(self.name, self.sql, self._oids)
        if res.status != _COMMAND_OK and res.error_field(_SQLSTATE) != _ALREADY_PREPARED:
            raise self._error(conn, res)
        encoders = tuple(self._encoder(conn, t) for t in self.types)
        self._ready[conn] = encoders
        return encoders

    @staticmethod
    def _encoder(conn: Any, sql_type: str) -> Callable[[Any], bytes]:
        if sql_type != "text":
            return TYPES[sql_type][1]
        codec = conn.info.encoding  # the client encoding, as a Python codec name
        if codec == "utf-8":
            return str.encode
        return lambda s: str(s).encode(codec)

    def _error(self, conn: Any, res: Any) -> Exception:
        """The psycopg exception psycopg itself would raise for ``res``."""
        psycopg = self.db.psycopg
        if conn.pgconn.status != 0:  # psycopg.pq.ConnStatus.OK: the connection is lost
            message = res.error_message.decode("utf-8", "replace") or "connection lost"
            return psycopg.OperationalError(message.strip())  # type: ignore[no-any-return]
        error: Exception = psycopg.errors.error_from_result(res, encoding=conn.info.encoding)
        return error
