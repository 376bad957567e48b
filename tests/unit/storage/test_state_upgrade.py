"""A state database written before lineage and merges were kept opens and upgrades in place."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from surefoot.statebus import Store
from surefoot.storage.sqlite._state import MIGRATIONS


def test_a_version_one_sqlite_state_table_is_migrated_and_loses_nothing(tmp_path: Path) -> None:
    """Rows from the first schema read back with lineage = version (nothing counted lost);
    the upgraded file takes writes, lost-update counts and merges."""
    path = tmp_path / "old.db"
    c = sqlite3.connect(path)
    c.execute("PRAGMA journal_mode=WAL")
    c.execute("CREATE TABLE surefoot_schema (component TEXT PRIMARY KEY, version INTEGER NOT NULL)")
    for stmt in MIGRATIONS[0].split(";"):
        c.execute(stmt)
    c.execute("INSERT INTO surefoot_schema VALUES ('statestore', 1)")
    c.execute(
        "INSERT INTO sf_state VALUES (?, ?, ?, 3, 3, 'ann', 'trusted', 1.0)",
        ("team", "report", '["a","b"]'),
    )
    c.commit()
    c.close()
    st = Store(f"sqlite:///{path}", "team")
    st.register_agent("ann")
    e = st.read("report")
    assert e is not None and (e.value, e.version, e.lineage) == (["a", "b"], 3, 3)
    assert st.lost_updates == 0
    ann = st.session("ann")
    stale = ann.read("report")
    st.write("report", ["a", "b", "c"])
    ann.write("report", [*stale.value, "d"])  # type: ignore[union-attr]
    assert st.lost_updates == 1
    st.declare_merge("log", "append")
    assert st.merge("log", 1).applied and st.read("log").value == [1]  # type: ignore[union-attr]
    st.close()
