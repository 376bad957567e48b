"""How long a step stays lost when its `surefoot engine worker` is SIGKILLed, on Temporal.

A dev server is started here (loopback, free ports, in memory) and stopped by pid at the end.
Per round: two `surefoot engine worker` processes on a fresh task queue, one run of a workflow
whose single step sleeps 30 s; ``--kill-after`` seconds into the step the worker running it
(named by the step itself, in a ledger file) is SIGKILLed; the figure is the time from the
kill to the step starting again on the other worker. With the default ``heartbeat=10`` the
lost attempt is known when its last heartbeat is 10 s old (heartbeats every third of it).
Usage::

    .venv/bin/python benchmarks/bench_temporal_recovery.py [--rounds 5] [--heartbeat 10]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

FLOWS = """
import asyncio, os, time
from surefoot import durable

app = durable.App("temporal://127.0.0.1:7233")  # --url replaces it


@app.step
async def slow(x: int) -> int:
    with open(os.environ["LEDGER"], "a") as f:
        f.write(f"{os.getpid()} {time.time()}\\n")
    await asyncio.sleep(30)
    return x


@app.workflow
async def job(x: int) -> int:
    return await slow(x)
"""


def _lines(path: Path) -> list[list[str]]:
    return [x.split() for x in path.read_text().splitlines()] if path.exists() else []


def one_round(address: str, tmp: Path, heartbeat: float | None, kill_after: float) -> float:
    queue = f"rec-{uuid.uuid4().hex[:8]}"
    url = f"temporal://{address}?task_queue={queue}"
    if heartbeat is not None:
        url += f"&heartbeat={heartbeat:g}"
    ledger = tmp / f"{queue}.txt"
    env = {**os.environ, "PYTHONPATH": str(tmp), "LEDGER": str(ledger)}
    cli = [sys.executable, "-m", "surefoot", "engine"]
    workers = []
    try:
        for _ in range(2):
            p = subprocess.Popen(
                [*cli, "worker", "--app", "recflows:app", "--url", url],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            assert p.stdout is not None
            assert p.stdout.readline().startswith("surefoot worker")
            workers.append(p)
        start = [*cli, "start", "job", "[1]", "--run-id", f"r-{queue}"]
        argv = [*start, "--app", "recflows:app", "--url", url]
        subprocess.run(argv, env=env, check=True, capture_output=True)
        while not _lines(ledger):
            time.sleep(0.01)
        time.sleep(kill_after)
        pid = int(_lines(ledger)[0][0])
        victim = next(p for p in workers if p.pid == pid)
        killed = time.time()
        os.kill(pid, signal.SIGKILL)
        victim.wait()
        while len(_lines(ledger)) < 2:
            time.sleep(0.01)
        return float(_lines(ledger)[1][1]) - killed
    finally:
        for p in workers:
            if p.poll() is None:
                p.kill()
            p.communicate()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--heartbeat", type=float, default=None, help="URL option (default: 10)")
    ap.add_argument("--kill-after", type=float, default=1.0, help="seconds into the step")
    ap.add_argument("--json", default=None, help="write the figures here")
    args = ap.parse_args()
    from surefoot.engines.temporal import DevServer

    with tempfile.TemporaryDirectory() as d, DevServer(None) as server:
        tmp = Path(d)
        (tmp / "recflows.py").write_text(FLOWS)
        got = []
        for i in range(args.rounds):
            s = one_round(server.address, tmp, args.heartbeat, args.kill_after)
            got.append(s)
            print(f"round {i + 1}: the step ran again {s:.2f} s after SIGKILL", flush=True)
    print(f"median {statistics.median(got):.2f} s, min {min(got):.2f}, max {max(got):.2f}")
    print(f"load average {os.getloadavg()[0]:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"seconds": got, "heartbeat": args.heartbeat}))


if __name__ == "__main__":
    main()
