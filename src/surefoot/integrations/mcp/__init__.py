"""MCP tools, sure-footed: listed once per run, called once, keyed, and guarded.

::

    from surefoot import durable
    from surefoot.guard import trusted
    from surefoot.integrations.mcp import McpClient, McpServer, McpTool

    app = durable.App("sqlite:///runs.db")
    notes = McpClient(
        app,
        McpServer.stdio("notes", "python", ["notes_server.py"]),
        tools={"append": McpTool(args={"text": "any"})},
    )

    @app.workflow
    async def remember(line: str) -> str:
        tools = await notes.tools()          # the listing: a step, journalled once per run
        done = await tools.call("append", {"text": trusted(line)})   # an effect, keyed
        return done.text.value               # labelled untrusted: the server wrote it

Every tool call is a step: journalled, never sent again once its result is recorded,
retried on transport failures (not on a tool's ``isError``), and, for an effect, sent with
an idempotency key in ``_meta`` (``io.surefoot/idempotency-key``, or an argument the user
names) that is the same on every attempt and after a resume. The server's listing is
checked before each call: a tool added, removed, or whose description, schemas or
annotations changed is a rug pull (:class:`ToolListChangedError`), not followed. What the
server returns, and its tool descriptions, are labelled untrusted; each call is checked by
a ``surefoot.guard.CapabilityPolicy`` derived from the tools' input schemas and the user's
declarations, deny by default. The official ``mcp`` SDK is imported lazily
(``pip install 'surefoot[mcp]'``). See ``docs/mcp.md``.
"""

from __future__ import annotations

from ._client import DEFAULT_RETRY, KEY_META, McpClient, McpResult, McpTools
from ._server import McpProtocolError, McpServer, McpTransportError
from ._tools import KINDS, McpTool, ToolListChangedError, derive_policy

__all__ = [
    "DEFAULT_RETRY",
    "KEY_META",
    "KINDS",
    "McpClient",
    "McpProtocolError",
    "McpResult",
    "McpServer",
    "McpTool",
    "McpTools",
    "McpTransportError",
    "ToolListChangedError",
    "derive_policy",
]
