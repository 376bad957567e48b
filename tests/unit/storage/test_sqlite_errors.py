"""SQLiteDB turns every driver error into the storage error tree, keeping the cause."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from surefoot import storage
from surefoot.errors import StoreError, StoreUnavailableError
from surefoot.storage.runs import RunRow
from surefoot.storage.sqlite import SQLiteDB


def _row(run_id: str) -> RunRow:
    return RunRow(run_id, "wf", "1", "h", "[]", "journal_keys", "pending", 1.0, 1.0)


def test_a_refused_statement_is_a_store_error_and_rolls_back(tmp_path: Path) -> None:
    """An IntegrityError inside a write becomes StoreError (not unavailable), with the
    driver's error as its cause; nothing of the transaction is kept or counted."""
    db = SQLiteDB(str(tmp_path / "a.db"))
    db.migrate("t", ["CREATE TABLE t (k TEXT PRIMARY KEY)"])
    commits = db.commits
    with pytest.raises(StoreError) as info, db.write() as c:
        c.execute("INSERT INTO t VALUES ('x')")
        c.execute("INSERT INTO t VALUES ('x')")
    assert not isinstance(info.value, StoreUnavailableError)
    assert isinstance(info.value.__cause__, sqlite3.IntegrityError)
    assert "a.db" in str(info.value)
    assert db.read("SELECT COUNT(*) FROM t") == [(0,)]
    assert db.commits == commits
    db.close()


def test_a_locked_file_is_store_unavailable_for_the_journal(tmp_path: Path) -> None:
    """A journal write while another connection holds the write lock raises
    StoreUnavailableError saying how to raise busy_timeout, caused by the driver's error."""
    path = tmp_path / "j.db"
    st = storage.open(f"sqlite:///{path}?busy_timeout=0")
    j = st.journal()
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreUnavailableError, match="busy_timeout") as info:
            j.create_run(_row("r"))
        assert isinstance(info.value.__cause__, sqlite3.OperationalError)
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert j.create_run(_row("r"))[1] is True
    st.close()


def test_a_failing_read_is_translated_too(tmp_path: Path) -> None:
    """A read the driver refuses (no such table) raises a StoreError with the cause kept."""
    db = SQLiteDB(str(tmp_path / "r.db"))
    with pytest.raises(StoreError) as info:
        db.read("SELECT * FROM missing")
    assert isinstance(info.value.__cause__, sqlite3.OperationalError)
    assert "no such table" in str(info.value)
    db.close()


def test_write_one_is_one_statement_that_commits_or_is_refused_whole(tmp_path: Path) -> None:
    """``write_one`` sends its statement alone (no BEGIN/COMMIT around it: the hot path of
    every journalled step), commits it (another connection sees it), counts one commit; a
    refused statement keeps nothing, counts nothing; a held write lock is unavailable."""
    path = tmp_path / "w.db"
    db = SQLiteDB(str(path), busy_timeout_ms=50)
    db.migrate("t", ["CREATE TABLE t (k TEXT PRIMARY KEY, n INTEGER NOT NULL)"])
    seen: list[str] = []
    db.conn().set_trace_callback(seen.append)
    commits = db.commits
    assert db.write_one("INSERT INTO t VALUES (?, ?)", ("a", 1)) == 1
    assert seen == ["INSERT INTO t VALUES ('a', 1)"]
    assert db.commits == commits + 1
    other = sqlite3.connect(path)
    assert other.execute("SELECT n FROM t").fetchall() == [(1,)]
    with pytest.raises(StoreError) as info:  # the second row fails: the first is not kept
        db.write_one("INSERT INTO t VALUES ('b', 2), ('a', 3)", ())
    assert not isinstance(info.value, StoreUnavailableError)
    assert other.execute("SELECT COUNT(*) FROM t").fetchall() == [(1,)]
    assert db.commits == commits + 1
    other.execute("BEGIN IMMEDIATE")
    with pytest.raises(StoreUnavailableError, match="busy_timeout"):
        db.write_one("INSERT INTO t VALUES (?, ?)", ("c", 1))
    other.rollback()
    other.close()
    db.close()


def test_write_returning_sends_one_statement_and_counts_only_what_wrote(tmp_path: Path) -> None:
    """``write_returning`` sends its ``RETURNING`` statement alone and commits it (another
    connection sees the row); a statement that returned no row wrote nothing and is not
    counted as a commit; a held write lock is unavailable, nothing written."""
    path = tmp_path / "r.db"
    db = SQLiteDB(str(path), busy_timeout_ms=50)
    db.migrate("t", ["CREATE TABLE t (k TEXT PRIMARY KEY, n INTEGER NOT NULL)"])
    seen: list[str] = []
    db.conn().set_trace_callback(seen.append)
    commits = db.commits
    sql = "INSERT INTO t SELECT ?, ? WHERE ? ON CONFLICT DO NOTHING RETURNING n"
    assert db.write_returning(sql, ("a", 1, True)) == [(1,)]
    assert seen == [sql.replace("?, ? WHERE ?", "'a', 1 WHERE 1")]
    assert db.commits == commits + 1
    other = sqlite3.connect(path)
    assert other.execute("SELECT k, n FROM t").fetchall() == [("a", 1)]
    assert db.write_returning(sql, ("b", 2, False)) == []  # its condition refused it
    assert db.write_returning(sql, ("a", 3, True)) == []  # the key exists
    assert db.commits == commits + 1
    other.execute("BEGIN IMMEDIATE")
    with pytest.raises(StoreUnavailableError, match="busy_timeout"):
        db.write_returning(sql, ("c", 1, True))
    other.rollback()
    assert other.execute("SELECT k, n FROM t").fetchall() == [("a", 1)]
    other.close()
    db.close()
