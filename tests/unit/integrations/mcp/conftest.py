"""Fixtures of the MCP client's tests: a real MCP server over HTTP, stopped by pid."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp_servers import HttpServer


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[HttpServer]:
    server = HttpServer(tmp_path / "state").start()
    try:
        yield server
    finally:
        server.kill()
