"""Journal files are private: a new SQLite journal and its WAL files are owner-only."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from surefoot.durable import App


def test_a_new_journal_file_is_owner_only(tmp_path: Path) -> None:
    """The journal file, its -wal and -shm are created 0600 (the umask notwithstanding)."""
    old = os.umask(0o022)
    try:
        app = App(f"sqlite:///{tmp_path / 'runs.db'}")

        @app.workflow
        def job() -> int:
            return 1

        app.start(job).result(timeout=5)
        modes = {
            p.name: stat.S_IMODE(p.stat().st_mode)
            for p in tmp_path.iterdir()
            if p.name.startswith("runs.db")
        }
        app.close()
    finally:
        os.umask(old)
    assert modes["runs.db"] == 0o600
    # the liveness lock files' directory (the app held its lock while its run executed)
    assert modes.pop("runs.db-workers", 0o700) == 0o700
    assert all(m == 0o600 for m in modes.values()), modes


def test_an_existing_file_keeps_its_permissions(tmp_path: Path) -> None:
    """A journal file made by someone else keeps the mode they gave it."""
    path = tmp_path / "shared.db"
    path.touch(mode=0o640)
    os.chmod(path, 0o640)
    app = App(f"sqlite:///{path}")
    app.journal  # noqa: B018 - opening makes the journal in it
    app.close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
