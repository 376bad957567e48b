"""A session kept open across steps (``keep_open=True``): a stdio server is started once per
client, not once per step, and a server that dies mid-call is reconnected to by the retry."""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")  # the servers these tests start are the SDK's

from mcp_servers import applied, ledger, stdio_args, wait_until

from surefoot import durable
from surefoot.guard import trusted
from surefoot.integrations.mcp import McpClient, McpServer, McpTool
from surefoot.resilience import Backoff, RetryPolicy


def _starts(state: Path) -> int:
    path = state / "starts"
    return len(path.read_text().split()) if path.exists() else 0


def _client(tmp_path: Path, state: Path, keep_open: bool) -> tuple[durable.App, McpClient]:
    app = durable.App(f"sqlite:///{tmp_path / f'{keep_open}.db'}", poll=0.01, worker_id="t")
    notes = McpClient(
        app,
        McpServer.stdio("notes", sys.executable, stdio_args(state)),
        tools={"append": McpTool(args={"text": "any"})},
        retry=RetryPolicy(max_attempts=20, backoff=Backoff(0.25, 0.5, "none")),
        keep_open=keep_open,
    )
    return app, notes


def test_a_kept_session_starts_a_stdio_server_once_for_many_steps(tmp_path: Path) -> None:
    counts = {}
    for keep_open in (False, True):
        state = tmp_path / f"state-{keep_open}"
        app, notes = _client(tmp_path, state, keep_open)

        @app.workflow(name="flow")
        async def flow(n: int, notes: Any = notes) -> int:
            tools = await notes.tools()
            for i in range(n):
                await tools.call("append", {"text": trusted(f"line {i}")})
            done = await tools.call("count")
            return int(done.structured["result"].value)

        assert app.start(flow, 3, run_id="a").result(timeout=120) == 3
        assert app.start(flow, 1, run_id="b").result(timeout=120) == 4
        notes.close()
        app.close()
        counts[keep_open] = _starts(state)
        assert len(applied(state)) == 4
    assert counts == {False: 2 * 1 + 4 + 2, True: 1}  # per step: a listing, appends, counts


def test_a_kept_session_reconnects_after_the_server_dies_mid_call(tmp_path: Path) -> None:
    state = tmp_path / "state"
    app, notes = _client(tmp_path, state, True)

    @app.workflow
    async def flow() -> list[Any]:
        tools = await notes.tools()
        done = await tools.call("append", {"text": trusted("hold-after")})
        again = await tools.call("append", {"text": trusted("after")})
        return [done.structured["deduplicated"].value, again.structured["line"].value]

    out: list[Any] = []

    def go() -> None:
        try:
            out.append(app.start(flow, run_id="r").result(timeout=120))
        except BaseException as exc:
            out.append(exc)

    t = threading.Thread(target=go, daemon=True)
    t.start()
    wait_until(lambda: applied(state) == {"r:2": 1}, "the effect applied")
    (state / "release").write_text("1")
    os.kill(int((state / "pid").read_text()), signal.SIGKILL)
    t.join(timeout=120)
    notes.close()
    app.close()
    assert out == [[True, 2]]
    assert applied(state) == {"r:2": 1, "r:3": 1}
    assert [x.get("dedup", False) for x in ledger(state)] == [False, True, False]
    assert _starts(state) == 2  # the first server, and the one the retry started
