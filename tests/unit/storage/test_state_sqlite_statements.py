"""SQLite state writes stay short (issue 14): statements per write are counted, so a slower
write path cannot come back unnoticed; and a file made before the change log was written by
triggers upgrades in place, its log continuing without a gap or a doubled row."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from surefoot.clock import FakeClock
from surefoot.errors import ConflictError
from surefoot.statebus import Store
from surefoot.storage.sqlite._state_sql import MIGRATIONS


def _statements(st: Store, fn: Callable[[], Any]) -> list[str]:
    """The statements ``fn`` ran on this thread's connection. SQLite reports a trigger's (and
    a RETURNING clause's) program again under its statement's text: one entry each here."""
    seen: list[str] = []
    c = st.storage.db.conn()

    def trace(sql: str) -> None:
        if not seen or seen[-1] != sql:
            seen.append(sql)

    c.set_trace_callback(trace)
    try:
        fn()
    finally:
        c.set_trace_callback(None)
    return [" ".join(s.split())[:40] for s in seen]


def test_a_write_is_one_statement_and_a_merged_append_five(tmp_path: Path) -> None:
    st = Store(f"sqlite:///{tmp_path / 's.db'}", "ns")
    st.declare_merge("log/*", "append")
    e = st.write("doc", {"n": 0})
    st.merge("log/a", "first", id="m0")
    stmts = _statements(st, lambda: st.write("doc", {"n": 1}, expect=e.version))
    # The UPDATE alone, its own transaction (its trigger logs the change): no BEGIN, no read.
    assert len(stmts) == 1 and stmts[0].startswith("UPDATE sf_state"), stmts
    stmts = _statements(st, lambda: st.write("doc", {"n": 2}))  # last-writer-wins
    assert len(stmts) == 1 and stmts[0].startswith("INSERT INTO sf_state"), stmts
    assert len(_statements(st, lambda: st.write("new", 1, expect=0))) == 1  # create-only
    # Refused: the one statement wrote nothing; the transaction that says why, in full.
    refused: list[str] = []
    c = st.storage.db.conn()
    c.set_trace_callback(refused.append)
    with pytest.raises(ConflictError):
        st.write("doc", {"n": 9}, expect=1)
    c.set_trace_callback(None)
    assert refused[1] == "BEGIN IMMEDIATE" and refused[-1] == "COMMIT", refused
    assert st.read("doc").version == 3  # type: ignore[union-attr]
    # BEGIN, one read (row and expiry check), the item, the key's row (logged), COMMIT.
    stmts = _statements(st, lambda: st.merge("log/a", "second", id="m1"))
    assert len(stmts) == 5, stmts
    assert len(_statements(st, lambda: st.merge("log/b", "new key", id="m2"))) == 5
    # A duplicate: BEGIN, the read, the refused item, COMMIT.
    assert len(_statements(st, lambda: st.merge("log/a", "second", id="m1"))) == 4
    kinds = [(c.key, c.kind, c.version) for c in st.state.changes(0)]
    assert kinds == [
        ("doc", "put", 1),
        ("log/a", "merge", 1),
        ("doc", "put", 2),
        ("doc", "put", 3),
        ("new", "put", 1),
        ("log/a", "merge", 2),
        ("log/b", "merge", 1),
    ]
    assert st.read("log/a").value == ["first", "second"]  # type: ignore[union-attr]
    st.close()


def test_an_expired_key_is_swept_before_the_write_in_the_same_transaction(
    tmp_path: Path,
) -> None:
    """The expiry check is the write's one read; when a key is due, its tombstone comes
    first (an earlier revision), then the write."""
    clock = FakeClock()
    st = Store(f"sqlite:///{tmp_path / 's.db'}", "ns", clock=clock)
    st.declare_merge("log", "append")
    st.write("t", 1, ttl=1.0)
    clock.advance(2.0)
    e = st.write("t", 2, expect=0)  # the expired key reads as absent: create-only succeeds
    assert e.version == 3
    clock.advance(0.5)
    st.write("u", 1, ttl=1.0)
    clock.advance(2.0)
    st.merge("log", "x")
    kinds = [(c.key, c.kind) for c in st.state.changes(0)]
    assert kinds == [
        ("t", "put"),
        ("t", "expire"),
        ("t", "put"),
        ("u", "put"),
        ("u", "expire"),
        ("log", "merge"),
    ]
    st.close()


def _main_schema(path: Path) -> None:
    """A file as the code before migration 5 left it: schema 4, its log rows written by
    hand (as that code wrote them, one INSERT per change)."""
    c = sqlite3.connect(path, isolation_level=None)
    c.execute("PRAGMA journal_mode=WAL")
    c.execute("CREATE TABLE surefoot_schema (component TEXT PRIMARY KEY, version INTEGER NOT NULL)")
    for migration in MIGRATIONS[:4]:
        for stmt in migration.split(";"):  # no triggers before migration 5
            if stmt.strip():
                c.execute(stmt)
    c.execute("INSERT INTO surefoot_schema VALUES ('statestore', 4)")
    rows = [("a", 1, '"a1"', 1), ("a", 2, '"a2"', 2), ("log", 1, "", 3)]
    for key, version, value, rev in rows:
        op = "append" if key == "log" else None
        c.execute(
            "INSERT INTO sf_state (ns, key, value, version, revision, author, trust, written_at, "
            "lineage, merge_op, merge_size) VALUES ('ns', ?, ?, ?, ?, 'system', 'system', 1.0, "
            "?, ?, ?) ON CONFLICT (ns, key) DO UPDATE SET value = excluded.value, "
            "version = excluded.version, revision = excluded.revision, lineage = excluded.lineage",
            (key, value, version, rev, version, op, 5 if op else None),
        )
        c.execute(
            "INSERT INTO sf_state_log VALUES ('ns', ?, ?, ?, ?, ?, 'system', 'system', 1.0, NULL)",
            (rev, key, "merge" if op else "put", None if op else value, version),
        )
    c.execute(
        "INSERT INTO sf_state_items VALUES ('ns', 'log', 1, '\"x\"', ?, 'm1', NULL)",
        (json.dumps(["system", "system", 1.0, "m1"]),),
    )
    c.execute("INSERT INTO sf_state_meta VALUES ('ns', 0)")
    c.close()


def test_a_schema_four_file_upgrades_and_its_log_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _main_schema(path)
    st = Store(f"sqlite:///{path}", "ns")
    st.declare_merge("log", "append")
    assert st.read("a").value == "a2"  # type: ignore[union-attr]
    st.write("a", "a3", expect=2)
    assert st.merge("log", "y", id="m2").applied
    assert not st.merge("log", "x", id="m1").applied  # the old item's id is still known
    st.delete("a")
    changes = [(c.revision, c.key, c.kind, c.value) for c in st.state.changes(0)]
    assert changes == [
        (1, "a", "put", '"a1"'),
        (2, "a", "put", '"a2"'),
        (3, "log", "merge", '["x"]'),
        (4, "a", "put", '"a3"'),
        (5, "log", "merge", '["x","y"]'),
        (6, "a", "delete", None),
    ]
    # The chain of each key's changes was filled in for the rows logged before.
    assert [c.value for c in st.state.history("a")] == ['"a1"', '"a2"', '"a3"', None]
    assert st.state.read_at("a", 1).value == '"a1"'  # type: ignore[union-attr]
    assert st.state.read_at("a", 3).value == '"a2"'  # type: ignore[union-attr]
    assert st.state.read_at("log", 4).value == '["x"]'  # type: ignore[union-attr]
    db = st.storage.db
    assert db.read("SELECT version FROM surefoot_schema WHERE component = 'statestore'") == [
        (len(MIGRATIONS),)
    ]
    st.close()


def test_the_revision_comes_from_the_log_and_survives_compaction(tmp_path: Path) -> None:
    """The namespace's revision is the log's highest: compaction keeps each key's latest
    change, so it never goes back, and the next write takes the next revision."""
    st = Store(f"sqlite:///{tmp_path / 's.db'}", "ns")
    for i in range(3):
        st.write("a", i)
        st.write("b", i)
    st.delete("b")
    assert st.revision == 7
    assert st.state.compact(keep=1, before=None) == 5
    assert st.revision == 7
    assert st.write("c", 1).revision == 8
    assert Store(st.storage, "other").write("a", 1).revision == 1  # per namespace
    st.close()


def test_a_watch_look_is_one_statement(tmp_path: Path) -> None:
    """SQLite has ``watch_read``: a look of a watch reads the changes, the revision, the
    compaction mark and whether expiries are due in one statement (it was three: the
    expiry check, the revision, the changes)."""
    st = Store(f"sqlite:///{tmp_path / 's.db'}", "ns")
    w = st.watch("k", timeout=5)
    st.write("k", 1)
    st.write("other", 1)
    got: list[Any] = []
    stmts = _statements(st, lambda: got.append(next(w)))
    assert len(stmts) == 1 and stmts[0].startswith("SELECT (SELECT MAX(revision)"), stmts
    assert got[0].value == 1
    st.write("k", 2)
    assert next(w).value == 2
    w.close()
    st.close()


def test_read_at_and_history_walk_each_keys_chain(tmp_path: Path) -> None:
    """A key's changes are chained (prev) with one in SKIP indexed: every revision reads
    back right across several SKIP spans, beside another key's changes, before and after
    compaction; a compacted revision raises CompactedError."""
    from surefoot.errors import CompactedError
    from surefoot.storage.sqlite._state_sql import SKIP

    st = Store(f"sqlite:///{tmp_path / 's.db'}", "ns")
    n = 3 * SKIP + 5
    for i in range(n):
        st.write("k", i)
        st.write("o", -i)
    st.delete("k")
    state = st.state
    assert [c.version for c in state.history("k")] == list(range(1, n + 2))
    for rev in range(1, 2 * n + 1):
        assert state.read_at("k", rev).value == str((rev - 1) // 2)  # type: ignore[union-attr]
        assert state.read_at("o", rev + 1).value == str(-((rev - 1) // 2))  # type: ignore[union-attr]
    assert state.read_at("k", 2 * n + 1) is None  # deleted
    state.compact(keep=SKIP + 1, before=None)
    kept = state.history("k")
    assert len(kept) == SKIP + 1 and kept[-1].kind == "delete"
    first = kept[0].revision
    assert state.read_at("k", first).value == kept[0].value  # type: ignore[union-attr]
    try:
        state.read_at("k", first - 2)
    except CompactedError:
        pass
    else:
        raise AssertionError("a compacted revision read back")
    st.close()


def test_a_merge_id_that_reads_like_a_number_is_not_an_items_number(tmp_path: Path) -> None:
    """An item's key is its id (text) or, without one, its n (an integer): the id "1" is
    not item 1, so it is kept, and only a second "1" is a duplicate."""
    st = Store(f"sqlite:///{tmp_path / 's.db'}", "ns")
    st.declare_merge("log", "append")
    assert st.merge("log", "no id").applied  # item n = 1, keyed by the integer 1
    assert st.merge("log", "id one", id="1").applied
    assert not st.merge("log", "again", id="1").applied
    assert st.merge("log", "id two", id="2").applied
    assert st.read("log").value == ["no id", "id one", "id two"]  # type: ignore[union-attr]
    rows = st.storage.db.read("SELECT typeof(slot), n FROM sf_state_items ORDER BY n")
    assert rows == [("integer", 1), ("text", 2), ("text", 3)]
    st.close()
