"""Each MCP tool call is a step: journalled, never sent again once recorded, retried on
transport failures with the same key (a server killed mid-call), not on a tool error."""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")  # the servers these tests start are the SDK's

from mcp_servers import (
    HttpServer,
    applied,
    free_port,
    ledger,
    received,
    stdio_args,
    wait_until,
)

from surefoot import durable
from surefoot.errors import RunFailedError
from surefoot.guard import trusted
from surefoot.integrations.mcp import KEY_META, McpClient, McpServer, McpTool
from surefoot.resilience import Backoff, RetryPolicy

PATIENT = RetryPolicy(max_attempts=40, backoff=Backoff(0.25, 0.5, "none"))


def _app(tmp_path: Path) -> durable.App:
    return durable.App(f"sqlite:///{tmp_path / 'runs.db'}", poll=0.01, worker_id="t")


def _steps(app: durable.App, run_id: str) -> list[tuple[str, str, int]]:
    return [(s.pos, s.name, s.attempts) for s in app.show(run_id).steps]


def test_an_effect_is_sent_once_with_its_key_and_replayed_from_the_journal(
    tmp_path: Path, http_server: HttpServer
) -> None:
    app = _app(tmp_path)
    notes = McpClient(
        app,
        McpServer.http("notes", http_server.url),
        tools={
            "append": McpTool(args={"text": "any"}),
            "append_by_arg": McpTool(args={"text": "any"}, key_arg="request_id"),
        },
    )

    @app.workflow
    async def flow() -> list[Any]:
        tools = await notes.tools()
        a = await tools.call("append", {"text": trusted("by meta")})
        b = await tools.call("append_by_arg", {"text": trusted("by arg")})
        n = await tools.call("count")
        lines = [a.structured["line"].value, b.structured["line"].value]
        return [*lines, n.structured["result"].value]

    assert app.start(flow, run_id="r").result(timeout=60) == [1, 2, 2]
    assert app.start(flow, run_id="r").result(timeout=60) == [1, 2, 2]  # the journal's
    assert [(x["tool"], x["key"]) for x in ledger(http_server.state)] == [
        ("append", "r:2"),
        ("append_by_arg", "r:3"),
    ]
    assert _steps(app, "r") == [
        ("1", "mcp.notes.list_tools", 1),
        ("2", "mcp.notes.call", 1),
        ("3", "mcp.notes.call", 1),
        ("4", "mcp.notes.read", 1),  # count: readOnlyHint, a pure step
    ]
    assert KEY_META == "io.surefoot/idempotency-key"
    app.close()


def test_the_user_overrides_a_read_only_hint_and_a_tool_error_is_not_retried(
    tmp_path: Path, http_server: HttpServer
) -> None:
    app = _app(tmp_path)
    notes = McpClient(
        app,
        McpServer.http("notes", http_server.url),
        tools={"count": McpTool(kind="effect")},
        retry=PATIENT,
    )

    @app.workflow
    async def flow() -> list[Any]:
        tools = await notes.tools()
        n = await tools.call("count")
        bad = await tools.call("fail")
        return [tools.kind("count"), n.is_error, bad.is_error, bad.text.value, bad.text.tainted]

    out = app.start(flow, run_id="r").result(timeout=60)
    assert out[:3] == ["effect", False, True]
    assert "fail" in out[3] and out[4] is True
    assert _steps(app, "r")[1:] == [("2", "mcp.notes.call", 1), ("3", "mcp.notes.call", 1)]
    app.close()


def _run_in_thread(app: durable.App, flow: Any, out: list[Any]) -> threading.Thread:
    def go() -> None:
        try:
            out.append(app.start(flow, run_id="r").result(timeout=120))
        except BaseException as exc:  # reported by the test
            out.append(exc)

    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t


def test_http_server_killed_mid_call_is_retried_with_the_same_key(tmp_path: Path) -> None:
    """The server dies while the call is in flight (before applying it); a new server
    comes up on the same port; the step's retry applies the call once, with its key."""
    server = HttpServer(tmp_path / "state").start()
    try:
        app = _app(tmp_path)
        notes = McpClient(
            app,
            McpServer.http("notes", server.url),
            tools={"append": McpTool(args={"text": "any"})},
            retry=PATIENT,
        )

        @app.workflow
        async def flow() -> Any:
            tools = await notes.tools()
            done = await tools.call("append", {"text": trusted("hold")})
            return done.structured["line"].value

        out: list[Any] = []
        t = _run_in_thread(app, flow, out)
        wait_until(lambda: received(server.state) == {"r:2": 1}, "the call")
        server.kill()
        (server.state / "release").write_text("1")
        server.start()  # the same port, a new process
        t.join(timeout=120)
        assert out == [1]
        assert applied(server.state) == {"r:2": 1}
        [(pos, name, attempts)] = _steps(app, "r")[1:]
        assert (pos, name) == ("2", "mcp.notes.call") and attempts >= 2
        app.close()
    finally:
        server.kill()


def test_stdio_server_killed_after_applying_is_deduplicated_by_key(tmp_path: Path) -> None:
    """The server applies the effect, then dies before replying; the retry starts a new
    server process and sends the same key: the server's ledger dedups it."""
    state = tmp_path / "state"
    app = _app(tmp_path)
    notes = McpClient(
        app,
        McpServer.stdio("notes", sys.executable, stdio_args(state)),
        tools={"append": McpTool(args={"text": "any"})},
        retry=PATIENT,
    )

    @app.workflow
    async def flow() -> Any:
        tools = await notes.tools()
        done = await tools.call("append", {"text": trusted("hold-after")})
        return [done.structured["line"].value, done.structured["deduplicated"].value]

    out: list[Any] = []
    t = _run_in_thread(app, flow, out)
    wait_until(lambda: applied(state) == {"r:2": 1}, "the effect applied")
    (state / "release").write_text("1")  # the next process does not hold
    os.kill(int((state / "pid").read_text()), signal.SIGKILL)
    t.join(timeout=120)
    assert out == [[1, True]]
    assert applied(state) == {"r:2": 1}
    assert [x.get("dedup", False) for x in ledger(state)] == [False, True]
    app.close()


def test_an_unkeyed_effect_in_flight_at_a_crash_needs_attention(
    tmp_path: Path, http_server: HttpServer
) -> None:
    """A tool declared ``unkeyed`` (its server cannot dedup) gets no key; a crash after it
    ran and before its result was journalled stops the run for a person, nothing resent."""
    app = _app(tmp_path)
    notes = McpClient(
        app,
        McpServer.http("notes", http_server.url),
        tools={"append": McpTool(kind="unkeyed", args={"text": "any"})},
    )

    @app.workflow
    async def flow() -> None:
        tools = await notes.tools()
        await tools.call("append", {"text": trusted("once")})

    app.crash = durable.CrashPlan("after_effect", step="mcp.notes.call_unkeyed")
    with pytest.raises(durable.SimulatedCrash):
        app.start(flow, run_id="r").result(timeout=60)
    app.crash = None
    with pytest.raises(RunFailedError, match="needs_attention"):
        app.resume("r").result(timeout=60)
    assert [(x["key"], x["text"]) for x in ledger(http_server.state)] == [(None, "once")]
    app.close()


def test_a_stdio_command_that_does_not_exist_is_a_config_error_not_retried(
    tmp_path: Path,
) -> None:
    app = _app(tmp_path)
    notes = McpClient(
        app,
        McpServer.stdio("notes", str(tmp_path / "no-such-server"), ["--token", "s3cret"]),
        retry=PATIENT,
    )

    @app.workflow
    async def flow() -> None:
        await notes.tools()

    with pytest.raises(RunFailedError) as failed:
        app.start(flow, run_id="r").result(timeout=60)
    assert "cannot be started (FileNotFoundError" in str(failed.value)
    assert "s3cret" not in str(failed.value)  # a command's arguments may carry a token
    assert _steps(app, "r") == [("1", "mcp.notes.list_tools", 1)]  # not retried
    app.close()


def test_a_password_in_an_http_url_never_reaches_the_journal(tmp_path: Path) -> None:
    app = _app(tmp_path)
    port = free_port()  # nothing listens there
    notes = McpClient(
        app,
        McpServer.http("notes", f"http://ann:s3cret@127.0.0.1:{port}/mcp"),
        retry=RetryPolicy(max_attempts=2, backoff=Backoff(0.01, 0.01, "none")),
    )

    @app.workflow
    async def flow() -> None:
        await notes.tools()

    with pytest.raises(RunFailedError) as failed:
        app.start(flow, run_id="r").result(timeout=60)
    assert "McpTransportError" in str(failed.value) and "***@127.0.0.1" in str(failed.value)
    assert "s3cret" not in str(failed.value)
    assert _steps(app, "r") == [("1", "mcp.notes.list_tools", 2)]  # a transport error: retried
    app.close()
