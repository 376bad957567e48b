"""Where an MCP server is and how to reach it: one session per step, errors classified.

Each step (a listing, a call) opens its own session with the official ``mcp`` SDK (imported
here, lazily), does its requests and closes it, so a step never depends on a connection an
earlier attempt, an earlier process or another run left behind. What the SDK raises is
sorted into two kinds: :class:`McpTransportError` (the server could not be reached, or the
connection closed mid-request: retried under the step's ``RetryPolicy``, the default
classifier sees a ``ConnectionError``) and :class:`McpProtocolError` (the server answered
with a JSON-RPC error: not retried). A tool's own failure (``isError``) is not an exception
at all: it is a result, journalled like any other.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any

from ...codec import register
from ...errors import ConfigError, MissingExtraError, SurefootError

__all__ = ["McpProtocolError", "McpServer", "McpTransportError", "connect", "redact"]

# JSON-RPC codes that mean "the connection, not the request": CONNECTION_CLOSED and
# REQUEST_TIMEOUT of the SDK (mcp_types.jsonrpc)
_TRANSPORT_CODES = {-32000, -32001}
_USERINFO = re.compile(r"(?<=://)[^/@\s]*@")


def redact(text: str) -> str:
    """``text`` with any ``user:password@`` of a URL removed (secrets never reach a journal)."""
    return _USERINFO.sub("***@", text)


@register  # journalled errors replay as themselves
class McpTransportError(SurefootError, ConnectionError):
    """The MCP server could not be reached, or the connection closed during a request.

    A ``ConnectionError``: the step's ``RetryPolicy`` (default classifier) retries it; an
    effect is retried with the same idempotency key.
    """


@register
class McpProtocolError(SurefootError):
    """The MCP server refused a request with a JSON-RPC error (not retried).

    Attributes:
        code: the JSON-RPC error code.
    """

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class McpServer:
    """How to reach one MCP server. Build it with :meth:`stdio`, :meth:`http` or :meth:`custom`.

    Attributes:
        name: what the journal and the labels call the server (step names
            ``mcp.NAME.list_tools``, ``mcp.NAME.call``; sources ``content:TOOL.FIELD``).
        transport: ``stdio``, ``http`` or ``custom``.
        target: the command line (stdio), the URL (http) or the factory (custom).
        read_timeout: seconds one request may wait for its answer (None: the SDK's default).
    """

    name: str
    transport: str
    target: Any
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    read_timeout: float | None = None
    _args: tuple[str, ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not re.fullmatch(r"[A-Za-z0-9_-]+", self.name):
            raise ConfigError(
                f"McpServer name must be letters, digits, '_' or '-' (it names journal steps), "
                f"got {self.name!r}"
            )

    @classmethod
    def stdio(
        cls,
        name: str,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        read_timeout: float | None = None,
    ) -> McpServer:
        """A server the client starts as a subprocess and talks to over stdin/stdout
        (one process per step: it is started for the step and ends with it)."""
        if not isinstance(command, str) or not command:
            raise ConfigError(f"McpServer.stdio needs a command, got {command!r}")
        return cls(name, "stdio", command, env, cwd, read_timeout, tuple(str(a) for a in args))

    @classmethod
    def http(cls, name: str, url: str, *, read_timeout: float | None = None) -> McpServer:
        """A server reached over streamable HTTP at ``url`` (``http://127.0.0.1:8000/mcp``)."""
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ConfigError(
                f"McpServer.http needs an http:// or https:// URL, got {redact(str(url))!r}"
            )
        return cls(name, "http", url, read_timeout=read_timeout)

    @classmethod
    def custom(
        cls, name: str, factory: Callable[[], Any], *, read_timeout: float | None = None
    ) -> McpServer:
        """Anything ``mcp.Client`` accepts, made fresh for each step by ``factory()`` (an
        SDK ``Transport`` with your own HTTP client and headers, an in-process server)."""
        if not callable(factory):
            raise ConfigError(f"McpServer.custom needs a callable factory, got {factory!r}")
        return cls(name, "custom", factory, read_timeout=read_timeout)

    def where(self) -> str:
        """The server as error messages name it (no secrets)."""
        if self.transport == "stdio":  # the command only: its arguments may carry a token
            return f"MCP server {self.name!r} (stdio: {self.target})"
        if self.transport == "http":
            return f"MCP server {self.name!r} ({redact(self.target)})"
        return f"MCP server {self.name!r}"


def _sdk() -> Any:
    try:
        import mcp
    except ImportError as exc:  # pragma: no cover - the extra is installed in CI
        raise MissingExtraError("mcp", "surefoot.integrations.mcp") from exc
    return mcp


def connect(server: McpServer) -> AbstractAsyncContextManager[Any]:
    """An ``mcp.Client`` for one step (entered with ``async with``), caching off."""
    mcp = _sdk()
    if server.transport == "stdio":
        target: Any = mcp.StdioServerParameters(
            command=server.target,
            args=list(server._args),
            env=dict(server.env) if server.env else None,
            cwd=server.cwd,
        )
    elif server.transport == "http":
        target = server.target
    else:
        target = server.target()
    client: AbstractAsyncContextManager[Any] = mcp.Client(
        target, cache=None, read_timeout_seconds=server.read_timeout
    )
    return client


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for e in exc.exceptions for leaf in _leaves(e)]
    return [exc]


def classify_error(server: McpServer, doing: str, exc: BaseException) -> BaseException:
    """The error to raise for ``exc`` (what the SDK raised while ``doing``): an
    :class:`McpTransportError`, an :class:`McpProtocolError`, or ``exc`` itself when it is
    surefoot's own (a rug pull) or not the SDK's (a bug, a cancellation)."""
    leaves = _leaves(exc)
    ours = [e for e in leaves if isinstance(e, SurefootError)]
    if ours:
        return ours[0]
    for e in leaves:
        code = getattr(e, "code", None)
        if type(e).__name__ == "MCPError" and isinstance(code, int):
            msg = f"{server.where()} {doing}: {redact(str(e))} (JSON-RPC {code})"
            if code in _TRANSPORT_CODES:
                return McpTransportError(msg)
            return McpProtocolError(msg, code)
    for e in leaves:
        if isinstance(e, FileNotFoundError | PermissionError) and server.transport == "stdio":
            return ConfigError(
                f"{server.where()} cannot be started ({type(e).__name__}: {e.strerror}); "
                "check the command and its path"
            )
    for e in leaves:
        # OSError covers a refused connection, a reset, a stdio command that does not
        # exist; the httpx2 transport errors are recognised by name, never imported
        names = {c.__name__ for c in type(e).__mro__}
        if isinstance(e, OSError | EOFError) or names & {
            "TransportError",
            "TimeoutException",
            "NetworkError",
            "RemoteProtocolError",
            "ClosedResourceError",
            "BrokenResourceError",
            "EndOfStream",
        }:
            what = f"{type(e).__name__}: {redact(str(e))}"
            return McpTransportError(f"{server.where()} {doing}: {what}")
    return leaves[0] if len(leaves) == 1 else exc
