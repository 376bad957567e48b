"""The same N-step workflow on surefoot (SQLite, PostgreSQL) and on Temporal, in one run.

One ``@app.workflow`` of N trivial async ``@app.step`` calls in sequence, registered on
three apps that differ only in their URL: ``sqlite:///…`` (a fresh file, WAL + FULL),
``postgresql://…?schema=…`` (a scratch schema, dropped at the end) and
``temporal://127.0.0.1:P?task_queue=…`` (a dev server started here on a fresh SQLite file
with ``--sqlite-pragma journal_mode=wal``, stopped by pid at the end; the worker runs in
this process, as ``app.start`` runs it). For each:

* **latency**: runs one at a time; per step = the run's wall time (``start`` to
  ``result``) / N; median and p95 over the runs;
* **throughput**: K runs started together (K = 1, 10, 100), steps per second = K * N /
  wall time until the last result.

Ratios are printed against surefoot on SQLite. Usage::

    .venv/bin/python benchmarks/bench_temporal.py [--steps 20] [--runs 10] [--json out.json]

PostgreSQL is skipped (said so) when it is not reachable; Temporal needs
``surefoot[temporal]``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from surefoot import durable, storage

PG = os.environ.get("SUREFOOT_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
CONCURRENCY = (1, 10, 100)


def build(app: durable.App, steps: int) -> durable.Workflow:
    """Register the N-step workflow on ``app``."""

    @app.step
    async def bump(i: int) -> int:
        return i + 1

    @app.workflow
    async def chain(n: int) -> int:
        i = 0
        for _ in range(n):
            i = await bump(i)
        return i

    return chain


def latency(app: durable.App, wf: durable.Workflow, steps: int, runs: int) -> dict[str, float]:
    """Per-step microseconds of runs executed one at a time: median and p95."""
    per_step = []
    for _ in range(runs):
        t0 = time.perf_counter()
        assert app.start(wf, steps, run_id=uuid.uuid4().hex).result(timeout=600) == steps
        per_step.append((time.perf_counter() - t0) / steps * 1e6)
    per_step.sort()
    return {
        "median_us": statistics.median(per_step),
        "p95_us": per_step[min(len(per_step) - 1, int(0.95 * len(per_step)))],
    }


def throughput(app: durable.App, wf: durable.Workflow, steps: int, k: int) -> float:
    """Steps per second with ``k`` runs started together."""
    t0 = time.perf_counter()
    handles = [app.start(wf, steps, run_id=uuid.uuid4().hex) for _ in range(k)]
    for h in handles:
        assert h.result(timeout=900) == steps
    return k * steps / (time.perf_counter() - t0)


def measure(name: str, url: str, steps: int, runs: int) -> dict[str, Any]:
    app = durable.App(url, poll=0.005)
    try:
        wf = build(app, steps)
        app.start(wf, 1, run_id=uuid.uuid4().hex).result(timeout=120)  # warm up (connect, schema)
        out: dict[str, Any] = {"engine": name, **latency(app, wf, steps, runs)}
        for k in CONCURRENCY:
            out[f"k{k}_steps_s"] = throughput(app, wf, steps, k)
        return out
    finally:
        app.close()


def _pg_up() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 5432), timeout=1.0):
            return True
    except OSError:
        return False


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20, help="steps per workflow (N)")
    p.add_argument("--runs", type=int, default=10, help="sequential runs for latency")
    p.add_argument("--json", type=Path, default=None, help="write the figures here")
    a = p.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        results.append(measure("surefoot SQLite", f"sqlite:///{tmp}/runs.db", a.steps, a.runs))
        print(results[-1], flush=True)
        if _pg_up():
            url = f"{PG}?schema=sf_bench_{uuid.uuid4().hex[:10]}"
            try:
                results.append(measure("surefoot PostgreSQL", url, a.steps, a.runs))
                print(results[-1], flush=True)
            finally:
                st: Any = storage.open(url)
                st.db.drop_schema()
                st.close()
        else:
            print("PostgreSQL not reachable on 127.0.0.1:5432: skipped")
        from surefoot.engines.temporal import DevServer

        with DevServer(Path(tmp) / "temporal.db") as server:
            url = f"temporal://{server.address}?task_queue=bench"
            results.append(measure("Temporal dev server", url, a.steps, a.runs))
            print(results[-1], flush=True)
    base = results[0]
    cols = ["median_us", "p95_us", *(f"k{k}_steps_s" for k in CONCURRENCY)]
    print(f"\nN={a.steps} steps per workflow, {a.runs} sequential runs; ratios vs surefoot SQLite")
    print("| engine | us/step median | p95 | steps/s K=1 | K=10 | K=100 |")
    print("|---|---|---|---|---|---|")
    for r in results:
        cells = []
        for c in cols:
            ratio = r[c] / base[c] if c.endswith("_us") else base[c] / r[c]
            cells.append(f"{r[c]:,.0f} (x{ratio:.1f})" if r is not base else f"{r[c]:,.0f}")
        print(f"| {r['engine']} | " + " | ".join(cells) + " |")
    print("(x: how many times slower than surefoot SQLite: latency ratio, or throughput ratio)")
    if a.json:
        a.json.write_text(json.dumps({"steps": a.steps, "runs": a.runs, "results": results}))


if __name__ == "__main__":
    main()
