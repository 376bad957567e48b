"""SIGKILL a worker journalling chunked values: every step row left behind reads back whole,
and the resumed run ends with the history an uncrashed run gives (SQLite, PostgreSQL)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from surefoot import durable, storage

pytestmark = pytest.mark.crash

TURNS = 400

APP = textwrap.dedent(
    """
    import sys
    from surefoot import durable

    app = durable.App(sys.argv[1], lease=1.0, poll=0.05, worker_id="doomed")

    @app.step
    def turn(history: list[str], i: int) -> list[str]:
        return [*history, f"turn {i}: " + "words and more words, " * 20]

    @app.workflow
    def chat(n: int) -> int:
        history: list[str] = []
        for i in range(n):
            history = turn(history, i)
        return len(history)

    app.start(chat, int(sys.argv[2]), run_id="chat").result(timeout=600)
    """
)


def _expected(i: int) -> list[str]:
    return [f"turn {k}: " + "words and more words, " * 20 for k in range(i + 1)]


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'runs.db'}"
        return
    u = f"{request.getfixturevalue('pg_url')}?schema=sf_t_{uuid.uuid4().hex[:12]}"
    yield u
    st: Any = storage.open(u)
    st.db.drop_schema()
    st.close()


def _steps_done(url: str) -> int:
    st: Any = storage.open(url)
    try:
        j = st.journal()
        return len(j.steps("chat")) if j.get_run("chat") else 0
    except Exception:
        return 0  # the journal is not created yet
    finally:
        st.close()


@pytest.mark.parametrize("kill_after", [25, 90])
def test_a_kill_mid_run_leaves_every_value_readable(
    url: str, tmp_path: Path, kill_after: int
) -> None:
    script = tmp_path / "chat_app.py"
    script.write_text(APP)
    proc = subprocess.Popen(
        [sys.executable, str(script), url, str(TURNS)], env={**os.environ}, cwd=tmp_path
    )
    try:
        deadline = time.monotonic() + 120
        while _steps_done(url) < kill_after:
            assert proc.poll() is None, "the worker ended before it was killed"
            assert time.monotonic() < deadline
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    app = durable.App(url, lease=1.0, poll=0.05, worker_id="rescuer")

    @app.step
    def turn(history: list[str], i: int) -> list[str]:
        return [*history, f"turn {i}: " + "words and more words, " * 20]

    @app.workflow
    def chat(n: int) -> int:
        history: list[str] = []
        for i in range(n):
            history = turn(history, i)
        return len(history)

    try:
        j: Any = app.journal
        assert j.chunks.usage("chat")[0] > 0
        left = app.show("chat").steps
        assert len(left) >= kill_after
        for s in left:  # every row the kill left reads back whole
            assert s.result == _expected(int(s.pos) - 1), s.pos
        time.sleep(1.2)  # the dead worker's lease runs out
        assert app.resume("chat").result(timeout=300) == TURNS
        last = app.show("chat").steps[-1].result
        assert json.dumps(last) == json.dumps(_expected(TURNS - 1))
    finally:
        app.close()
