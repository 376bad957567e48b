"""``App(url, create=False)`` opens only an existing journal: a mistyped path is an error
naming the URL, and nothing is created there."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from surefoot import FakeClock, storage
from surefoot.durable import App
from surefoot.errors import ConfigError


def _journal(url: str) -> None:
    with App(url, clock=FakeClock()) as app:

        @app.workflow
        def w() -> int:
            return 1

        assert app.start(w, run_id="r").result(timeout=10) == 1


def test_a_missing_sqlite_file_is_refused_and_not_created(tmp_path: Path) -> None:
    """create=False with a path that does not exist: ConfigError, and no file appears."""
    url = f"sqlite:///{tmp_path / 'typo.db'}"
    app = App(url, create=False)
    with pytest.raises(ConfigError, match=r"typo\.db.*does not exist.*create=True"):
        app.list_runs()
    assert list(tmp_path.iterdir()) == []


def test_a_file_without_a_journal_is_refused_untouched(tmp_path: Path) -> None:
    """An empty file, or a surefoot file holding only keys, is no journal: refused, and the
    directory is left as it was."""
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    keys = tmp_path / "keys.db"
    st = storage.open(f"sqlite:///{keys}")
    st.keystore()
    st.close()
    before = sorted(p.name for p in tmp_path.iterdir())
    for path in (empty, keys):
        with pytest.raises(ConfigError, match="holds no durable journal"):
            App(f"sqlite:///{path}", create=False).list_runs()
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    with pytest.raises(ConfigError, match="always makes a new"):
        App("sqlite://", create=False).list_runs()


def test_an_existing_journal_opens(tmp_path: Path) -> None:
    """create=False opens a journal made before, also while another app has it open."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    _journal(url)
    with App(url, create=False) as app:
        assert [r.run_id for r in app.list_runs()] == ["r"]
    with App(url) as writer:
        writer.list_runs()
        with App(url, create=False) as app:
            assert [r.run_id for r in app.list_runs()] == ["r"]


def test_configure_can_refuse_creating(tmp_path: Path) -> None:
    """configure(create=False) (what a worker's CLI sets) applies before the first open."""
    app = App()
    app.configure(url=f"sqlite:///{tmp_path / 'nope.db'}", create=False)
    with pytest.raises(ConfigError, match="does not exist"):
        app.list_runs()
    with pytest.raises(ConfigError, match="create must be True or False"):
        App(create="no")  # type: ignore[arg-type]


def test_a_postgres_schema_without_a_journal_is_refused(pg_url: str) -> None:
    """A PostgreSQL schema with no journal is refused with create=False; made, it opens."""
    url = f"{pg_url}?schema=sf_t_{uuid.uuid4().hex[:12]}"
    try:
        with pytest.raises(ConfigError, match="holds no durable journal"):
            App(url, create=False).list_runs()
        _journal(url)
        with App(url, create=False) as app:
            assert [r.run_id for r in app.list_runs()] == ["r"]
    finally:
        st = storage.open(url)
        st.db.drop_schema()  # type: ignore[attr-defined]
        st.close()
