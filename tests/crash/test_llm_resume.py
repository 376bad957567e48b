"""A durable run killed (SIGKILL) in the middle of a model call and resumed pays for no
completed call twice: counted at the fake provider, over the real OpenAI SDK."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from surefoot.testing import FakeProvider, Reply

pytestmark = pytest.mark.crash

APP = Path(__file__).parent / "llm_resume_app.py"


def _run(db: str, url: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(APP), db, url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(APP.parent)},
    )


def _wait_for(fp: FakeProvider, n: int, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while fp.count() < n:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"the run sent {fp.count()} requests, not {n}"
        time.sleep(0.02)


def test_killed_mid_call_and_resumed_pays_each_completed_call_once(tmp_path: Path) -> None:
    """Kill -9 while call 2 is in flight; the rerun asks 2 and 3 only; 1 is paid once."""
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    with FakeProvider() as fp:
        fp.script(Reply(), Reply(delay=60))  # call 2 hangs until the kill
        first = _run(db, fp.openai_url)
        with first:
            _wait_for(fp, 2, first)
            first.kill()  # SIGKILL: no cleanup, no flush
            first.wait(timeout=10)
        assert fp.answered == [1]  # call 1 was paid; call 2 never answered

        second = _run(db, fp.openai_url)
        with second:
            out, err = second.communicate(timeout=120)
        assert second.returncode == 0, err
        result = json.loads(out)

        asked = [r.messages[0]["content"] for r in fp.received]
        answered = [fp.received[n - 1].messages[0]["content"] for n in fp.answered]
    assert asked == ["question 1", "question 2", "question 2", "question 3"]
    assert sorted(answered) == ["question 1", "question 2", "question 3"]  # each paid once
    assert [x["text"] for x in result] == [
        fp.text_for("openai", [{"role": "user", "content": f"question {i}"}]) for i in (1, 2, 3)
    ]
