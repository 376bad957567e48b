"""A damaged ``surefoot_schema`` (issue 27, section 4): the record of which migrations a
SQLite file has applied. Damaged, it made the store re-run a migration over the tables it
had made and fail with a retryable ``StoreUnavailableError`` ("table sf_state already
exists"; the corruption campaign, seed 3, database bit flips, trial 11). Now the record is
read through its index and by a scan of its table, checked for a migration number, and a
migration that finds its tables already there is refused with ``CorruptionError`` naming
the file, the recorded version, what was found and what to do. Processes opening a new
file together still take turns (``BEGIN IMMEDIATE``) and all succeed.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import time
from contextlib import closing
from pathlib import Path

import pytest

from surefoot import storage
from surefoot.errors import CorruptionError, SchemaVersionError
from surefoot.statebus import Store
from surefoot.storage.sqlite._journal import MIGRATIONS as DURABLE
from surefoot.storage.sqlite._state_sql import MIGRATIONS as STATE


def _store_file(path: Path) -> Path:
    """A Store file holding ``k0..k4``, closed (its -wal checkpointed and removed)."""
    with closing(Store(f"sqlite:///{path}")) as s:
        for i in range(5):
            s.write(f"k{i}", i)
    assert not Path(f"{path}-wal").exists()
    return path


def _journal_file(path: Path) -> Path:
    """A file with a durable journal's tables, closed."""
    st = storage.open(f"sqlite:///{path}")
    st.journal()
    st.close()
    assert not Path(f"{path}-wal").exists()
    return path


def _edit(path: Path, sql: str) -> None:
    with closing(sqlite3.connect(path)) as c, c:
        c.execute(sql)


def _flip_in_index(path: Path, component: str) -> None:
    """Flip one bit of ``component``'s key in the index of ``surefoot_schema`` (bytes on
    disk, as the campaign's bit flips): a lookup through the index no longer finds the row;
    the table still holds it."""
    with closing(sqlite3.connect(f"file:{path}?immutable=1", uri=True)) as c:
        size = int(c.execute("PRAGMA page_size").fetchone()[0])
        pages = [
            int(r[0])
            for r in c.execute(
                "SELECT pageno FROM dbstat WHERE name = 'sqlite_autoindex_surefoot_schema_1'"
            )
        ]
    data = bytearray(path.read_bytes())
    for page in pages:
        at = data.find(component.encode(), (page - 1) * size, page * size)
        if at >= 0:
            data[at + len(component) - 1] ^= 1
            path.write_bytes(bytes(data))
            return
    raise AssertionError(f"{component!r} not found in the index pages {pages}")


def _message_parts(exc: CorruptionError, path: Path, version: str) -> None:
    text = str(exc)
    assert str(path) in text and str(path) in exc.where  # the file
    assert "surefoot_schema" in text and version in text  # the record, what it holds
    assert "restore it from a backup" in text and "PRAGMA integrity_check" in text
    assert "?check=full" in text


def test_a_flipped_bit_in_the_records_index_is_refused(tmp_path: Path) -> None:
    """The campaign's trial 11: the index of surefoot_schema loses the statestore row;
    the store refused it as damage (it re-ran migration 1 and failed retryably before)."""
    path = _store_file(tmp_path / "s.db")
    _flip_in_index(path, "statestore")
    with pytest.raises(CorruptionError) as caught:
        Store(f"sqlite:///{path}")
    _message_parts(caught.value, path, f"version {len(STATE)}")
    assert "its index finds no row" in str(caught.value)
    assert not Path(f"{path}-wal").exists()  # closed, the folder left as found


@pytest.mark.parametrize("version", range(1, len(STATE)))
def test_a_store_record_below_its_tables_is_refused(tmp_path: Path, version: int) -> None:
    """The version lowered (a flipped bit, or an edit), to each version below the newest:
    migration version+1 finds its tables already there, or (a table rebuilt) a column it
    reads gone; refused, and the file unchanged."""
    path = _store_file(tmp_path / "s.db")
    _edit(path, f"UPDATE surefoot_schema SET version = {version} WHERE component = 'statestore'")
    before = path.read_bytes()
    with pytest.raises(CorruptionError) as caught:
        Store(f"sqlite:///{path}")
    _message_parts(caught.value, path, f"says version {version}")
    assert f"migration {version + 1} does not fit the tables the file holds" in str(caught.value)
    assert path.read_bytes() == before


@pytest.mark.parametrize("version", range(1, len(DURABLE)))
def test_a_journal_record_below_its_tables_is_refused(tmp_path: Path, version: int) -> None:
    """The same for the durable journal's record."""
    path = _journal_file(tmp_path / "j.db")
    _edit(path, f"UPDATE surefoot_schema SET version = {version} WHERE component = 'durable'")
    st = storage.open(f"sqlite:///{path}")
    try:
        with pytest.raises(CorruptionError) as caught:
            st.journal()
    finally:
        st.close()
    _message_parts(caught.value, path, f"says version {version}")


def test_a_flipped_bit_in_the_journals_index_is_refused(tmp_path: Path) -> None:
    path = _journal_file(tmp_path / "j.db")
    _flip_in_index(path, "durable")
    st = storage.open(f"sqlite:///{path}")
    try:
        with pytest.raises(CorruptionError) as caught:
            st.journal()
    finally:
        st.close()
    _message_parts(caught.value, path, f"version {len(DURABLE)}")


@pytest.mark.parametrize("value", ["0", "-3", "'7'", "7.5", "x'07'"])
def test_a_version_that_is_no_migration_number_is_refused(tmp_path: Path, value: str) -> None:
    """Out of range or of the wrong type (what a flipped bit in the row's header makes)."""
    path = _store_file(tmp_path / "s.db")
    with closing(sqlite3.connect(path)) as c, c:
        # a typeless copy of the table, so any value can be stored (as damage could)
        c.executescript(
            "CREATE TABLE t AS SELECT * FROM surefoot_schema; DROP TABLE surefoot_schema;"
            "CREATE TABLE surefoot_schema (component TEXT PRIMARY KEY, version);"
            "INSERT INTO surefoot_schema SELECT * FROM t; DROP TABLE t;"
            f"UPDATE surefoot_schema SET version = {value} WHERE component = 'statestore';"
        )
    with pytest.raises(CorruptionError, match="not a migration number") as caught:
        Store(f"sqlite:///{path}")
    assert str(path) in str(caught.value) and "restore it from a backup" in str(caught.value)


def test_no_record_of_tables_that_exist_is_not_retryable(tmp_path: Path) -> None:
    """The row gone: another program's table or a lost record; SchemaVersionError (not
    the retryable StoreUnavailableError), naming integrity_check to tell which."""
    path = _store_file(tmp_path / "s.db")
    _edit(path, "DELETE FROM surefoot_schema WHERE component = 'statestore'")
    with pytest.raises(SchemaVersionError, match="did not create") as caught:
        Store(f"sqlite:///{path}")
    assert "PRAGMA integrity_check" in str(caught.value)


def test_a_newer_version_is_still_a_schema_version_error(tmp_path: Path) -> None:
    path = _store_file(tmp_path / "s.db")
    _edit(path, "UPDATE surefoot_schema SET version = 99 WHERE component = 'statestore'")
    with pytest.raises(SchemaVersionError, match="upgrade surefoot"):
        Store(f"sqlite:///{path}")


def test_a_sound_file_reopens(tmp_path: Path) -> None:
    path = _store_file(tmp_path / "s.db")
    _journal_file(path)
    for _ in range(2):
        with closing(Store(f"sqlite:///{path}")) as s:
            assert {k: e.value for k, e in s.snapshot().items()} == {f"k{i}": i for i in range(5)}
        st = storage.open(f"sqlite:///{path}")
        st.journal()
        st.close()


OPENER = textwrap.dedent(
    """
    import os, sys, time
    from surefoot import storage
    from surefoot.statebus import Store
    path, go, name = sys.argv[1], sys.argv[2], sys.argv[3]
    while not os.path.exists(go):
        time.sleep(0.001)
    s = Store(f"sqlite:///{path}")
    s.write(name, 1)
    st = storage.open(f"sqlite:///{path}")
    st.journal()
    st.close()
    s.close()
    print("ok")
    """
)


@pytest.mark.parametrize("attempt", range(3))
def test_two_processes_opening_a_new_file_together_both_succeed(
    tmp_path: Path, attempt: int
) -> None:
    """Migrations are serialised by BEGIN IMMEDIATE: the second process finds the first's
    record and applies nothing; neither meets "already exists"."""
    path, go = tmp_path / f"n{attempt}.db", tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", OPENER, str(path), str(go), f"p{i}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    time.sleep(0.5)  # both importing, then waiting for the go file
    go.touch()
    outs = [p.communicate(timeout=120) for p in procs]
    assert [(p.returncode, o[0].strip()) for p, o in zip(procs, outs, strict=True)] == [
        (0, "ok")
    ] * 2, outs
    with closing(sqlite3.connect(path)) as c:
        rows = dict(c.execute("SELECT component, version FROM surefoot_schema"))
    assert rows["statestore"] == len(STATE) and rows["durable"] == len(DURABLE)
