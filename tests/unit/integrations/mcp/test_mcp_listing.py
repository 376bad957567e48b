"""The tool listing: read once per run and journalled; a replay sees the same listing; a
server whose tools change under a running run is reported (a rug pull), not followed."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")  # the servers these tests start are the SDK's

from mcp_servers import HttpServer, applied, ledger, stdio_args

from surefoot import durable
from surefoot.durable import CrashPlan, SimulatedCrash
from surefoot.errors import RunFailedError
from surefoot.guard import trusted
from surefoot.integrations.mcp import McpClient, McpServer, McpTool, ToolListChangedError


def _app(tmp_path: Path) -> durable.App:
    return durable.App(f"sqlite:///{tmp_path / 'runs.db'}", poll=0.01, worker_id="t")


def test_listing_is_one_journalled_step_and_replays_after_a_crash(tmp_path: Path) -> None:
    """A crash after the listing: the resumed run replays it and lists nothing again; then
    the server changed (a redeploy), so the resumed run's call is a rug pull, and the
    error names the tool and what changed."""
    state = tmp_path / "state"
    app = _app(tmp_path)
    notes = McpClient(
        app,
        McpServer.stdio("notes", sys.executable, stdio_args(state)),
        tools={"append": McpTool(args={"text": "any"})},
    )
    seen: list[Any] = []

    @app.workflow
    async def flow() -> int:
        tools = await notes.tools()
        seen.append(tools.descriptions["append"].value)
        done = await tools.call("append", {"text": trusted("first")})
        return int(done.structured["line"].value)

    app.crash = CrashPlan("after_journal", step="mcp.notes.list_tools")
    with pytest.raises(SimulatedCrash):
        app.start(flow, run_id="r").result(timeout=60)
    (state / "changed").write_text("1")  # the next server process has other tools
    with pytest.raises(RunFailedError) as failed:
        app.resume("r").result(timeout=60)
    # the resumed run sees the journalled listing, not the one the server has now
    assert seen == ["Append a line to the notebook."]
    steps = [s.name for s in app.show("r").steps]
    assert steps.count("mcp.notes.list_tools") == 1
    assert "rug pull" in str(failed.value)
    assert "append: description, inputSchema" in str(failed.value)
    assert ledger(state) == []  # nothing was called
    app.close()


def test_a_live_server_changing_its_tools_mid_run_is_refused(tmp_path: Path) -> None:
    """Over HTTP, the server changes append's description and schema after its first use:
    the second call is refused before anything is sent; the first was applied once."""
    server = HttpServer(tmp_path / "state", "--rug-pull-after", "1").start()
    try:
        app = _app(tmp_path)
        notes = McpClient(
            app,
            McpServer.http("notes", server.url),
            tools={"append": McpTool(args={"text": "any"})},
        )

        @app.workflow
        async def flow() -> str:
            tools = await notes.tools()
            await tools.call("append", {"text": trusted("one")})
            try:
                await tools.call("append", {"text": trusted("two")})
            except ToolListChangedError as exc:
                return f"{exc.server} {sorted(exc.changed)} {exc.changed['append'][:2]}"
            return "followed"

        out = app.start(flow, run_id="r").result(timeout=60)
        assert out == "notes ['append'] ['description', 'inputSchema']"
        assert [x["text"] for x in ledger(server.state)] == ["one"]
        assert applied(server.state) == {"r:2": 1}
        app.close()
    finally:
        server.kill()


def test_a_declaration_naming_an_unlisted_tool_is_a_config_error(
    tmp_path: Path, http_server: HttpServer
) -> None:
    app = _app(tmp_path)
    notes = McpClient(
        app, McpServer.http("notes", http_server.url), tools={"apend": McpTool(args={"x": "any"})}
    )

    @app.workflow
    async def flow() -> None:
        await notes.tools()

    with pytest.raises(RunFailedError, match=r"name tools it does not list: \['apend'\]"):
        app.start(flow, run_id="r").result(timeout=60)
    app.close()


def test_a_caught_rug_pull_replays_as_the_same_error(tmp_path: Path) -> None:
    """A workflow that catches the rug pull and goes on: after a crash further on, the
    replayed step raises ``ToolListChangedError`` again (with its attributes), so the same
    ``except`` takes the same path and nothing is sent."""
    state = tmp_path / "state"
    app = _app(tmp_path)
    notes = McpClient(
        app,
        McpServer.stdio("notes", sys.executable, stdio_args(state)),
        tools={"append": McpTool(args={"text": "any"})},
    )
    caught: list[Any] = []

    @app.workflow
    async def flow() -> str:
        tools = await notes.tools()
        (state / "changed").write_text("1")  # a redeploy between the listing and the call
        try:
            await tools.call("append", {"text": trusted("x")})
        except ToolListChangedError as exc:
            caught.append((exc.server, sorted(exc.changed)))
        await tools.call("count")  # the crash is here, once
        return "went on"

    app.crash = CrashPlan("before_step", step="3")
    with pytest.raises(SimulatedCrash):
        app.start(flow, run_id="r").result(timeout=60)
    app.crash = None
    with pytest.raises(RunFailedError, match="rug pull"):  # count, too, meets the change
        app.resume("r").result(timeout=60)
    assert caught == [("notes", ["append"])] * 2
    assert ledger(state) == []
    app.close()


def test_a_second_listing_in_the_same_run_is_the_first(tmp_path: Path) -> None:
    """Calling tools() again later in the run does not list again (no step), so a server
    changed in between is not followed: the next call is refused as a rug pull."""
    state = tmp_path / "state"
    app = _app(tmp_path)
    notes = McpClient(
        app,
        McpServer.stdio("notes", sys.executable, stdio_args(state)),
        tools={"append": McpTool(args={"text": "any"})},
    )

    @app.workflow
    async def flow() -> str:
        first = await notes.tools()
        await first.call("append", {"text": trusted("one")})
        (state / "changed").write_text("1")
        again = await notes.tools()
        assert again.fingerprint == first.fingerprint
        try:
            await again.call("append", {"text": trusted("two")})
        except ToolListChangedError as exc:
            return str(sorted(exc.changed))
        return "followed"

    assert app.start(flow, run_id="r").result(timeout=60) == "['append']"
    names = [s.name for s in app.show("r").steps]
    assert names == ["mcp.notes.list_tools", "mcp.notes.call", "mcp.notes.call"]
    assert [x["text"] for x in ledger(state)] == ["one"]
    app.close()
