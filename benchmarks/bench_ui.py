"""`surefoot ui`: response time of the runs page over a journal of 10,000 runs.

Builds a SQLite journal (in a temporary folder under --dir; or, with --postgres URL, in
that URL's scratch schema, dropped at the end) with 10,000 runs of three
workflows in two versions: most pending, a few hundred succeeded, failed, sleeping and in
needs_attention (run by a worker). Serves the inspector with uvicorn on 127.0.0.1 (a free
port, in a thread) and times whole HTTP requests from this process: the default runs page,
filtered pages (state, workflow + version, id search, age), the last page and a
``/metrics`` scrape (Prometheus text: counts per state, queue depth, oldest claimable run,
read with aggregate queries). The target (issue 12) is under 200 ms on this machine; the
table says per page whether it was met. The scrape is also timed in-process
(``telemetry.prometheus_text`` over the journal), with the queries and rows it read.

    .venv/bin/python benchmarks/bench_ui.py [--runs 10000] [--requests 30] [--json out.json]
        [--postgres 'postgresql://user@127.0.0.1/db?schema=sf_bench_ui']
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import tempfile
import threading
import time
import urllib.request
from typing import Any

from surefoot.durable import App, Worker

TARGET_MS = 200.0


def build(url: str, n: int) -> dict[str, int]:
    """A journal of ``n`` runs at ``url``; returns how many of each state it holds."""
    with App(url, poll=0.01, worker_id="bench-worker") as app:

        def unship(order: int, *, key: str | None, result: str) -> None:
            if order % 2 == 0:
                raise ConnectionError(f"the carrier refused to recall order {order}")

        @app.step(effect=True, compensate=unship, compensate_retry=1)
        def ship(order: int, *, key: str | None) -> str:
            return f"shipped {order}"

        @app.step
        def check(order: int) -> int:
            if order % 7 == 0:
                raise ValueError(f"order {order} has no address")
            return order

        @app.workflow(name="orders", version="1")
        def orders_v1(order: int) -> int:
            ship(order)
            return check(order)

        @app.workflow(name="orders", version="2")
        def orders_v2(order: int) -> int:
            ship(order)
            return check(order)

        @app.workflow(name="digest", version="1")
        async def digest(topic: str) -> str:
            await app.sleep(3600)
            return topic

        @app.workflow(name="approval", version="1")
        async def approval(order: int) -> Any:
            return await app.wait_for("approve", timeout=86400)

        executed = min(600, n // 10)
        for i in range(executed):
            name = ("orders", "digest", "approval")[i % 3]
            app.enqueue(name, i if name != "digest" else f"topic {i}", run_id=f"run-{i:05d}")
        w = Worker(app)
        while w.run_once(timeout=30):
            pass
        for i in range(executed, n):
            app.enqueue(("orders", "digest", "approval")[i % 3], i, run_id=f"run-{i:05d}")
        for i in range(executed, n, 97):
            app.cancel(f"run-{i:05d}", reason="bench")
        counts: dict[str, int] = {}
        for r in app.list_runs(limit=n + 1):
            counts[r.status] = counts.get(r.status, 0) + 1
    return counts


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def measure(db: str, paths: list[str], requests: int) -> dict[str, dict[str, float]]:
    import uvicorn

    from surefoot.ui import Inspector, create_app, loopback_hosts

    src = Inspector(db)
    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(src, allowed_hosts=loopback_hosts(port)),
            host="127.0.0.1",
            port=port,
            log_level="error",
        )
    )
    t = threading.Thread(target=server.run, daemon=True)
    t.start()
    while not server.started:
        time.sleep(0.02)
    out: dict[str, dict[str, float]] = {}
    try:
        for path in paths:
            times = []
            size = 0
            for i in range(requests + 2):
                t0 = time.perf_counter()
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as r:
                    size = len(r.read())
                    assert r.status == 200
                if i >= 2:  # two warm-up requests
                    times.append(1000 * (time.perf_counter() - t0))
            times.sort()
            out[path] = {
                "median_ms": statistics.median(times),
                "p95_ms": times[int(0.95 * (len(times) - 1))],
                "max_ms": times[-1],
                "bytes": size,
            }
    finally:
        server.should_exit = True
        t.join(timeout=10)
        src.close()
    return out


def in_process(db: str, n: int) -> dict[str, float]:
    """The default page's data (``Inspector.runs_page``) timed in-process, without HTTP."""
    from surefoot.ui import Inspector, RunsQuery

    src = Inspector(db)
    times = []
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            src.runs_page(RunsQuery(), now=time.time())
            times.append(1000 * (time.perf_counter() - t0))
    finally:
        src.close()
    return {"median_ms": statistics.median(times), "max_ms": max(times), "n": n}


def scrape(db: str, n: int) -> dict[str, float]:
    """A ``/metrics`` scrape's text (``telemetry.prometheus_text``) timed in-process, with
    the number of queries and rows one scrape reads from the journal."""
    from surefoot import telemetry

    app = App(db, create=False)
    times = []
    try:
        journal: Any = app.journal
        for _ in range(n):
            t0 = time.perf_counter()
            telemetry.prometheus_text(journal=journal, now=time.time())
            times.append(1000 * (time.perf_counter() - t0))
        d = journal.wrapped.d
        read, seen = d.read, []

        def counting(sql: str, params: Any = ()) -> list[Any]:
            rows = list(read(sql, params))
            seen.append(len(rows))
            return rows

        d.read = counting
        try:
            telemetry.prometheus_text(journal=journal, now=time.time())
        finally:
            d.read = read
    finally:
        app.close()
    return {
        "scrape_median_ms": statistics.median(times),
        "scrape_max_ms": max(times),
        "scrape_queries": len(seen),
        "scrape_rows": sum(seen),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--requests", type=int, default=30)
    ap.add_argument("--dir", default=None, help="where the temporary journal goes")
    ap.add_argument("--json", default=None, help="write the figures here")
    ap.add_argument(
        "--postgres",
        default=None,
        help="a PostgreSQL URL whose ?schema= is a scratch schema (dropped at the end) to "
        "build and serve the journal on, instead of a SQLite file",
    )
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=a.dir) as d:
        path = os.path.join(d, "runs.db")
        url = a.postgres or f"sqlite:///{path}"
        t0 = time.perf_counter()
        try:
            # synchronous=off for building only; the inspector reads the file as is
            counts = build(a.postgres or f"sqlite:///{path}?synchronous=off", a.runs)
            built = time.perf_counter() - t0
            print(f"journal: {sum(counts.values()):,} runs built in {built:.1f} s: {counts}")
            res, scan = _measure_all(url, a)
        finally:
            if a.postgres:
                from surefoot import storage

                st: Any = storage.open(a.postgres)
                st.db.drop_schema()
                st.close()
    _report(a, counts, res, scan)


def _measure_all(url: str, a: Any) -> tuple[dict[str, Any], dict[str, float]]:
    pages = [
        "/runs",
        "/runs?state=needs_attention",
        "/runs?workflow=orders&version=2",
        "/runs?q=run-0999",
        "/runs?age=1h",
        f"/runs?page={a.runs // 50}",
        "/metrics",
    ]
    return measure(url, pages, a.requests), {**in_process(url, 10), **scrape(url, 10)}


def _report(a: Any, counts: dict[str, int], res: dict[str, Any], scan: dict[str, float]) -> None:
    print(f"\nruns page response time, {a.requests} requests each (target < {TARGET_MS:.0f} ms)")
    print(f"{'page':<36} {'median ms':>10} {'p95 ms':>8} {'max ms':>8} {'KiB':>6}  target")
    for p, r in res.items():
        ok = "met" if r["p95_ms"] < TARGET_MS else "MISSED"
        print(
            f"{p:<36} {r['median_ms']:>10.1f} {r['p95_ms']:>8.1f} {r['max_ms']:>8.1f} "
            f"{r['bytes'] / 1024:>6.1f}  {ok}"
        )
    print(
        f"\nthe default page's data (Inspector.runs_page: counts, versions, one page), "
        f"in-process: median {scan['median_ms']:.1f} ms, max {scan['max_ms']:.1f} ms "
        f"({scan['n']} calls)"
    )
    print(
        f"a /metrics scrape's text (telemetry.prometheus_text), in-process: median "
        f"{scan['scrape_median_ms']:.1f} ms, max {scan['scrape_max_ms']:.1f} ms; one scrape "
        f"reads {scan['scrape_queries']:.0f} queries, {scan['scrape_rows']:.0f} rows"
    )
    res["runs_page (in-process)"] = scan
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"runs": a.runs, "counts": counts, "pages": res}, f, indent=2)


if __name__ == "__main__":
    main()
