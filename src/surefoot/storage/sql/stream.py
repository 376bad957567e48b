"""The ``StreamLog`` in SQL, written once for SQLite and PostgreSQL.

Consumer cursors, deliveries with visibility timeouts, redelivery, dead letters and redrive
(see ``StreamLog`` in ``surefoot.storage.streams``). A claim is one transaction that
redelivers expired deliveries, dead-letters those past ``max_attempts`` and hands out new
messages; on PostgreSQL it first locks the consumer's cursor row and the due pending rows,
so claims of one consumer take turns as they do under SQLite's write lock.

A backend subclass keeps what truly differs: its migrations, ``append`` (SQLite: one
``INSERT … SELECT MAX(seq) + 1``; PostgreSQL: a PL/pgSQL function that locks the stream's
head row), ``last_seq`` and how a claim takes the consumer's cursor.
"""

from __future__ import annotations

from typing import Any

from ...codec import dumps, loads
from ...errors import StateError
from ..checks import check_size
from ..streams import (
    ClaimedMessage,
    ConsumerStats,
    DeadRecord,
    StreamRecord,
    StreamStats,
    check_range,
)
from .dialect import Dialect

__all__ = ["FLOOR_SQL", "REC_SQL", "SQLStream", "consumer_removed", "list_streams", "record"]


def consumer_removed(stream: str, consumer: str) -> StateError:
    """The error of a claim by a consumer group ``remove_consumer`` forgot (every backend).

    Its worker may still run: re-creating the group silently would redeliver every kept
    message, acked ones included, so the claim is refused until the group is opened again.
    """
    return StateError(
        f"consumer group {consumer!r} was removed from stream {stream!r} "
        f"(remove_consumer); open it again with stream.consumer({consumer!r}) to start "
        "from the stream's last message at that moment (nothing already appended is "
        "redelivered)"
    )


REC_SQL = "SELECT seq, message_id, payload, appended_at FROM sf_stream WHERE stream = ?"

FLOOR_SQL = (
    "SELECT MIN(x) FROM (SELECT MIN(position) + 1 AS x FROM sf_stream_cursor WHERE stream = ? "
    "UNION ALL SELECT MIN(seq) FROM sf_stream_pending WHERE stream = ?) f"
)
"""The lowest sequence number a registered consumer has not settled: not yet handed out
(its position + 1), pending or dead. A trim never removes it or anything after it."""


def record(row: Any, duplicate: bool = False) -> StreamRecord:
    """A ``StreamRecord`` from a row of :data:`REC_SQL`'s columns."""
    return StreamRecord(int(row[0]), str(row[1]), str(row[2]), float(row[3]), duplicate)


class SQLStream:
    """One named stream in SQL, on one backend's :class:`Dialect`.

    Subclasses run their migrations, call ``super().__init__(dialect, name)`` and implement
    :meth:`append`, :meth:`last_seq` and :meth:`_claim_position`.
    """

    def __init__(self, dialect: Dialect, name: str) -> None:
        d = self.d = dialect
        self.name = name
        lock_p = f"{d.row_lock} OF p" if d.row_lock else ""
        self._due = d.sql(
            "SELECT p.seq, p.attempts, p.history, s.message_id, s.payload, s.appended_at "
            "FROM sf_stream_pending p JOIN sf_stream s ON s.stream = p.stream AND s.seq = p.seq "
            "WHERE p.stream = ? AND p.consumer = ? AND p.state = 'pending' "
            f"AND p.visible_at <= ? ORDER BY p.seq{lock_p}"
        )
        self._fresh = d.sql(REC_SQL + " AND seq > ? ORDER BY seq LIMIT ?")

    def append(
        self, message_id: str, payload: str, *, now: float, expect_last_seq: int | None = None
    ) -> StreamRecord:
        raise NotImplementedError

    _TABLES: tuple[str, ...] = (
        "sf_stream_pending",
        "sf_stream_cursor",
        "sf_stream_removed",
        "sf_stream_ids",
    )

    @property
    def max_value_bytes(self) -> int:
        """The largest payload the store accepts (0: no limit)."""
        return self.d.max_value_bytes

    def delete(self) -> int:
        """Delete the whole stream (``StreamBatches.delete``): how many messages went."""
        d = self.d
        tables = [d.sql(f"DELETE FROM {t} WHERE stream = ?") for t in self._TABLES]
        gone = d.sql("DELETE FROM sf_stream WHERE stream = ?")

        def work(c: Any) -> int:
            for sql in tables:
                c.execute(sql, (self.name,))
            return int(c.execute(gone, (self.name,)).rowcount)

        return d.transaction(work, idempotent=True)

    def _check_payload(self, message_id: str, payload: str) -> None:
        """Refuse a payload over the store's ``max_value_bytes`` (``ValueTooLargeError``)."""
        what = f"message {message_id!r} of stream {self.name!r}"
        check_size(self.d.url, what, payload, self.d.max_value_bytes)

    def last_seq(self) -> int:
        raise NotImplementedError

    def _claim_position(self, c: Any, consumer: str) -> int:
        """The consumer's position, read inside a claim's transaction (and locked there)."""
        raise NotImplementedError

    def range(self, after: int = 0, limit: int = 100) -> list[StreamRecord]:
        check_range(self.name, after, limit)
        return [record(r) for r in self.d.read(self._fresh, (self.name, after, limit))]

    def claim(
        self,
        consumer: str,
        *,
        limit: int,
        now: float,
        visibility_timeout: float,
        max_attempts: int,
        worker: str = "",
    ) -> list[ClaimedMessage]:
        d = self.d
        key = (self.name, consumer)
        dead = d.sql(
            "UPDATE sf_stream_pending SET state = 'dead', reason = 'max_attempts' "
            "WHERE stream = ? AND consumer = ? AND seq = ?"
        )
        again = d.sql(
            "UPDATE sf_stream_pending SET attempts = ?, visible_at = ?, history = ? "
            "WHERE stream = ? AND consumer = ? AND seq = ?"
        )
        deliver = d.sql(
            "INSERT INTO sf_stream_pending (stream, consumer, seq, attempts, visible_at, state, "
            "history) VALUES (?, ?, ?, 1, ?, 'pending', ?)"
        )
        advance = d.sql(
            "INSERT INTO sf_stream_cursor (stream, consumer, position) VALUES (?, ?, ?) "
            "ON CONFLICT (stream, consumer) DO UPDATE SET position = excluded.position"
        )

        def work(c: Any) -> list[ClaimedMessage]:
            out: list[ClaimedMessage] = []
            position = self._claim_position(c, consumer)
            due = c.execute(self._due, (*key, now)).fetchall()
            for seq, attempts, hist, mid, payload, at in due:
                if len(out) >= limit:
                    break
                if attempts >= max_attempts:
                    c.execute(dead, (*key, seq))
                    continue
                history = [*loads(hist), {"attempt": attempts + 1, "at": now, "worker": worker}]
                c.execute(
                    again, (attempts + 1, now + visibility_timeout, dumps(history), *key, seq)
                )
                out.append(ClaimedMessage(StreamRecord(seq, mid, payload, at), attempts + 1))
            if len(out) < limit:
                fresh = c.execute(self._fresh, (self.name, position, limit - len(out))).fetchall()
                if fresh:
                    first = dumps([{"attempt": 1, "at": now, "worker": worker}])
                    d.many(
                        c, deliver, [(*key, r[0], now + visibility_timeout, first) for r in fresh]
                    )
                    c.execute(advance, (*key, fresh[-1][0]))
                    out += [ClaimedMessage(record(r), 1) for r in fresh]
            return out

        return d.transaction(work)

    def ack(self, consumer: str, seq: int) -> bool:
        sql = self.d.sql(
            "DELETE FROM sf_stream_pending WHERE stream = ? AND consumer = ? AND seq = ? "
            "AND state = 'pending'"
        )
        return self.d.write(sql, (self.name, consumer, seq)) > 0

    def ack_many(self, consumer: str, seqs: list[int]) -> int:
        if not seqs:
            return 0
        d = self.d
        sql = d.sql(
            "DELETE FROM sf_stream_pending WHERE stream = ? AND consumer = ? "
            f"AND {d.any_of('seq')} AND state = 'pending'"
        )
        return d.write(sql, (self.name, consumer, d.array(sorted({int(s) for s in seqs}))))

    def nack(self, consumer: str, seq: int, *, now: float, delay: float = 0.0) -> bool:
        sql = self.d.sql(
            "UPDATE sf_stream_pending SET visible_at = ? WHERE stream = ? AND consumer = ? "
            "AND seq = ? AND state = 'pending'"
        )
        return self.d.write(sql, (now + delay, self.name, consumer, seq)) > 0

    def reject(self, consumer: str, seq: int, *, reason: str, now: float) -> bool:
        d = self.d
        find = d.sql(
            "SELECT history FROM sf_stream_pending WHERE stream = ? AND consumer = ? "
            f"AND seq = ? AND state = 'pending'{d.row_lock}"
        )
        kill = d.sql(
            "UPDATE sf_stream_pending SET state = 'dead', reason = ?, history = ? "
            "WHERE stream = ? AND consumer = ? AND seq = ?"
        )

        def work(c: Any) -> bool:
            row = c.execute(find, (self.name, consumer, seq)).fetchone()
            if row is None:
                return False
            history = [*loads(row[0]), {"rejected": reason, "at": now}]
            c.execute(kill, (reason, dumps(history), self.name, consumer, seq))
            return True

        return d.transaction(work)

    def dead_letters(self, consumer: str) -> list[DeadRecord]:
        rows = self.d.read(
            self.d.sql(
                "SELECT s.seq, s.message_id, s.payload, s.appended_at, p.reason, p.attempts, "
                "p.history FROM sf_stream_pending p JOIN sf_stream s ON s.stream = p.stream "
                "AND s.seq = p.seq WHERE p.stream = ? AND p.consumer = ? AND p.state = 'dead' "
                "ORDER BY p.seq"
            ),
            (self.name, consumer),
        )
        return [DeadRecord(record(r[:4]), consumer, r[4], r[5], loads(r[6])) for r in rows]

    def redrive(self, consumer: str, seqs: list[int] | None, *, now: float) -> int:
        d = self.d
        find = d.sql(
            "SELECT seq, reason, history FROM sf_stream_pending WHERE stream = ? "
            f"AND consumer = ? AND state = 'dead' ORDER BY seq{d.row_lock}"
        )
        revive = d.sql(
            "UPDATE sf_stream_pending SET state = 'pending', reason = '', attempts = 0, "
            "visible_at = ?, history = ? WHERE stream = ? AND consumer = ? AND seq = ?"
        )

        def work(c: Any) -> int:
            rows = c.execute(find, (self.name, consumer)).fetchall()
            chosen = [r for r in rows if seqs is None or r[0] in seqs]
            for seq, reason, hist in chosen:
                history = [*loads(hist), {"redriven_at": now, "reason": reason}]
                c.execute(revive, (now, dumps(history), self.name, consumer, seq))
            return len(chosen)

        return d.transaction(work)

    def register(self, consumer: str) -> None:
        """A new group starts before the oldest kept message; one ``remove_consumer``
        forgot starts after the last message appended (it must not redeliver acked work)."""
        d = self.d
        known = d.read(
            d.sql("SELECT 1 FROM sf_stream_cursor WHERE stream = ? AND consumer = ?"),
            (self.name, consumer),
        )
        if known:  # a read, no write transaction: inspectors open known consumers often
            return
        key = (self.name, consumer)
        removed = d.sql("SELECT 1 FROM sf_stream_removed WHERE stream = ? AND consumer = ?")

        def work(c: Any) -> None:
            if c.execute(removed, key).fetchone() is None:
                c.execute(
                    d.sql(
                        "INSERT INTO sf_stream_cursor (stream, consumer, position) VALUES "
                        "(?, ?, COALESCE((SELECT MIN(seq) FROM sf_stream WHERE stream = ?), 1) "
                        "- 1) ON CONFLICT (stream, consumer) DO NOTHING"
                    ),
                    (*key, self.name),
                )
                return
            c.execute(
                d.sql(
                    "INSERT INTO sf_stream_cursor (stream, consumer, position) VALUES (?, ?, ?) "
                    "ON CONFLICT (stream, consumer) DO NOTHING"
                ),
                (*key, self._last_in(c)),
            )
            c.execute(d.sql("DELETE FROM sf_stream_removed WHERE stream = ? AND consumer = ?"), key)

        d.transaction(work, idempotent=True)

    def _last_in(self, c: Any) -> int:
        """The stream's last sequence number, read inside a transaction."""
        raise NotImplementedError

    def _check_not_removed(self, c: Any, consumer: str) -> None:
        """Refuse a claim by a group ``remove_consumer`` forgot (its first claim, with no
        cursor, would otherwise re-create it before the oldest kept message)."""
        gone = c.execute(
            self.d.sql("SELECT 1 FROM sf_stream_removed WHERE stream = ? AND consumer = ?"),
            (self.name, consumer),
        ).fetchone()
        if gone is not None:
            raise consumer_removed(self.name, consumer)

    def remove_consumer(self, consumer: str) -> bool:
        d = self.d

        def work(c: Any) -> bool:
            key = (self.name, consumer)
            n = c.execute(
                d.sql("DELETE FROM sf_stream_pending WHERE stream = ? AND consumer = ?"), key
            ).rowcount
            m = c.execute(
                d.sql("DELETE FROM sf_stream_cursor WHERE stream = ? AND consumer = ?"), key
            ).rowcount
            if n or m:  # its worker may still claim: refuse that until it is opened again
                c.execute(
                    d.sql(
                        "INSERT INTO sf_stream_removed (stream, consumer) VALUES (?, ?) "
                        "ON CONFLICT (stream, consumer) DO NOTHING"
                    ),
                    key,
                )
            return bool(n or m)

        return d.transaction(work, idempotent=True)

    def stats(self) -> StreamStats:
        d = self.d
        n, first = d.read(
            d.sql("SELECT COUNT(*), COALESCE(MIN(seq), 0) FROM sf_stream WHERE stream = ?"),
            (self.name,),
        )[0]
        (ids,) = d.read(d.sql("SELECT COUNT(*) FROM sf_stream_ids WHERE stream = ?"), (self.name,))[
            0
        ]
        last = self.last_seq()
        cursors = dict(
            d.read(
                d.sql("SELECT consumer, position FROM sf_stream_cursor WHERE stream = ?"),
                (self.name,),
            )
        )
        counts: dict[tuple[str, str], int] = {
            (str(c), str(st)): int(k)
            for c, st, k in d.read(
                d.sql(
                    "SELECT consumer, state, COUNT(*) FROM sf_stream_pending WHERE stream = ? "
                    "GROUP BY consumer, state"
                ),
                (self.name,),
            )
        }
        names = sorted({*map(str, cursors), *(c for c, _ in counts)})
        consumers = tuple(
            ConsumerStats(
                c,
                int(cursors.get(c, 0)),
                counts.get((c, "pending"), 0),
                counts.get((c, "dead"), 0),
                max(0, last - int(cursors.get(c, 0))),
            )
            for c in names
        )
        return StreamStats(self.name, int(n), int(first), last, int(ids), consumers)

    def next_visible(self, consumer: str) -> float | None:
        rows = self.d.read(
            self.d.sql(
                "SELECT MIN(visible_at) FROM sf_stream_pending WHERE stream = ? AND consumer = ? "
                "AND state = 'pending'"
            ),
            (self.name, consumer),
        )
        return float(rows[0][0]) if rows and rows[0][0] is not None else None

    def position(self, consumer: str) -> int:
        rows = self.d.read(
            self.d.sql("SELECT position FROM sf_stream_cursor WHERE stream = ? AND consumer = ?"),
            (self.name, consumer),
        )
        return int(rows[0][0]) if rows else 0

    def pending(self, consumer: str) -> int:
        rows = self.d.read(
            self.d.sql(
                "SELECT COUNT(*) FROM sf_stream_pending WHERE stream = ? AND consumer = ? "
                "AND state = 'pending'"
            ),
            (self.name, consumer),
        )
        return int(rows[0][0])


def list_streams(d: Dialect, heads: str = "") -> dict[str, int]:
    """Every stream in the database: names (sorted) with their kept message counts.

    ``heads`` names one more table with a ``stream`` column (PostgreSQL's head rows)."""
    extra = f" UNION SELECT stream FROM {heads}" if heads else ""
    rows = d.read(
        "SELECT n.name, COUNT(s.seq) FROM (SELECT stream AS name FROM sf_stream UNION "
        f"SELECT stream FROM sf_stream_cursor{extra}) n "
        "LEFT JOIN sf_stream s ON s.stream = n.name GROUP BY n.name ORDER BY n.name"
    )
    return {str(name): int(k) for name, k in rows}
