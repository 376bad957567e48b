"""A forked child opens its own SQLite connection: a connection is never shared across
``fork`` (SQLite forbids it), even though the check no longer asks the system for the pid
on every write (a fork hook keeps it).

The fork happens in a fresh interpreter with one thread: forking the test process, whose
other tests leave threads behind, could hand the child a lock another thread held.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from surefoot.storage.sqlite import SQLiteDB

SCRIPT = textwrap.dedent(
    """
    import os, sys
    from surefoot.storage.sqlite import SQLiteDB

    db = SQLiteDB(sys.argv[1])
    db.migrate("t", ["CREATE TABLE t (k INTEGER PRIMARY KEY, who TEXT)"])
    parent = db.conn()
    assert db.conn() is parent  # kept within a process and thread
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report whether it got a new connection, then write with it
        code = 1
        try:
            os.close(r)
            fresh = db.conn() is not parent
            db.write_one("INSERT INTO t (who) VALUES (?)", ("child",))
            os.write(w, b"new" if fresh else b"same")
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    told = os.read(r, 16).decode()
    _, status = os.waitpid(pid, 0)
    same = db.conn() is parent  # the parent keeps its own
    db.write_one("INSERT INTO t (who) VALUES (?)", ("parent",))
    print(told, os.waitstatus_to_exitcode(status), same)
    db.close()
    """
)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_writes_through_a_connection_of_its_own(tmp_path: Path) -> None:
    path = tmp_path / "f.db"
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["new", "0", "True"]
    db = SQLiteDB(str(path))
    assert db.read("SELECT who FROM t ORDER BY k") == [("child",), ("parent",)]
    db.close()
