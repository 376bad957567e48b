"""What a SQL backend tells the shared journal and stream: its SQL spelling and how it runs.

The shared code (:mod:`.journal`, :mod:`.stream`) writes every statement once, with ``?``
placeholders, and asks the dialect for the few fragments that differ between SQLite and
PostgreSQL (row locks, list membership, the row order column) and for how statements run: a
read, one write that is its own commit (or a prepared one, sent very often), a transaction,
a batch (pipelined on PostgreSQL) and a poll that usually changes nothing (SQLite looks
before it locks). A dialect does no deciding; it only spells and runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

__all__ = ["ROWS", "Dialect", "Then"]

T = TypeVar("T")

ROWS = "@ROWS@"
"""Where a :class:`Then` statement names the rows its write changed (its ``FROM``)."""


@dataclass(frozen=True, slots=True)
class Then:
    """A statement that follows a write in its transaction and reads the rows it changed.

    Attributes:
        sql: the statement (placeholders already in the driver's style), with :data:`ROWS`
            where it reads the changed rows (``... FROM @ROWS@``); those rows have the
            write's ``RETURNING`` columns, the first being ``key`` of ``table``.
        params: its parameters (they follow the write's).
        table / key: where SQLite reads the changed rows back.
    """

    sql: str
    params: tuple[Any, ...]
    table: str
    key: str


class Dialect(Protocol):
    """One SQL backend's spelling and statement runner.

    Attributes:
        url: the storage URL (for errors).
        row_lock: ``" FOR UPDATE"`` where rows can be locked (PostgreSQL), else ``""``
            (SQLite's write lock already serializes the transaction).
        share_lock: ``" FOR SHARE"`` or ``""``: holds the run row while a step is written.
        key_share: ``" FOR KEY SHARE"`` or ``""``: holds the run row while a signal is
            sent (conflicts with ``row_lock`` only).
        skip_locked: ``" FOR UPDATE SKIP LOCKED"`` or ``""``: claimers skip each other's rows.
        order_c: ``' COLLATE "C"'`` or ``""``: byte order for text, as SQLite sorts.
        step_seq: the column giving journal order of steps (``rowid`` / ``seq``).
        max_value_bytes: the largest value the store accepts (0: no limit).
    """

    url: str
    max_value_bytes: int
    row_lock: str
    share_lock: str
    key_share: str
    skip_locked: str
    order_c: str
    step_seq: str

    def sql(self, text: str) -> str:
        """``text`` with its ``?`` placeholders in this driver's style."""
        ...

    def any_of(self, column: str) -> str:
        """A condition true when ``column`` is in the list bound to its one placeholder."""
        ...

    def array(self, values: Sequence[Any]) -> Any:
        """The parameter bound to an :meth:`any_of` placeholder."""
        ...

    def member(self, names: str, name: str) -> str:
        """True when the ``chr(31)``-separated list ``names`` contains ``name`` (SQL exprs)."""
        ...

    def contains(self, haystack: str, needle: str) -> str:
        """True when the text ``needle`` occurs in ``haystack`` (SQL exprs), case-sensitive."""
        ...

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Run one read-only statement and return its rows (no commit counted)."""
        ...

    def write(self, sql: str, params: Sequence[Any] = (), *, idempotent: bool = False) -> int:
        """Run one write as its own transaction (one commit); return its row count."""
        ...

    def prepare(
        self, sql: str, types: Sequence[str], *, idempotent: bool = False
    ) -> Callable[[Sequence[Any]], int]:
        """A write sent very often, as a callable: ``sql`` (``?`` placeholders, not yet
        converted by :meth:`sql`) given one value per placeholder, of the SQL ``types``
        (``text``, ``int4``, ``int8``, ``float8``; ``None`` is NULL), runs as its own
        transaction (one commit) and returns its row count, as :meth:`write` does.
        PostgreSQL prepares it once per connection and sends only the values."""
        ...

    def transaction(self, fn: Callable[[Any], T], *, idempotent: bool = False) -> T:
        """Run ``fn(conn)`` in one write transaction (one commit) and return its result.

        ``idempotent``: running ``fn`` again after a lost reply leaves the same state.
        """
        ...

    def batch(self, fn: Callable[[Any], T], *, idempotent: bool = False) -> T:
        """Like :meth:`transaction`, for statements that need no answer of an earlier one:
        PostgreSQL pipelines them (one round trip); read row counts after it returns."""
        ...

    def poll_write(
        self,
        sql: str,
        params: Sequence[Any],
        probe: tuple[str, Sequence[Any]] | None,
        then: Then | None = None,
    ) -> list[Any]:
        """Run a write an idle poller sends often and that usually changes nothing; return
        its rows. SQLite first runs ``probe`` without the write lock and skips the write
        when it finds no row; PostgreSQL sends the write (its ``SKIP LOCKED`` keeps
        claimers apart) and counts a commit only when rows came back.

        ``then``: a statement over the rows the write changed, run in the same transaction
        (no extra commit): SQLite runs it next, reading them back from ``then.table`` by
        their key (the first column returned); PostgreSQL sends one statement, the write as a
        ``WITH`` clause and ``then`` reading its ``RETURNING`` rows."""
        ...

    def many(self, conn: Any, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run ``sql`` once per parameter row, inside ``conn``'s transaction."""
        ...

    def notify(self, conn: Any, channel: str, payload: str) -> None:
        """Wake listeners of ``channel`` when ``conn``'s transaction commits (or do nothing)."""
        ...

    def notify_run(self, conn: Any, channel: str, run_id: str) -> None:
        """Like :meth:`notify`, for run ``run_id`` of ``durable_runs``: the payload is the
        JSON list ``[run_id, workflow, version, queue]`` read from its row, so a listener
        can tell who serves the run without asking (or do nothing)."""
        ...
