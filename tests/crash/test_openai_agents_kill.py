"""An OpenAI Agents SDK agent on surefoot survives a SIGKILL at every kind of point.

Real processes: the agent (tests/crash/openai_agents_app.py: two parallel lookups, then a
refund declared an effect, then the answer) is killed inside a model request, inside a tool,
after the refund's effect but before its step is journalled, and while it waits for approval;
a new process resumes it. Counted at the ledger the model and the tools write: no completed
model request is asked again, no completed tool runs again, and the refund reaches the ledger
under one idempotency key (a second delivery, after the kill between effect and journal,
carries the same key, so a service that deduplicates on it applies it once).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

if os.environ.get("SUREFOOT_REQUIRE_SERVICES") == "1":
    import agents  # noqa: F401 - CI installs surefoot[openai-agents]
pytest.importorskip("agents", reason="surefoot[openai-agents] is not installed")

HERE = Path(__file__).parent


def _env(ledger: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "AGENTS_LEDGER": str(ledger), "OPENAI_AGENTS_DISABLE_TRACING": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    return {**env, **extra}


def _drive(db: str, run_id: str, env: dict[str, str], *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(HERE / "openai_agents_drive.py"), db, run_id, *extra],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_line(ledger: Path, line: str, proc: subprocess.Popen[str], limit: float = 60) -> None:
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if ledger.exists() and line in ledger.read_text().splitlines():
            return
        if proc.poll() is not None:
            raise AssertionError(f"the agent exited before {line!r}: {proc.communicate()}")
        time.sleep(0.05)
    raise AssertionError(f"{line!r} never reached the ledger")


def _lines(ledger: Path) -> list[str]:
    return [x for x in ledger.read_text().splitlines() if not x.startswith("paused")]


POINTS = ["model", "tool", "effect", "approval"]
# Every point on both journals (each test starts two processes that import the SDK: ~3 s
# of CPU each).
CASES = [(backend, p) for backend in ("sqlite", "postgresql") for p in POINTS]


@pytest.mark.parametrize(("backend", "point"), CASES)
def test_sigkill_at_each_point_repeats_no_completed_request_and_no_effect(
    tmp_path: Path, point: str, backend: str, request: pytest.FixtureRequest
) -> None:
    ledger = tmp_path / "ledger.txt"
    if backend == "sqlite":
        db = f"sqlite:///{tmp_path / 'runs.db'}"
    else:
        db = f"{request.getfixturevalue('pg_url')}?schema=sf_t_{uuid.uuid4().hex[:12]}"
    approve = "refund" if point == "approval" else ""
    env = _env(ledger, AGENTS_PAUSE="" if point == "approval" else point, AGENTS_APPROVE=approve)
    first = _drive(db, "run-1", env)
    if point == "approval":  # the run sleeps for its approval: the process waits on it
        _wait_for_line(ledger, "model 2", first)
        time.sleep(1.0)
    else:
        _wait_for_line(ledger, f"paused {point}", first)
        time.sleep(0.5)  # what finished beside the paused call has committed
    before = _lines(ledger)
    os.kill(first.pid, signal.SIGKILL)
    first.communicate()
    second = _drive(db, "run-1", _env(ledger, AGENTS_APPROVE=approve), "--approve")
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    assert out.strip() == "Refunded A1."
    lines = _lines(ledger)
    counts = Counter(lines)
    # every model turn and tool call completed before the kill is not asked again
    last_model = [x for x in before if x.startswith("model")][-1]
    # the call the kill cut off: the model turn asked last, or B2's lookup (A1's ran beside it)
    in_flight = {"model": last_model, "tool": "lookup B2", "effect": None, "approval": None}[point]
    for line in set(before):
        if line != in_flight and not line.startswith("refund"):
            assert counts[line] == 1, (line, lines)
    assert counts["model 1"] == counts["model 2"] == counts["model 3"] == 1 or point == "model"
    refunds = [x for x in lines if x.startswith("refund")]
    keys = {x.split()[-1] for x in refunds}
    assert keys == {"run-1:call_r"}, refunds  # one key, the run's and the model's call id
    if point == "effect":
        assert len(refunds) == 2  # delivered again after the kill, under the same key
    else:
        assert len(refunds) == 1
