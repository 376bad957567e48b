"""Real MCP servers for the MCP client's tests (the SDK's server over stdio and HTTP), and
readers of the server's own ledger."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SERVER = Path(__file__).parent / "mcp_notes_server.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _lines(state: Path) -> list[dict[str, Any]]:
    path = state / "ledger.jsonl"
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def ledger(state: Path) -> list[dict[str, Any]]:
    """What the server did with each request it finished, in order (its own record):
    applied, or deduplicated by its key."""
    return [x for x in _lines(state) if "applied" in x]


def received(state: Path) -> dict[str, int]:
    """Idempotency key -> how many requests with it reached the server (finished or not)."""
    out: dict[str, int] = {}
    for x in _lines(state):
        if x.get("received"):
            out[x["key"]] = out.get(x["key"], 0) + 1
    return out


def applied(state: Path) -> dict[str, int]:
    """Idempotency key -> how many times the server applied it."""
    out: dict[str, int] = {}
    for x in ledger(state):
        if x.get("applied"):
            out[x["key"]] = out.get(x["key"], 0) + 1
    return out


def wait_until(cond: Any, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def stdio_args(state: Path, *extra: str) -> list[str]:
    return [str(SERVER), "--state", str(state), *extra]


class HttpServer:
    """The notes server over streamable HTTP on a free loopback port, stopped by pid."""

    def __init__(self, state: Path, *extra: str) -> None:
        self.state = state
        self.extra = extra
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> HttpServer:
        args = [sys.executable, str(SERVER), "--state", str(self.state), "--http", str(self.port)]
        self.proc = subprocess.Popen(
            [*args, *self.extra], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

        def up() -> bool:
            assert self.proc is not None and self.proc.poll() is None, "the server died"
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return True
            except OSError:
                return False

        wait_until(up, f"the MCP server on port {self.port}")
        return self

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
