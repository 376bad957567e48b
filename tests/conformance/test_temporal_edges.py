"""The edges of running on Temporal, with real `surefoot engine` processes on a dev server:
a namespace the cluster lacks is one clear error before anything is announced, `engine show`
answers at once when no worker serves the run, a SIGTERM stops a worker cleanly every time,
a retried attempt is one line on the worker's stderr, and messages point at commands that
work on Temporal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from surefoot import durable
from surefoot.errors import RunFailedError, UnknownRunError

pytestmark = [pytest.mark.temporal, pytest.mark.crash]

SRC = Path(__file__).resolve().parents[2] / "src"

FLOWS = """
from surefoot import durable

app = durable.App("temporal://127.0.0.1:7233")  # --url replaces it
tries = {"n": 0}


@app.step(retry=3)
async def flaky(x: int) -> int:
    tries["n"] += 1
    if tries["n"] < 3:
        raise ConnectionError(f"provider hiccup {tries['n']}")
    return x + 1


@app.workflow
async def pipeline(x: int) -> int:
    return await flaky(x)


@app.workflow
async def waiter() -> str:
    return await app.wait_for("go")
"""


class Env:
    """One test's flows module, task queue and `surefoot engine` processes."""

    def __init__(self, tmp: Path, address: str) -> None:
        (tmp / "edgeflows.py").write_text(FLOWS)
        self.address = address
        self.url = f"temporal://{address}?task_queue=edge-{uuid.uuid4().hex[:8]}&heartbeat=1"
        self.env = {**os.environ, "PYTHONPATH": f"{tmp}{os.pathsep}{SRC}"}
        self.procs: list[subprocess.Popen[str]] = []

    def worker(self, url: str | None = None) -> subprocess.Popen[str]:
        argv = [sys.executable, "-m", "surefoot", "engine", "worker", "--app", "edgeflows:app"]
        proc = subprocess.Popen(
            [*argv, "--url", url or self.url],
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.procs.append(proc)
        return proc

    def cli(self, *args: str, url: str | None = None) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "surefoot", "engine", *args]
        argv += ["--app", "edgeflows:app", "--url", url or self.url]
        return subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=60)

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.communicate()


@pytest.fixture
def edge(temporal_server: Any, tmp_path: Path) -> Iterator[Env]:
    env = Env(tmp_path, temporal_server.address)
    try:
        yield env
    finally:
        env.close()


def test_an_unknown_namespace_is_one_line_before_anything_is_announced(edge: Env) -> None:
    """`engine worker` and `engine start` on a namespace the cluster lacks: exit 1, one line
    naming it and how to create it; the worker prints no "serving" line first."""
    bad = edge.url.replace("?", "?namespace=no-such-ns&")
    proc = edge.worker(bad)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and out == "", (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "namespace 'no-such-ns' does not exist" in lines[0], err
    assert "temporal operator namespace create" in lines[0]
    started = edge.cli("start", "pipeline", "[1]", url=bad)
    assert started.returncode == 1 and started.stdout == ""
    assert started.stderr.count("\n") == 1 and "no-such-ns" in started.stderr, started.stderr


def test_an_unknown_namespace_from_the_api_is_a_config_error_and_nothing_else(
    edge: Env, tmp_path: Path
) -> None:
    """app.start on it raises ConfigError; no raw RPCError, no "Task exception was never
    retrieved" from an in-process worker left behind."""
    bad = edge.url.replace("?", "?namespace=no-such-ns&")
    script = textwrap.dedent(f"""
        from edgeflows import app, pipeline
        from surefoot.errors import ConfigError
        app.configure(url={bad!r})
        try:
            app.start(pipeline, 1, run_id="ns-1")
        except ConfigError as exc:
            print("refused:", exc)
        app.close()
    """)
    proc = subprocess.run(
        [sys.executable, "-c", script], env=edge.env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("refused: namespace 'no-such-ns' does not exist")
    assert "Task exception was never retrieved" not in proc.stderr
    assert "Traceback" not in proc.stderr and "RPCError" not in proc.stderr


def test_engine_show_answers_at_once_when_no_worker_serves_the_run(edge: Env) -> None:
    """A run enqueued with no worker anywhere: `engine show` prints it as running (it used to
    wait for the run's end, over 100 s)."""
    started = edge.cli("start", "waiter", "--run-id", "lonely-1")
    assert started.returncode == 0, started.stderr
    shown = edge.cli("show", "lonely-1")  # timeout=60 in cli(): a hang fails the test
    assert shown.returncode == 0, shown.stderr
    assert "status    running" in shown.stdout and "waiter" in shown.stdout


@pytest.mark.parametrize("n", [5])
def test_a_worker_stops_cleanly_on_sigterm_every_time(edge: Env, n: int) -> None:
    """Started, given runs to serve (a retried step, a run waiting for a signal), then sent
    SIGTERM: exit code 0 every time (it was -6 "PyGILState_Release … finalizing" or -11 in
    4 of 17 stops), nothing on stderr but the step's own lines."""
    for i in range(n):
        proc = edge.worker()
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("surefoot worker on")
        assert edge.cli("start", "waiter", "--run-id", f"wait-{i}").returncode == 0
        done = edge.cli("start", "pipeline", "[1]", "--run-id", f"stop-{i}", "--wait", "30")
        assert done.returncode == 0 and done.stdout.strip() == "2", done.stderr
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, f"stop {i + 1} of {n}: rc {proc.returncode}\n{err}"
        assert "Fatal Python error" not in err


def test_a_retried_attempt_is_one_line_on_the_workers_stderr(edge: Env) -> None:
    """Two failed attempts of `flaky`, then success: two lines, each naming the step, its
    position, the run, the attempt, the error and what comes next; no traceback."""
    proc = edge.worker()
    assert proc.stdout is not None and proc.stdout.readline()
    done = edge.cli("start", "pipeline", "[5]", "--run-id", "retry-1", "--wait", "30")
    assert done.returncode == 0 and done.stdout.strip() == "6", done.stderr
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    lines = err.strip().splitlines()
    assert "Traceback" not in err and len(lines) == 2, err
    assert "step 'flaky' (position 1) of run 'retry-1' failed on attempt 1" in lines[0]
    assert "ConnectionError: provider hiccup 1; attempt 2 in" in lines[0]
    assert "failed on attempt 2" in lines[1]


def test_messages_point_at_commands_that_work_on_temporal(edge: Env) -> None:
    """An unknown run points at `temporal workflow list`; a failed run at `surefoot engine
    show`; neither at `surefoot runs …`, which refuse temporal:// URLs."""
    app = durable.App(edge.url)

    @app.step(retry=1)
    async def boom() -> None:
        raise ValueError("no")

    @app.workflow
    async def fails() -> None:
        await boom()

    try:
        with pytest.raises(UnknownRunError) as unknown:
            app.handle("no-such-run")
        assert "temporal workflow list" in str(unknown.value)
        assert "surefoot runs" not in str(unknown.value)
        with pytest.raises(RunFailedError) as failed:
            app.start(fails, run_id="fails-1").result(timeout=30)
        assert "surefoot engine show fails-1" in str(failed.value)
        assert "surefoot runs" not in str(failed.value)
    finally:
        app.close()
