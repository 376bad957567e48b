"""What one durable MCP tool call costs: a session per step against a session kept open,
over stdio and streamable HTTP, on the SQLite journal (the tests' notes server, an SDK
server on loopback; its ``append`` is an effect, so each call is two journal commits).

Per configuration one run makes ``--n`` calls; the median and max seconds per call (the
listing check, the call and the journal writes) are printed, and the run is then started
again to show that its replay sends nothing. Usage:

    .venv/bin/python benchmarks/bench_mcp.py [--n 8] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "unit" / "integrations" / "mcp"))

from mcp_servers import HttpServer, applied, stdio_args  # noqa: E402

from surefoot import durable  # noqa: E402
from surefoot.guard import trusted  # noqa: E402
from surefoot.integrations.mcp import McpClient, McpServer, McpTool  # noqa: E402


def measure(tmp: Path, name: str, server: McpServer, keep_open: bool, n: int) -> dict[str, Any]:
    app = durable.App(f"sqlite:///{tmp / f'{name}-{keep_open}.db'}", poll=0.01)
    client = McpClient(
        app, server, tools={"append": McpTool(args={"text": "any"})}, keep_open=keep_open
    )

    @app.workflow(name="calls")
    async def calls() -> list[float]:
        tools = await client.tools()
        out = []
        for i in range(n):
            t = time.perf_counter()
            await tools.call("append", {"text": trusted(f"line {i}")})
            out.append(time.perf_counter() - t)
        return out

    times = app.start(calls, run_id="bench").result(timeout=600)
    t = time.perf_counter()
    app.start(calls, run_id="bench").result(timeout=600)  # succeeded: read from the journal
    replay = time.perf_counter() - t
    client.close()
    app.close()
    return {
        "transport": name,
        "session": "kept open" if keep_open else "per step",
        "median_s": round(statistics.median(times), 4),
        "max_s": round(max(times), 4),
        "replay_s": round(replay, 4),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--json")
    opts = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        http = HttpServer(tmp / "http").start()
        try:
            for keep_open in (False, True):
                rows.append(measure(tmp, "http", McpServer.http("n", http.url), keep_open, opts.n))
                stdio = McpServer.stdio("n", sys.executable, stdio_args(tmp / f"s{keep_open}"))
                rows.append(measure(tmp, "stdio", stdio, keep_open, opts.n))
        finally:
            http.kill()
        applied_once = all(v == 1 for v in applied(tmp / "http").values())
    print("| transport | session | median s/call | max s/call | replay of the run (s) |")
    print("|---|---|---|---|---|")
    for r in rows:
        cells = [r["transport"], r["session"], r["median_s"], r["max_s"], r["replay_s"]]
        print("| " + " | ".join(str(c) for c in cells) + " |")
    print(f"each key applied once at the HTTP server: {applied_once}")
    if opts.json:
        Path(opts.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
