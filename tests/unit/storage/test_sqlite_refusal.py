"""Refusing a SQLite file leaves its folder exactly as it was: no -wal, -shm or -journal."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from surefoot import storage
from surefoot.errors import CorruptionError, SchemaVersionError, StoreUnavailableError


def _surefoot_file(path: Path) -> bytes:
    st = storage.open(f"sqlite:///{path}")
    s = st.statestore("x")
    for i in range(200):
        s.write(f"k{i}", '"' + "v" * 300 + '"', author="a", trust="t", expect=None, now=1.0)
    st.close()
    return path.read_bytes()


def _listing(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _refused(folder: Path, name: str, error: type[Exception]) -> None:
    before = _listing(folder)
    url = f"sqlite:///{folder / name}"
    for part in ("statestore", "journal", "keystore"):
        with pytest.raises(error):
            getattr(storage.open(url), part)()
    assert _listing(folder) == before


@pytest.mark.parametrize("cut", [100, 4096, 3])  # the header, one page, a third of the file
def test_a_truncated_surefoot_file_is_refused_and_nothing_appears_beside_it(
    tmp_path: Path, cut: int
) -> None:
    """A surefoot file cut short raises CorruptionError (SQLite finds it malformed; before
    #27 a StoreUnavailableError, which workers retry as if the file would come back); the
    folder listing is unchanged."""
    data = _surefoot_file(tmp_path / "whole.db")
    (tmp_path / "whole.db").unlink()
    folder = tmp_path / "f"
    folder.mkdir()
    (folder / "team.db").write_bytes(data[: cut if cut > 3 else len(data) // 3])
    _refused(folder, "team.db", CorruptionError)


def test_a_file_that_is_not_sqlite_is_refused_and_left_alone(tmp_path: Path) -> None:
    """Bytes that are not SQLite are refused; the folder listing and the bytes are unchanged."""
    (tmp_path / "team.db").write_bytes(b"not a database" * 500)
    _refused(tmp_path, "team.db", StoreUnavailableError)


@pytest.mark.parametrize("mode", ["delete", "wal"])
def test_another_programs_database_is_refused_without_a_change(tmp_path: Path, mode: str) -> None:
    """A SQLite file with foreign tables is refused before WAL mode or a sidecar touches it."""
    other = sqlite3.connect(tmp_path / "app.db")
    other.execute(f"PRAGMA journal_mode={mode}")
    other.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    other.execute("INSERT INTO users VALUES (1, 'ada')")
    other.commit()
    other.close()
    _refused(tmp_path, "app.db", SchemaVersionError)
