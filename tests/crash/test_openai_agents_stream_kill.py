"""A streamed OpenAI Agents SDK run survives a SIGKILL in the middle of the model's stream.

Real processes (tests/crash/openai_agents_stream_app.py): the first streams two of the
model's text deltas and is killed; a reader in this process follows the run's token stream
across the kill; a new process resumes the run. The reader sees every offset once, the
killed attempt's tokens, then a ``retry`` marker before the new attempt's tokens, and the
final attempt's text equals the journalled response's text and the run's answer. On SQLite
and PostgreSQL.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

if os.environ.get("SUREFOOT_REQUIRE_SERVICES") == "1":
    import agents  # noqa: F401 - CI installs surefoot[openai-agents]
pytest.importorskip("agents", reason="surefoot[openai-agents] is not installed")

from surefoot import durable

HERE = Path(__file__).parent
RUN = "run-s"
TEXT = "Refunds take five working days."


def _drive(db: str, ledger: Path, pause: str) -> subprocess.Popen[str]:
    env = {**os.environ, "AGENTS_LEDGER": str(ledger), "OPENAI_AGENTS_DISABLE_TRACING": "1"}
    env["AGENTS_PAUSE"] = pause
    return subprocess.Popen(
        [sys.executable, str(HERE / "openai_agents_stream_app.py"), db, RUN],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _follow(db: str, events: list[Any]) -> None:
    app = durable.App(db, poll=0.02, create=False)
    try:
        events.extend(app.handle(RUN).stream(timeout=120))
    finally:
        app.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_sigkill_mid_stream_then_resume_marks_the_retry_and_keeps_the_journalled_text(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    ledger = tmp_path / "ledger.txt"
    if backend == "sqlite":
        db = f"sqlite:///{tmp_path / 'runs.db'}"
    else:
        db = f"{request.getfixturevalue('pg_url')}?schema=sf_t_{uuid.uuid4().hex[:12]}"
    first = _drive(db, ledger, "stream")
    deadline = time.monotonic() + 60
    while not (ledger.exists() and "paused stream" in ledger.read_text()):
        assert first.poll() is None, first.communicate()
        assert time.monotonic() < deadline, "the model never paused mid-stream"
        time.sleep(0.05)
    events: list[Any] = []
    reader = threading.Thread(target=_follow, args=(db, events), daemon=True)
    reader.start()
    deadline = time.monotonic() + 30
    while sum(1 for e in events if e.kind == "token") < 2:  # the killed attempt's tokens
        assert time.monotonic() < deadline, f"the first tokens never reached a reader: {events}"
        time.sleep(0.05)
    os.kill(first.pid, signal.SIGKILL)
    first.communicate()
    second = _drive(db, ledger, "")
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    assert out.strip() == TEXT
    reader.join(timeout=60)
    assert not reader.is_alive()

    assert [e.offset for e in events] == list(range(1, len(events) + 1))  # each once, in order
    tokens = [(e.kind, e.data) for e in events if e.kind in ("token", "retry")]
    assert tokens == [
        ("token", "Refunds "),
        ("token", "take "),
        ("retry", None),  # before the new attempt's tokens: a reader drops what it held
        *[("token", p) for p in ["Refunds ", "take ", "five ", "working ", "days."]],
    ]
    retry = next(e for e in events if e.kind == "retry")
    assert retry.epoch > events[0].epoch  # the resumed run's execution, after the crash
    with durable.App(db, create=False) as app:
        (step,) = [s for s in app.show(RUN).steps if s.name == "openai_agents.model"]
        journalled = step.result["output"][0]["content"][0]["text"]
    assert durable.step_texts(events) == {step.pos: journalled}
    assert journalled == TEXT
    # the killed process streamed two pieces; the resumed one streamed all five, once
    assert ledger.read_text().splitlines().count("piece 0") == 2
    assert ledger.read_text().splitlines().count("piece 4") == 1
