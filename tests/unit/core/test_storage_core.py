"""Storage URLs and the SQLite connection layer."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from surefoot import storage
from surefoot.errors import ConfigError, SchemaVersionError, StoreUnavailableError
from surefoot.storage.sqlite import SQLiteDB


@pytest.mark.parametrize(
    ("url", "scheme", "path"),
    [
        ("sqlite:///runs.db", "sqlite", "runs.db"),
        ("sqlite:////tmp/abs.db", "sqlite", "/tmp/abs.db"),
        ("memory://", "memory", ""),
        ("memory://team", "memory", "team"),
        ("postgres://u:pw@h/db", "postgresql", "u:pw@h/db"),
    ],
)
def test_parse_url(url: str, scheme: str, path: str) -> None:
    """Schemes map to backends and SQLite paths follow the three/four-slash rule."""
    p = storage.parse_url(url)
    assert p.scheme == scheme
    if scheme != "postgresql":
        assert p.path == path


@pytest.mark.parametrize("bad", ["runs.db", "mysql://x/y", "sqlite://relative.db", 3])
def test_bad_urls_are_config_errors(bad: object) -> None:
    """A malformed URL names itself and the accepted forms."""
    with pytest.raises(ConfigError, match="sqlite"):
        storage.parse_url(bad)  # type: ignore[arg-type]


def test_redact_hides_password() -> None:
    """Messages never show a password."""
    assert storage.redact("postgresql://u:secret@h/db") == "postgresql://u:***@h/db"


def test_sqlite_bare_url_is_a_fresh_temp_file() -> None:
    """sqlite:// alone opens a new temporary file."""
    a, b = storage.parse_url("sqlite://"), storage.parse_url("sqlite://")
    assert a.path != b.path and Path(a.path).exists()


def test_sqlite_pragmas(tmp_path: Path) -> None:
    """WAL and synchronous=FULL by default; NORMAL on request."""
    db = SQLiteDB(str(tmp_path / "a.db"))
    c = db.conn()
    assert c.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert c.execute("PRAGMA synchronous").fetchone()[0] == 2
    db2 = SQLiteDB(str(tmp_path / "b.db"), synchronous="normal")
    assert db2.conn().execute("PRAGMA synchronous").fetchone()[0] == 1


def test_write_counts_commits_and_rolls_back_on_error(tmp_path: Path) -> None:
    """A failed write transaction leaves nothing behind and is not counted."""
    db = SQLiteDB(str(tmp_path / "a.db"))
    db.migrate("t", ["CREATE TABLE t (x INTEGER)"])
    base = db.commits
    with db.write() as c:
        c.execute("INSERT INTO t VALUES (1)")
    with pytest.raises(RuntimeError), db.write() as c:
        c.execute("INSERT INTO t VALUES (2)")
        raise RuntimeError("boom")
    assert db.commits == base + 1
    assert db.conn().execute("SELECT x FROM t").fetchall() == [(1,)]


def test_one_connection_per_thread(tmp_path: Path) -> None:
    """Threads get their own connection."""
    db = SQLiteDB(str(tmp_path / "a.db"))
    seen: list[int] = []
    t = threading.Thread(target=lambda: seen.append(id(db.conn())))
    t.start()
    t.join()
    assert seen[0] != id(db.conn())


def test_not_a_database_is_refused_and_untouched(tmp_path: Path) -> None:
    """A file that is not SQLite fails clearly and keeps its bytes."""
    p = tmp_path / "notes.db"
    p.write_bytes(b"these are my notes, not a database" * 100)
    with pytest.raises(StoreUnavailableError, match="not a SQLite"):
        storage.open(f"sqlite:///{p}")
    assert p.read_bytes().startswith(b"these are my notes")


def test_foreign_database_is_refused_and_untouched(tmp_path: Path) -> None:
    """A SQLite file of another program is not migrated into."""
    p = tmp_path / "other.db"
    with sqlite3.connect(p) as c:
        c.execute("CREATE TABLE invoices (id INTEGER)")
    db = SQLiteDB(str(p))
    with pytest.raises(SchemaVersionError, match="not a surefoot database"):
        db.migrate("keys", ["CREATE TABLE k (x)"])
    with sqlite3.connect(p) as c:
        names = [r[0] for r in c.execute("SELECT name FROM sqlite_master")]
    assert names == ["invoices"]


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    """A database written by a newer surefoot fails clearly and is not changed."""
    p = str(tmp_path / "a.db")
    SQLiteDB(p).migrate("keys", ["CREATE TABLE k (x)", "CREATE TABLE k2 (x)"])
    with pytest.raises(SchemaVersionError, match="newer"):
        SQLiteDB(p).migrate("keys", ["CREATE TABLE k (x)"])


def test_migrations_apply_once(tmp_path: Path) -> None:
    """Reopening applies only the new migrations."""
    p = str(tmp_path / "a.db")
    SQLiteDB(p).migrate("c", ["CREATE TABLE a (x)"])
    SQLiteDB(p).migrate("c", ["CREATE TABLE a (x)", "CREATE TABLE b (x)"])
    c = sqlite3.connect(p)
    assert c.execute("SELECT version FROM surefoot_schema WHERE component='c'").fetchone() == (2,)


def test_missing_folder_is_a_clear_error(tmp_path: Path) -> None:
    """Opening a file in a folder that does not exist says so."""
    with pytest.raises(StoreUnavailableError, match="does not exist"):
        storage.open(f"sqlite:///{tmp_path}/nope/x.db")


def test_memory_named_is_shared() -> None:
    """memory://name returns one shared instance; memory:// a fresh one."""
    assert storage.open("memory://x") is storage.open("memory://x")
    assert storage.open("memory://") is not storage.open("memory://")
