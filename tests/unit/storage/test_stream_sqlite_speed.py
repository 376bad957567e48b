"""SQLite stream appends stay cheap (statements per commit, counted with the driver's trace
callback; never timed), and a file from before migration 4 upgrades without loss."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from surefoot.clock import FakeClock
from surefoot.errors import DuplicateMessageError
from surefoot.statebus import Stream, streams
from surefoot.storage.sqlite._stream import MIGRATIONS


def _statements(st: Stream, fn: object) -> list[str]:
    conn = st.storage.db.conn()
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        fn()  # type: ignore[operator]
    finally:
        conn.set_trace_callback(None)
    return [" ".join(s.split())[:40] for s in seen]


def test_an_append_is_one_statement_in_one_transaction(tmp_path: Path) -> None:
    """BEGIN IMMEDIATE, the INSERT (dedup and expect_last_seq folded in), COMMIT; a retry
    adds one read to find the original."""
    st = Stream(f"sqlite:///{tmp_path / 's.db'}", "s")
    st.append(0, message_id="warm")
    fresh = _statements(st, lambda: st.append(1, message_id="a"))
    assert len(fresh) == 3 and fresh[0] == "BEGIN IMMEDIATE" and fresh[-1] == "COMMIT", fresh
    guarded = _statements(st, lambda: st.append(2, message_id="b", expect_last_seq=2))
    assert len(guarded) == 3, guarded
    retry = _statements(st, lambda: st.append(1, message_id="a"))
    assert len(retry) == 4, retry
    st.close()


def test_a_bounded_append_trims_in_at_most_seven_statements(tmp_path: Path) -> None:
    """At its limit each append trims the oldest message in the same commit: forget old ids,
    insert, read the head and the consumers' floor, delete (returning), remember the id."""
    st = Stream(f"sqlite:///{tmp_path / 's.db'}", "s", max_messages=3)
    for i in range(5):
        st.append(i, message_id=f"m{i}")
    under = _statements(st, lambda: st.append(5, message_id="m5"))
    assert len(under) <= 7, under
    assert st.stats().messages == 3 and st.stats().first_seq == 4
    assert st.append(0, message_id="m0").duplicate  # trimmed, still in its dedup window
    st.close()


def _main_schema_file(path: Path) -> None:
    """A stream file as main wrote it before migration 4 (migrations 1-3)."""
    c = sqlite3.connect(path)
    c.execute("PRAGMA journal_mode=WAL")
    c.execute("CREATE TABLE surefoot_schema (component TEXT PRIMARY KEY, version INTEGER NOT NULL)")
    for migration in MIGRATIONS[:3]:
        for stmt in migration.split(";"):
            if stmt.strip():
                c.execute(stmt)
    c.execute("INSERT INTO surefoot_schema VALUES ('stream', 3)")
    for seq in (3, 4, 5):
        c.execute(
            "INSERT INTO sf_stream VALUES ('s', ?, ?, ?, ?)", (seq, f"m{seq}", str(seq), 10.0)
        )
    for seq in (1, 2):
        digest = hashlib.sha256(str(seq).encode()).hexdigest()
        c.execute(
            "INSERT INTO sf_stream_ids VALUES ('s', ?, ?, ?, ?)", (f"m{seq}", seq, digest, 10.0)
        )
    c.execute("INSERT INTO sf_stream_cursor VALUES ('s', 'g', 3)")
    c.execute("INSERT INTO sf_stream_pending VALUES ('s', 'g', 3, 1, 99.0, 'pending', '', '[]')")
    c.commit()
    c.close()


def test_a_file_from_before_migration_4_upgrades_and_loses_nothing(tmp_path: Path) -> None:
    """Messages, trimmed ids (still deduplicating), cursors and pending deliveries survive;
    the tables are WITHOUT ROWID afterwards and the stream goes on from its last seq."""
    path = tmp_path / "old.db"
    _main_schema_file(path)
    st = Stream(f"sqlite:///{path}", "s", clock=FakeClock(start=20.0))
    assert [(e.seq, e.message_id, e.payload) for e in st.read()] == [
        (3, "m3", 3),
        (4, "m4", 4),
        (5, "m5", 5),
    ]
    assert st.append(1, message_id="m1").seq == 1  # a trimmed id still deduplicates
    assert st.append(4, message_id="m4").duplicate
    with pytest.raises(DuplicateMessageError):
        st.append(9, message_id="m2")
    assert st.append(6, message_id="m6").seq == 6
    g = st.consumer("g")
    assert g.position == 3 and g.pending == 1
    assert [m.seq for m in g.fetch(10)] == [4, 5, 6]
    st.close()
    with sqlite3.connect(path) as c:
        sql = dict(c.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'"))
        version = c.execute("SELECT version FROM surefoot_schema WHERE component = 'stream'")
        assert version.fetchone() == (len(MIGRATIONS),)
    assert "WITHOUT ROWID" in sql["sf_stream"] and "WITHOUT ROWID" in sql["sf_stream_ids"]
    assert streams(f"sqlite:///{path}") == {"s": 4}
