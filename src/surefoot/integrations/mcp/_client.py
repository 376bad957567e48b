"""An MCP server's tools as durable steps of a surefoot app: listed once, called once, guarded.

:class:`McpClient` registers, on a ``surefoot.durable.App``, the steps that talk to one
server: ``mcp.NAME.list_tools`` (pure), ``mcp.NAME.read`` (pure), ``mcp.NAME.call`` (an
effect with a key) and ``mcp.NAME.call_unkeyed`` (an effect without one). In a workflow,
``tools = await client.tools()`` journals the listing once for the run (a replay reads it
back); ``await tools.call(name, args)`` checks the call against the policy derived from that
listing, makes it a step of the tool's kind, and returns a :class:`McpResult` whose every
part is labelled untrusted. Before each call the step lists the server's tools again in the
same session and refuses to call when they differ from the run's listing
(:class:`ToolListChangedError`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...durable import current_run
from ...errors import ConfigError, TrustError
from ...guard import CapabilityPolicy, Label, Labeled, env_label, label_output
from ...resilience import Backoff, RetryPolicy
from ._server import McpServer, classify_error
from ._session import Sessions
from ._tools import (
    McpTool,
    changes,
    derive_policy,
    fingerprint,
    kind_for,
    listing_of,
    rug_pull,
)

__all__ = ["DEFAULT_RETRY", "KEY_META", "McpClient", "McpResult", "McpTools"]

KEY_META = "io.surefoot/idempotency-key"
"""The ``_meta`` field every call carries its idempotency key in (``f"{run_id}:{pos}"``)."""

DEFAULT_RETRY = RetryPolicy(max_attempts=4, backoff=Backoff(0.2, 2.0))
"""Attempts of a listing or a call: transport failures retried (4 attempts, 0.2 s doubling
to 2 s, full jitter); a JSON-RPC error, a rug pull or a tool error (``isError``) are not."""

_PAGES = 100
_RUNS_KEPT = 4096  # executions whose listing a second tools() call returns


@dataclass(frozen=True)
class McpResult:
    """What one tool call returned, every part labelled as the untrusted data it is.

    Attributes:
        tool: the tool's name.
        is_error: the server reported a tool error (``isError``); journalled, not retried.
        text: the text blocks joined by newlines, labelled ``content:TOOL.text``.
        structured: the structured content labelled per field (``label_output``), or None.
        content: every content block (a dict), each labelled ``content:TOOL.content``.
        raw: the journalled result as plain JSON (for display; carries no label).
    """

    tool: str
    is_error: bool
    text: Labeled[str]
    structured: Any
    content: list[Labeled[dict[str, Any]]]
    raw: dict[str, Any]


class McpTools:
    """One run's view of a server: the listing it journalled, its policy, and calls.

    Made by :meth:`McpClient.tools` inside a workflow; not built directly.

    Attributes:
        listing: the journalled listing (canonical JSON dicts, sorted by name).
        policy: the capability policy derived from it (``CapabilityPolicy``, deny by default).
        descriptions: tool name -> its description, labelled untrusted.
    """

    def __init__(
        self, client: McpClient, listing: list[dict[str, Any]], policy: CapabilityPolicy
    ) -> None:
        self.client = client
        self.listing = listing
        self.policy = policy
        self.fingerprint = fingerprint(listing)
        self._by_name = {str(t["name"]): t for t in listing}
        server = client.server.name
        self.descriptions: dict[str, Labeled[str]] = {
            name: Labeled(str(t.get("description", "")), description_label(server, name))
            for name, t in self._by_name.items()
        }

    @property
    def names(self) -> list[str]:
        return sorted(self._by_name)

    def kind(self, tool: str) -> str:
        """``effect``, ``read`` or ``unkeyed``: how a call of ``tool`` is journalled."""
        return kind_for(self._tool(tool), self.client.declared.get(tool))

    def _tool(self, tool: str) -> dict[str, Any]:
        found = self._by_name.get(tool)
        if found is None:
            raise TrustError(
                f"{self.client.server.where()} did not list tool {tool!r} for this run "
                f"(it listed {self.names}); refused",
                sink=f"tool:{tool}",
            )
        return found

    async def call(self, tool: str, args: Mapping[str, Labeled[Any]] | None = None) -> McpResult:
        """Call ``tool`` as a durable step of the run; a replay returns the journalled result.

        Args:
            tool: a tool of this run's listing.
            args: argument name -> ``Labeled`` value (``surefoot.guard.trusted(...)`` for
                the user's own input); checked per argument against :attr:`policy`.

        Raises:
            TrustError: the tool is not listed, an argument is undeclared or unlabelled, or
                comes from a source its declaration does not accept (nothing is sent).
            ToolListChangedError: the server's tools changed since the run listed them.
            McpTransportError: the server stayed unreachable after the retries.
            McpProtocolError: the server refused the request (JSON-RPC error).
        """
        given = dict(args or {})
        spec = self._tool(tool)
        self.policy.check_call(tool, given)
        plain = {k: _unlabelled(v) for k, v in given.items()}
        kind = kind_for(spec, self.client.declared.get(tool))
        key_arg = (self.client.declared.get(tool) or McpTool()).key_arg
        c = self.client
        if kind == "read":
            raw = await c._read_step(tool, plain, self.fingerprint, key_arg)
        elif kind == "unkeyed":
            raw = await c._unkeyed_step(tool, plain, self.fingerprint)
        else:
            raw = await c._effect_step(tool, plain, self.fingerprint, key_arg)
        return labelled_result(self.policy, tool, raw, given)


def description_label(server: str, tool: str) -> Label:
    """The label of a tool's description: content the server wrote, untrusted."""
    return env_label("content", f"{tool}.description").join(
        env_label("content", f"mcp:{server}.tools")
    )


def labelled_result(
    policy: CapabilityPolicy, tool: str, raw: dict[str, Any], args: Mapping[str, Labeled[Any]]
) -> McpResult:
    """Label a journalled call result per the tool's declaration (untrusted throughout)."""
    spec = policy.tools[tool]
    blocks = [b for b in raw.get("content") or [] if isinstance(b, dict)]
    text = "\n".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
    got = label_output(spec, {"text": text, "content": blocks}, args)
    content_label = Label().join(*(x.label for x in _leaves(got["content"])))
    if not blocks:
        content_label = env_label("content", f"{tool}.content")
    structured = raw.get("structuredContent")
    return McpResult(
        tool=tool,
        is_error=bool(raw.get("isError")),
        text=got["text"],
        structured=None if structured is None else label_output(spec, structured, args),
        content=[Labeled(b, content_label) for b in blocks],
        raw=raw,
    )


def _unlabelled(value: Any) -> Any:
    """The value sent to the server: ``value`` without its labels, at every depth (a list
    whose elements carry their own labels is sent as the list of their values)."""
    if isinstance(value, Labeled):
        return _unlabelled(value.value)
    if isinstance(value, Mapping):
        return {k: _unlabelled(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_unlabelled(v) for v in value]
    return value


def _leaves(value: Any) -> list[Labeled[Any]]:
    if isinstance(value, Labeled):
        return [value]
    if isinstance(value, Mapping):
        return [x for v in value.values() for x in _leaves(v)]
    if isinstance(value, list):
        return [x for v in value for x in _leaves(v)]
    return []


class McpClient:
    """The durable client of one MCP server, for the workflows of ``app``.

    Args:
        app: the ``surefoot.durable.App`` whose steps the listing and calls become.
        server: where the server is (:class:`McpServer`).
        tools: tool name -> :class:`McpTool`: the user's declarations (kind, sources per
            argument, key argument, output fields). A tool not named is an effect (or a
            read, when the server hints ``readOnlyHint``) whose arguments accept trusted
            values only.
        retry: attempts of each listing and call (a ``RetryPolicy`` or an int);
            :data:`DEFAULT_RETRY` by default. An ``unkeyed`` effect gets one attempt.
        policy_version: the version stamped on the derived policies.
        keep_open: keep one session open per event loop across steps and runs (a stdio
            server is then started once, not per step); call :meth:`close` before the
            app's ``close``. Default: each step opens and closes its own session.

    Raises:
        ConfigError: ``tools`` is not a mapping of :class:`McpTool`.
    """

    def __init__(
        self,
        app: Any,
        server: McpServer,
        *,
        tools: Mapping[str, McpTool] | None = None,
        retry: Any = DEFAULT_RETRY,
        policy_version: str = "1",
        keep_open: bool = False,
    ) -> None:
        if not isinstance(server, McpServer):
            raise ConfigError(f"McpClient needs an McpServer, got {server!r}")
        declared = dict(tools or {})
        bad = {k: v for k, v in declared.items() if not isinstance(v, McpTool)}
        if bad:
            raise ConfigError(f"McpClient tools= maps names to McpTool, got {bad!r}")
        self.app = app
        self.server = server
        self.declared = declared
        self.policy_version = policy_version
        self.sessions = Sessions(server, keep_open=keep_open)
        self._listings: dict[str, list[dict[str, Any]]] = {}
        self._per_run: OrderedDict[tuple[str, int], McpTools] = OrderedDict()
        base = f"mcp.{server.name}"
        self._list_step = app.step(name=f"{base}.list_tools", retry=retry)(self._list_tools)
        self._read_step = app.step(name=f"{base}.read", retry=retry)(self._read)
        self._effect_step = app.step(effect=True, name=f"{base}.call", retry=retry)(self._effect)
        self._unkeyed_step = app.step(effect=True, name=f"{base}.call_unkeyed")(self._unkeyed)

    async def tools(self) -> McpTools:
        """The server's tools for this run: listed once and journalled (a step), so a
        replay, on any worker, sees the same listing. A second call in the same execution
        of the run returns the same listing without a step (a run never follows a server
        that changed under it: its calls refuse the change instead).

        Raises:
            ConfigError: a declaration names a tool or argument the listing does not have.
        """
        try:
            rc = current_run()
            here: tuple[str, int] | None = (rc.run_id, rc.epoch)
        except ConfigError:  # outside a run: a plain call
            here = None
        if here is not None and here in self._per_run:
            return self._per_run[here]
        listing = await self._list_step()
        self._listings[fingerprint(listing)] = listing
        policy = derive_policy(
            self.server.name, listing, self.declared, version=self.policy_version
        )
        tools = McpTools(self, listing, policy)
        if here is not None:  # per execution (a resumed run has a new epoch and replays)
            self._per_run[here] = tools
            while len(self._per_run) > _RUNS_KEPT:
                self._per_run.popitem(last=False)
        return tools

    def close(self) -> None:
        """Close the sessions kept open (``keep_open=True``); a no-op otherwise."""
        self.sessions.close()

    # -- the steps (the journal calls them; their results are plain JSON) --------------

    async def _list_tools(self) -> list[dict[str, Any]]:
        try:
            return await self.sessions.run(_listing)
        except Exception as exc:
            raise classify_error(self.server, "listing its tools", exc) from exc

    async def _read(
        self, tool: str, arguments: dict[str, Any], listed: str, key_arg: str | None
    ) -> dict[str, Any]:
        return await self._send(tool, arguments, listed, _run_key(), key_arg)

    async def _effect(
        self,
        tool: str,
        arguments: dict[str, Any],
        listed: str,
        key_arg: str | None,
        *,
        key: str | None = None,
    ) -> dict[str, Any]:
        return await self._send(tool, arguments, listed, key, key_arg)

    async def _unkeyed(self, tool: str, arguments: dict[str, Any], listed: str) -> dict[str, Any]:
        return await self._send(tool, arguments, listed, None, None)

    async def _send(
        self,
        tool: str,
        arguments: dict[str, Any],
        listed: str,
        key: str | None,
        key_arg: str | None,
    ) -> dict[str, Any]:
        """One session: list the tools, refuse a changed listing, call once."""
        expected = self._listings.get(listed)
        if expected is None:  # the run's listing is journalled by tools(); never reached
            raise ConfigError(f"no listing {listed} for {self.server.where()}; call tools()")
        args = dict(arguments)
        if key_arg is not None and key is not None:
            args[key_arg] = key
        meta = {KEY_META: key} if key is not None else None

        async def listed_then_call(session: Any) -> Any:
            changed = changes(expected, await _listing(session))
            if changed:
                raise rug_pull(self.server.name, self.server.where(), changed)
            return await session.call_tool(tool, args, meta=meta)

        try:
            result = await self.sessions.run(listed_then_call)
        except Exception as exc:
            raise classify_error(self.server, f"calling {tool!r}", exc) from exc
        raw: dict[str, Any] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        return {k: raw[k] for k in ("content", "structuredContent", "isError") if k in raw}


async def _listing(session: Any) -> list[dict[str, Any]]:
    tools: list[Any] = []
    cursor = None
    for _ in range(_PAGES):
        page = await session.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return listing_of(tools)


def _run_key() -> str | None:
    try:
        return current_run().key
    except ConfigError:  # a step called outside a run is a plain call
        return None
