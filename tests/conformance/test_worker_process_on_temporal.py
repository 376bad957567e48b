"""`surefoot engine worker` processes on Temporal: SIGKILLed mid-step, and driven by the CLI.

The worker is a real process (the CLI entry); the steps write to a ledger file outside it.
A new worker finishes the run: completed steps do not run again, the step in flight runs
again once (at-least-once, like an embedded resume), and an effect with no key that was in
flight sends the run to needs_attention instead of being repeated. `surefoot engine start`,
`signal` and `show` drive and read runs from the command line.
"""

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
from _conformance_support import until

from surefoot.errors import RunFailedError

pytestmark = [pytest.mark.temporal, pytest.mark.crash]

SRC = Path(__file__).resolve().parents[2] / "src"

FLOWS = """
import asyncio
import json
import os

from surefoot import durable

app = durable.App("temporal://127.0.0.1:7233")  # the worker's --url replaces it


def note(*parts):
    with open(os.environ["KILL_LEDGER"], "a") as f:
        f.write(" ".join(str(p) for p in parts) + "\\n")


@app.step
async def first(x: int) -> int:
    note("first", x)
    return x + 1


@app.step
async def slow(x: int) -> int:
    note("slow-start", os.getpid())
    await asyncio.sleep(2.0)
    note("slow-end", os.getpid())
    return x * 2


@app.step
async def last(x: int) -> int:
    note("last", x)
    return x + 100


@app.step(effect=True)
async def post(text: str) -> str:
    note("post-start", os.getpid())
    await asyncio.sleep(2.0)
    return "posted " + text


@app.workflow
async def pipeline(x: int) -> int:
    return await last(await slow(await first(x)))


@app.workflow
async def keyless(text: str) -> str:
    return await post(text)
"""


class Workers:
    """Worker processes of one test, each killed or stopped by its pid."""

    def __init__(self, tmp: Path, url: str) -> None:
        self.tmp, self.url = tmp, url
        self.procs: list[subprocess.Popen[str]] = []
        self.env = {
            **os.environ,
            "PYTHONPATH": f"{tmp}{os.pathsep}{SRC}",
            "KILL_LEDGER": str(tmp / "ledger.txt"),
        }

    def start(self) -> subprocess.Popen[str]:
        argv = [sys.executable, "-m", "surefoot", "engine", "worker"]
        argv += ["--app", "killflows:app", "--url", self.url]
        proc = subprocess.Popen(argv, env=self.env, stdout=subprocess.PIPE, text=True)
        self.procs.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline()  # printed once it polls
        assert line.startswith("surefoot worker on"), line
        return proc

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            if p.stdout is not None:
                p.stdout.close()


@pytest.fixture
def setup(temporal_server: Any, tmp_path: Path) -> Iterator[tuple[Workers, Any, Path]]:
    """A flows module in tmp_path, its app (the client side here) and its worker processes."""
    (tmp_path / "killflows.py").write_text(FLOWS)
    queue = f"kill-{uuid.uuid4().hex[:8]}"
    url = f"temporal://{temporal_server.address}?task_queue={queue}&heartbeat=1&sticky=1"
    os.environ["KILL_LEDGER"] = str(tmp_path / "ledger.txt")
    sys.path.insert(0, str(tmp_path))
    import killflows

    killflows.app.configure(url=url)
    workers = Workers(tmp_path, url)
    try:
        yield workers, killflows, tmp_path / "ledger.txt"
    finally:
        workers.close()
        killflows.app.close()
        sys.path.remove(str(tmp_path))
        sys.modules.pop("killflows", None)


def _lines(ledger: Path) -> list[str]:
    return ledger.read_text().splitlines() if ledger.exists() else []


def test_a_killed_worker_repeats_only_the_step_in_flight(setup: tuple[Workers, Any, Path]) -> None:
    """SIGKILL during `slow`: a new worker reruns `slow` once; `first` and `last` ran once."""
    workers, flows, ledger = setup
    victim = workers.start()
    handle = flows.app.enqueue(flows.pipeline, 1, run_id="kill-1")
    until(lambda: any(x.startswith("slow-start") for x in _lines(ledger)), "slow to start")
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()
    workers.start()
    assert handle.result(timeout=60) == 104
    got = [x.split()[0] for x in _lines(ledger)]
    assert got == ["first", "slow-start", "slow-start", "slow-end", "last"]


def test_a_keyless_effect_in_flight_goes_to_needs_attention(
    setup: tuple[Workers, Any, Path],
) -> None:
    """SIGKILL during an effect with no key: not sent again; the run needs attention."""
    workers, flows, ledger = setup
    victim = workers.start()
    handle = flows.app.enqueue(flows.keyless, "hello", run_id="kill-2")
    until(lambda: any(x.startswith("post-start") for x in _lines(ledger)), "post to start")
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()
    workers.start()
    with pytest.raises(RunFailedError) as info:
        handle.result(timeout=60)
    assert info.value.status == "needs_attention"
    assert "outcome_unknown" in str(info.value) or "no idempotency key" in str(info.value)
    assert [x.split()[0] for x in _lines(ledger)] == ["post-start"]


def _cli(workers: Workers, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "surefoot", "engine", *args]
    argv += ["--app", "killflows:app", "--url", workers.url]
    return subprocess.run(argv, env=workers.env, capture_output=True, text=True, timeout=90)


def test_the_cli_starts_signals_and_shows_runs(setup: tuple[Workers, Any, Path]) -> None:
    """`surefoot engine start --wait` prints the result; `show --json` the header; a signal to
    an ended run is one error line and exit 1; an unknown run is too."""
    workers, _, _ = setup
    workers.start()
    done = _cli(workers, "start", "pipeline", "[5]", "--run-id", "cli-1", "--wait", "60")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "112"
    shown = _cli(workers, "show", "cli-1", "--json")
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert (data["workflow"], data["version"], data["status"]) == ("pipeline", "1", "succeeded")
    assert data["args"] == [5] and data["result"] == 112
    late = _cli(workers, "signal", "cli-1", "go", '"x"', "--id", "s-1")
    assert late.returncode == 1 and "has ended (succeeded)" in late.stderr
    missing = _cli(workers, "show", "no-such-run")
    assert missing.returncode == 1 and "no-such-run" in missing.stderr
