"""Ctrl-C on ``surefoot worker``: it stops, exits 0 and says which runs it left in flight."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from surefoot.durable import App, load_app

SYNC_APP = """
import time

from surefoot import durable

app = durable.App("sqlite://")

@app.step
def slow(x: int) -> int:
    time.sleep(600)  # still executing when the worker is interrupted
    return x

@app.workflow
def hold(x: int) -> int:
    return slow(x)
"""

BLOCKING_APP = """
import asyncio

from surefoot import durable

app = durable.App("sqlite://")

@app.step
async def slow(x: int) -> int:
    await asyncio.sleep(600)  # still executing when the worker is interrupted
    return x

@app.workflow
async def hold(x: int) -> int:
    return await slow(x)
"""


def _wait_running(producer: App, ids: list[str], deadline: float) -> bool:
    while time.monotonic() < deadline:
        rows = {r.run_id: r for r in producer.list_runs(status="running", limit=100)}
        if all(i in rows and rows[i].owner == "w1" for i in ids):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("source", [BLOCKING_APP, SYNC_APP], ids=["async", "sync"])
def test_sigint_stops_the_worker_and_names_the_runs_it_left(tmp_path: Path, source: str) -> None:
    """SIGINT to a worker holding 2 runs: exit 0, one stderr line naming both, and both
    runs left running in the journal (resumable), not recorded as failed."""
    (tmp_path / "hold_app.py").write_text(source)
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    ref = f"{tmp_path / 'hold_app.py'}:app"
    producer = load_app(ref)
    producer.configure(url=url)
    ids = ["h1", "h2"]
    for i, rid in enumerate(ids):
        producer.enqueue("hold", i, run_id=rid)
    cmd = [sys.executable, "-m", "surefoot", "worker", "--db", url, "--app", ref]
    cmd += ["--worker-id", "w1", "--lease", "30", "--poll", "0.05"]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ)
    )
    try:
        assert _wait_running(producer, ids, time.monotonic() + 20), "w1 never held both runs"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)
        left = {r.run_id: (r.status, r.owner) for r in producer.list_runs(limit=100)}
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
        producer.close()
    assert proc.returncode == 0, err
    assert "Traceback" not in err  # nothing destroyed mid-step at exit
    assert left == {"h1": ("running", "w1"), "h2": ("running", "w1")}  # not failed: resumable
    assert (
        "surefoot worker w1 stopped (SIGINT): 2 runs in flight released (h1, h2); they resume "
        "after their lease (30 s) from any worker, at once under --worker-id w1"
    ) in err.splitlines()


def test_idle_exit_says_nothing_was_left(tmp_path: Path) -> None:
    """A worker that idles out with nothing executing says so: no runs in flight."""
    (tmp_path / "hold_app.py").write_text(BLOCKING_APP)
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    cmd = [sys.executable, "-m", "surefoot", "worker", "--db", url, "--create"]
    cmd += ["--app", f"{tmp_path / 'hold_app.py'}:app", "--worker-id", "w2"]
    cmd += ["--idle-exit", "0.2", "--poll", "0.05"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert "surefoot worker w2 stopped (idle for 0.2 s): no runs in flight" in r.stderr.splitlines()
