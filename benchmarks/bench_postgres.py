"""PostgreSQL speed, one run, ratios against the server's own floor and against DBOS.

* **step cost**: the raw floor (a single-row ``INSERT`` in autocommit over loopback TCP, so
  one round trip and one commit, ``synchronous_commit`` as the server has it), surefoot's
  cost per step of a 100-step workflow (``durable.App("postgresql://…")``, whole
  ``start(...).result()`` divided by the steps, so the run's creation and finish are included)
  and DBOS Transact's on the same server (its own database, ``dbos_bench``, created fresh at
  the start so its history never grows across runs, and dropped at the end). The three
  alternate block by block (100 inserts, one surefoot workflow, one DBOS workflow) so drift
  of the shared machine hits all alike; medians of the per-round ratios. Targets (issue 13
  section 3): surefoot <= 1.2x the floor per step; >= 4x faster than DBOS;
* **workers**: workflows per second of the 7-step agent with 1, 2 and 4 worker processes
  (``python -m surefoot_lab.agent.worker``, 16 runs at once each) on one schema, twice:
  with zero latency (target: 4 workers >= 0.9x of 1) and with every model and tool call
  taking ``--latency`` seconds (default 0.1 s, a realistic model call; target: 4 workers
  >= 3x of 1). The ledger must show no duplicate effect and no repeated model call;
* **backends**: versioned writes/s (``StateStore.write(expect=version)``) and stream
  appends/s with message ids on Redis, PostgreSQL and SQLite (``synchronous=FULL``). Each
  backend's durability setting is read back from the server and printed next to its figures
  (Redis ``CONFIG GET appendonly/appendfsync``, PostgreSQL ``synchronous_commit``, SQLite
  ``PRAGMA synchronous``): with ``appendonly no`` Redis keeps writes in memory only and is not
  durable, so its figures do not compare like for like with the other two.

Usage::

    .venv/bin/python benchmarks/bench_postgres.py [--rounds 5] [--runs 200] [--json out.json]

Every schema, key prefix, database (``dbos_bench``) and temporary file it creates is removed
at the end; worker processes it starts are stopped by pid.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

from surefoot import durable, storage
from surefoot_lab import agent

PG = os.environ.get("SUREFOOT_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
REDIS = os.environ.get("SUREFOOT_REDIS_URL", "redis://127.0.0.1:6379/0")


def _schema_url(base: str) -> str:
    return f"{base}?schema=sf_bench_{uuid.uuid4().hex[:10]}"


def _drop(url: str) -> None:
    st: Any = storage.open(url)
    st.db.drop_schema()
    st.close()


# -- step cost ---------------------------------------------------------------------------


def _dbos(pg: str) -> Any:
    """A launched DBOS on its own database, with the same 100-step workflow; or None."""
    try:
        from dbos import DBOS
    except ImportError:
        return None
    admin = psycopg.connect(pg, autocommit=True)
    # fresh each run: DBOS's workflow history must not grow across runs
    admin.execute("DROP DATABASE IF EXISTS dbos_bench WITH (FORCE)")
    admin.execute("CREATE DATABASE dbos_bench")
    admin.close()
    dbos_url = pg.rsplit("/", 1)[0] + "/dbos_bench"
    DBOS(config={"name": "sf-bench", "system_database_url": dbos_url, "log_level": "WARNING"})

    @DBOS.step()
    def add(a: int, b: int) -> int:
        return a + b

    @DBOS.workflow()
    def total(n: int) -> int:
        t = 0
        for i in range(n):
            t = add(t, i)
        return t

    DBOS.launch()
    return total


def bench_steps(pg: str, steps: int, rounds: int) -> dict[str, Any]:
    url = _schema_url(pg)
    app = durable.App(url)

    @app.step
    def add(a: int, b: int) -> int:
        return a + b

    @app.workflow
    def total(n: int) -> int:
        t = 0
        for i in range(n):
            t = add(t, i)
        return t

    floor_conn = psycopg.connect(pg, autocommit=True)
    sync = floor_conn.execute("SHOW synchronous_commit").fetchone()
    table = f"sf_floor_{uuid.uuid4().hex[:8]}"
    floor_conn.execute(f"CREATE TABLE {table} (id BIGINT, v TEXT)")
    dbos_total = _dbos(pg)
    expected = steps * (steps - 1) // 2
    assert app.start(total, steps, run_id="warm").result() == expected  # migrate, warm up
    if dbos_total is not None:
        assert dbos_total(steps) == expected
    db = app._storage.db  # type: ignore[union-attr]
    per: dict[str, list[float]] = {"floor": [], "surefoot": [], "dbos": []}
    cpu: dict[str, list[float]] = {"floor": [], "surefoot": []}  # this process only
    commits: list[int] = []
    k = 0
    for r in range(rounds):
        t0, p0 = time.perf_counter(), time.process_time()
        for _ in range(steps):
            k += 1
            floor_conn.execute(f"INSERT INTO {table} VALUES (%s, %s)", (k, '{"n": 1}'))
        per["floor"].append((time.perf_counter() - t0) / steps)
        cpu["floor"].append((time.process_time() - p0) / steps)
        c0 = db.commits
        t0, p0 = time.perf_counter(), time.process_time()
        assert app.start(total, steps, run_id=f"r{r}").result() == expected
        per["surefoot"].append((time.perf_counter() - t0) / steps)
        cpu["surefoot"].append((time.process_time() - p0) / steps)
        commits.append(db.commits - c0)
        if dbos_total is not None:
            t0 = time.perf_counter()
            assert dbos_total(steps) == expected
            per["dbos"].append((time.perf_counter() - t0) / steps)
    floor_conn.execute(f"DROP TABLE {table}")
    floor_conn.close()
    app.close()
    _drop(url)
    if dbos_total is not None:
        from dbos import DBOS

        DBOS.destroy()
        admin = psycopg.connect(pg, autocommit=True)
        admin.execute("DROP DATABASE IF EXISTS dbos_bench WITH (FORCE)")
        admin.close()
    us = {k: statistics.median(v) * 1e6 for k, v in per.items() if v}

    def per_round(a: list[float], b: list[float]) -> float:
        return round(statistics.median(x / y for x, y in zip(a, b, strict=True)), 2)

    out: dict[str, Any] = {
        "steps_per_workflow": steps,
        "rounds": rounds,
        "synchronous_commit": sync[0] if sync else "?",
        "floor_us": round(us["floor"]),
        "surefoot_step_us": round(us["surefoot"]),
        "surefoot_commits_per_workflow": statistics.median(commits),
        "surefoot_vs_floor": per_round(per["surefoot"], per["floor"]),
        "floor_cpu_us": round(statistics.median(cpu["floor"]) * 1e6),
        "surefoot_cpu_us": round(statistics.median(cpu["surefoot"]) * 1e6),
        "rounds_us": {k: [round(x * 1e6) for x in v] for k, v in per.items()},
    }
    if "dbos" in us:
        out["dbos_step_us"] = round(us["dbos"])
        out["dbos_vs_surefoot"] = per_round(per["dbos"], per["surefoot"])
    return out


# -- workers -----------------------------------------------------------------------------


def bench_workers(
    pg: str, runs: int, counts: list[int], folder: Path, latency: float = 0.0
) -> list[dict[str, Any]]:
    rows = []
    src = Path(__file__).resolve().parent.parent / "src"
    for n_workers in counts:
        url = _schema_url(pg)
        ledger = folder / f"ledger-{n_workers}-{latency}.db"
        app = durable.App(url, worker_id="bench-client")
        wf = agent.build_agent(app, agent.AgentServices(str(ledger)))["1"]
        app.journal  # noqa: B018 - migrate before the workers race to
        env = {**os.environ, "PYTHONPATH": str(src)}
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "surefoot_lab.agent.worker",
                    "--db",
                    url,
                    "--ledger",
                    str(ledger),
                    "--worker-id",
                    f"bench-w{i}",
                    "--concurrency",
                    "16",
                    "--poll",
                    "0.02",
                    "--latency",
                    str(latency),
                ],
                env=env,
                stdout=subprocess.DEVNULL,
            )
            for i in range(n_workers)
        ]
        try:
            journal = app.journal
            deadline = time.monotonic() + 60
            while len(journal.live_workflows(since=time.time() - 60)) == 0 or (
                _registered(url) < n_workers
            ):
                if time.monotonic() > deadline:
                    raise RuntimeError("workers did not start within 60 s")
                time.sleep(0.05)
            t0 = time.perf_counter()
            ids = [f"a{i}" for i in range(runs)]
            # 8 client threads: enqueueing (two commits a run) must not be what limits
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                list(
                    pool.map(
                        lambda run_id, app=app, wf=wf: agent.start_agent(
                            app, wf, f"question {run_id}", run_id=run_id, enqueue=True
                        ),
                        ids,
                    )
                )
            while True:
                done = len(app.list_runs(status="succeeded", limit=runs + 10))
                if done >= runs:
                    break
                if time.perf_counter() - t0 > 300:
                    raise RuntimeError(f"only {done}/{runs} runs finished in 300 s")
                time.sleep(0.02)
            elapsed = time.perf_counter() - t0
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        totals = agent.Ledger(str(ledger)).totals(ids)
        rows.append(
            {
                "workers": n_workers,
                "latency_s": latency,
                "runs": runs,
                "seconds": round(elapsed, 2),
                "workflows_per_s": round(runs / elapsed, 1),
                "duplicate_posts": totals.duplicate_posts,
                "repeated_model_calls": totals.repeated_model_calls,
            }
        )
        app.close()
        _drop(url)
    return rows


def _registered(url: str) -> int:
    st: Any = storage.open(url)
    try:
        return len(st.db.execute("SELECT worker_id FROM durable_workers", write=False))
    finally:
        st.close()


# -- backends ----------------------------------------------------------------------------


def bench_backends(n: int, rounds: int, folder: Path) -> list[dict[str, Any]]:
    urls = {
        "redis": f"{REDIS}?prefix=sf_bench_{uuid.uuid4().hex[:10]}",
        "postgresql": _schema_url(PG),
        "sqlite": f"sqlite:///{folder / 'backends.db'}",
    }
    opened = {k: storage.open(u) for k, u in urls.items()}
    stores = {k: st.statestore("bench") for k, st in opened.items()}
    streams = {k: st.stream("bench") for k, st in opened.items()}
    versions = dict.fromkeys(urls, 0)
    writes: dict[str, list[float]] = {k: [] for k in urls}
    appends: dict[str, list[float]] = {k: [] for k in urls}
    for seq in range(rounds):
        for k in urls:
            t0 = time.perf_counter()
            for i in range(n):
                versions[k] = (
                    stores[k]
                    .write(
                        "doc",
                        f'{{"n": {i}}}',
                        author="bench",
                        trust="system",
                        expect=versions[k],
                        now=0.0,
                    )
                    .version
                )
            writes[k].append(n / (time.perf_counter() - t0))
        for k in urls:
            t0 = time.perf_counter()
            for i in range(n):
                streams[k].append(f"m{seq}-{i}", f'{{"i": {i}}}', now=0.0)
            appends[k].append(n / (time.perf_counter() - t0))
    try:
        durability = _durability(urls, opened)
    finally:
        for k, st in opened.items():
            if k == "redis":
                st.db.delete_prefix()
            elif k == "postgresql":
                st.db.drop_schema()
            st.close()
    rows = [
        {
            "backend": k,
            "versioned_writes_per_s": round(statistics.median(writes[k])),
            "stream_appends_per_s": round(statistics.median(appends[k])),
            "durability": durability[k],
        }
        for k in urls
    ]
    return rows


def _durability(urls: dict[str, str], opened: dict[str, Any]) -> dict[str, str]:
    """Each backend's durability setting, read back from the server, not assumed."""
    import redis

    r = redis.Redis.from_url(urls["redis"].split("?", 1)[0])
    try:
        cfg = {**r.config_get("appendonly"), **r.config_get("appendfsync")}
    finally:
        r.close()
    aof = str(cfg.get("appendonly", "?"))
    redis_label = f"appendonly={aof} appendfsync={cfg.get('appendfsync', '?')}"
    if aof != "yes":
        redis_label += " (NOT durable: writes live in memory only)"
    with psycopg.connect(PG, autocommit=True) as c:
        row = c.execute("SHOW synchronous_commit").fetchone()
    level = opened["sqlite"].db.conn().execute("PRAGMA synchronous").fetchone()[0]
    names = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
    return {
        "redis": redis_label,
        "postgresql": f"synchronous_commit={row[0] if row else '?'}",
        "sqlite": f"synchronous={names.get(level, level)}",
    }


TARGETS: dict[str, tuple[float, str]] = {
    "step_vs_floor": (1.2, "<="),
    "dbos_vs_step": (4.0, ">="),
    "workers_zero": (0.9, ">="),  # 4 workers / 1 worker, zero latency
    "workers_latency": (3.0, ">="),  # 4 workers / 1 worker, model latency
}


def _verdict(name: str, value: float) -> str:
    limit, op = TARGETS[name]
    ok = value <= limit if op == "<=" else value >= limit
    return f"{'PASS' if ok else 'MISS'}  (target {op} {limit:g})"


def _scaling(rows: list[dict[str, Any]]) -> float | None:
    """Workflows/s with the most workers over workflows/s with one (None without both)."""
    by = {r["workers"]: r["workflows_per_s"] for r in rows}
    if 1 not in by or len(by) < 2:
        return None
    return float(by[max(by)] / by[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pg", default=PG, help="PostgreSQL URL (a schema is created and dropped)")
    ap.add_argument("--steps", type=int, default=100, help="steps per workflow")
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds")
    ap.add_argument("--runs", type=int, default=200, help="agent runs per worker count")
    ap.add_argument("--workers", default="1,2,4", help="worker counts")
    ap.add_argument("--latency", type=float, default=0.1, help="model/tool call seconds")
    ap.add_argument("--latency-runs", type=int, default=256, help="agent runs with latency")
    ap.add_argument("--ops", type=int, default=300, help="writes/appends per round")
    ap.add_argument("--skip", default="", help="comma list of sections to skip")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    a = ap.parse_args()
    skip = set(filter(None, a.skip.split(",")))
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    results: dict[str, Any] = {
        "pg": storage.redact(a.pg),
        "started": started,
        "load_average": os.getloadavg()[0],
    }
    verdicts: list[tuple[str, str, str]] = []
    with tempfile.TemporaryDirectory(prefix="sf-bench-pg-") as tmp:
        folder = Path(tmp)
        if "steps" not in skip:
            s = results["steps"] = bench_steps(a.pg, a.steps, a.rounds)
            print(f"\nstep cost on PostgreSQL ({a.steps}-step workflow, {a.rounds} rounds)")
            print(f"  {'case':34} {'µs/step':>8} {'vs floor':>9} {'client CPU µs':>14}")
            print(
                f"  {'floor INSERT+COMMIT':34} {s['floor_us']:>8} {'1.00x':>9} "
                f"{s['floor_cpu_us']:>14}"
            )
            print(
                f"  {'surefoot step':34} {s['surefoot_step_us']:>8} "
                f"{s['surefoot_vs_floor']:>8.2f}x {s['surefoot_cpu_us']:>14}   "
                f"({s['surefoot_commits_per_workflow']} commits per workflow)"
            )
            verdicts.append(
                ("surefoot step vs floor", f"{s['surefoot_vs_floor']:.2f}x", "step_vs_floor")
            )
            if "dbos_step_us" in s:
                print(
                    f"  {'DBOS step':34} {s['dbos_step_us']:>8} "
                    f"{s['dbos_step_us'] / s['floor_us']:>8.2f}x"
                )
                verdicts.append(
                    ("DBOS step vs surefoot step", f"{s['dbos_vs_surefoot']:.2f}x", "dbos_vs_step")
                )
        if "workers" not in skip:
            counts = [int(x) for x in a.workers.split(",")]
            cases = [(0.0, a.runs, "workers_zero")]
            if a.latency > 0:
                cases.append((a.latency, a.latency_runs, "workers_latency"))
            for latency, runs, key in cases:
                w = bench_workers(a.pg, runs, counts, folder, latency)
                results[key] = w
                print(
                    f"\n7-step agent on PostgreSQL, {runs} runs, every model/tool call "
                    f"{latency * 1000:.0f} ms, 16 runs at once per worker"
                )
                base = w[0]["workflows_per_s"]
                for row in w:
                    print(
                        f"  {row['workers']} worker(s)  {row['workflows_per_s']:>7} workflows/s"
                        f"  {row['workflows_per_s'] / base:5.2f}x of {w[0]['workers']}  "
                        f"duplicate posts {row['duplicate_posts']}, "
                        f"repeated model calls {row['repeated_model_calls']}"
                    )
                ratio = _scaling(w)
                if ratio is not None:
                    label = f"{max(counts)} workers vs 1, {latency * 1000:.0f} ms calls"
                    verdicts.append((label, f"{ratio:.2f}x", key))
        if "backends" not in skip:
            b = results["backends"] = bench_backends(a.ops, a.rounds, folder)
            print(f"\nbackends, median of {a.rounds} rounds of {a.ops}")
            for row in b:
                print(
                    f"  {row['backend']:<11} {row['versioned_writes_per_s']:>7} versioned "
                    f"writes/s  {row['stream_appends_per_s']:>7} appends/s  "
                    f"[{row['durability']}]"
                )
    print(f"\nbench_postgres.py, {started}, load average {results['load_average']:.1f} at start")
    for label, text, key in verdicts:
        value = float(text.rstrip("x"))
        print(f"  {label:42} {text:>8}  {_verdict(key, value)}")
    results["targets"] = TARGETS
    if a.json:
        a.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
