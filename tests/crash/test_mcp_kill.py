"""A workflow process calling an MCP server is SIGKILLed before, during and after a call and
resumed: no completed call is sent again and no effect is applied twice per key, counted
in the server's own ledger (a real MCP server over streamable HTTP, on loopback)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from surefoot import storage

pytest.importorskip("mcp")
HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent / "unit" / "integrations" / "mcp"))

from mcp_servers import HttpServer, applied, received, wait_until  # noqa: E402

pytestmark = pytest.mark.crash

APP = HERE / "mcp_workflow_app.py"
KEYS = ["mcp-run:2", "mcp-run:3", "mcp-run:4"]  # the three appends; 1 is the listing


def _run(db: str, url: str, texts: str, crash: str | None = None) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "SUREFOOT_CRASH"}
    if crash:
        env["SUREFOOT_CRASH"] = crash
    return subprocess.Popen(
        [sys.executable, str(APP), db, url, texts],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


@pytest.fixture
def pg_db(pg_url: str) -> Iterator[str]:
    """A PostgreSQL schema of this test only (dropped after)."""
    url = f"{pg_url}?schema=sf_t_{uuid.uuid4().hex[:12]}"
    yield url
    st: Any = storage.open(url)
    st.db.drop_schema()
    st.close()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[HttpServer]:
    s = HttpServer(tmp_path / "state").start()
    try:
        yield s
    finally:
        s.kill()


@pytest.mark.parametrize(
    ("point", "resent"),
    [
        ("before_step", 0),  # nothing sent
        ("before_effect", 0),  # the intent committed, nothing sent
        ("after_effect", 1),  # applied, result not journalled: resent with its key
        ("after_journal", 0),  # journalled: replayed, never resent
    ],
)
def test_killed_at_a_crash_point_and_resumed(
    tmp_path: Path, server: HttpServer, point: str, resent: int
) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    first = _run(db, server.url, "a,b,c", crash=f"{point}:3:exit")  # the second append
    _, err = first.communicate(timeout=120)
    assert first.returncode == 137, err
    second = _run(db, server.url, "a,b,c")
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    assert json.loads(out) == [1, 2, 3, 3]
    assert applied(server.state) == dict.fromkeys(KEYS, 1)  # no effect twice per key
    requests = received(server.state)
    assert requests == {KEYS[0]: 1, KEYS[1]: 1 + resent, KEYS[2]: 1}


@pytest.mark.parametrize("text", ["hold", "hold-after"])
def test_sigkill_during_a_call_and_resumed(tmp_path: Path, server: HttpServer, text: str) -> None:
    """SIGKILL while the server holds the second call: before it applied it (``hold``) or
    after (``hold-after``, the reply lost). The resumed run resends it with its key."""
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    first = _run(db, server.url, f"a,{text},c")

    def in_flight() -> bool:
        assert first.poll() is None, first.communicate()
        return received(server.state).get(KEYS[1], 0) > 0

    wait_until(in_flight, "the second call in flight")
    os.kill(first.pid, signal.SIGKILL)
    first.communicate(timeout=30)
    assert first.returncode == -signal.SIGKILL
    (server.state / "release").write_text("1")  # the held request now finishes
    second = _run(db, server.url, f"a,{text},c")
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    assert json.loads(out) == [1, 2, 3, 3]
    assert applied(server.state) == dict.fromkeys(KEYS, 1)
    requests = received(server.state)
    assert requests[KEYS[0]] == 1 and requests[KEYS[2]] == 1  # completed calls: never resent
    assert requests[KEYS[1]] == 2  # in flight at the kill: sent again, applied once


@pytest.mark.services
def test_sigkill_after_applying_on_postgresql(pg_db: str, server: HttpServer) -> None:
    """The same on a PostgreSQL journal: killed while the server holds an applied call."""
    first = _run(pg_db, server.url, "a,hold-after,c")
    wait_until(lambda: applied(server.state).get(KEYS[1]) == 1, "the second call applied")
    os.kill(first.pid, signal.SIGKILL)
    first.communicate(timeout=30)
    (server.state / "release").write_text("1")
    second = _run(pg_db, server.url, "a,hold-after,c")
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    assert json.loads(out) == [1, 2, 3, 3]
    assert applied(server.state) == dict.fromkeys(KEYS, 1)
    assert received(server.state) == {KEYS[0]: 1, KEYS[1]: 2, KEYS[2]: 1}
