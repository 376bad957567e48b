"""A durable workflow of three MCP tool calls (effects) and a read, for the kill tests.

``python mcp_workflow_app.py DB_URL MCP_URL`` runs (or resumes) run ``mcp-run`` and prints
its result as JSON. The same worker id each time, so a rerun takes a killed run back at
once. ``SUREFOOT_CRASH`` (read by ``durable.App``) makes it die at a crash point.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from surefoot import durable
from surefoot.guard import trusted
from surefoot.integrations.mcp import McpClient, McpServer, McpTool
from surefoot.resilience import Backoff, RetryPolicy

app = durable.App(sys.argv[1], worker_id="mcp-kill-worker", lease=30.0, poll=0.05)
notes = McpClient(
    app,
    McpServer.http("notes", sys.argv[2]),
    tools={"append": McpTool(args={"text": "any"})},
    retry=RetryPolicy(max_attempts=40, backoff=Backoff(0.25, 0.5, "none")),
)


@app.workflow
async def remember(texts: list[str]) -> list[Any]:
    tools = await notes.tools()
    lines = []
    for text in texts:
        done = await tools.call("append", {"text": trusted(text)})
        lines.append(done.structured["line"].value)
    n = await tools.call("count")
    return [*lines, n.structured["result"].value]


if __name__ == "__main__":
    texts = sys.argv[3].split(",")
    print(json.dumps(app.start(remember, texts, run_id="mcp-run").result(timeout=120)))
    app.close()
