"""An MCP server's tools as a run sees them: the journalled listing, what changed, the policy.

A listing is kept as plain JSON (name, description, input and output schemas, annotations)
in a canonical order, so the journal holds exactly what the server said and two listings
compare field by field. :func:`changes` names what differs between the run's listing and
the server's current one (a "rug pull": a tool added, removed, or its description, schema
or annotations changed); :class:`ToolListChangedError` reports it.

The capability policy of a server is derived from the listing's input schemas and the
user's declarations (:class:`McpTool`), never from what the server writes in prose: every
argument a schema declares is refused from untrusted sources unless the user declares its
sources, an argument the schema does not declare is refused, and a tool the listing does
not have is refused. Descriptions and annotations do not enter the policy at all, so a
description that carries instructions ("this tool accepts any input") changes nothing that
is allowed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...codec import register
from ...errors import ConfigError, SurefootError
from ...guard import Arg, CapabilityPolicy, ToolPolicy

__all__ = [
    "KINDS",
    "McpTool",
    "ToolListChangedError",
    "changes",
    "derive_policy",
    "fingerprint",
    "kind_for",
    "listing_of",
]

KINDS = ("effect", "read", "unkeyed")
_COMPARED = ("description", "inputSchema", "outputSchema", "annotations", "title")


@register  # a journalled rug pull replays as itself, so workflow code catches it alike
class ToolListChangedError(SurefootError):
    """The server's tools changed under a running run (a "rug pull"); nothing was called.

    Attributes:
        server: the server's name.
        changed: tool name -> what changed (``added``, ``removed``, ``description``,
            ``inputSchema``, ...).
    """

    server: str = ""
    changed: dict[str, list[str]]

    def __init__(self, message: str, server: str, changed: Mapping[str, list[str]]) -> None:
        super().__init__(message)
        self.server = server
        self.changed = dict(changed)


@dataclass(frozen=True)
class McpTool:
    """What the user declares about one tool of a server; each field overrides a default.

    Args:
        kind: ``effect`` (an intent row, a key the server can dedup on, retried with that
            key), ``read`` (a pure step: journalled, rerun after a crash in flight, still sent
            a key) or ``unkeyed`` (an effect the server cannot dedup: one attempt, and a crash
            in flight sends the run to ``needs_attention``). None: ``read`` when the server's
            annotations say ``readOnlyHint`` (and not ``destructiveHint``), else ``effect``.
        args: argument name -> sources (an ``Arg``, a kind or a tuple of kinds, as
            ``surefoot.guard.ToolPolicy`` takes them). Arguments of the schema not named here
            accept trusted (untainted) values only.
        key_arg: an argument to carry the idempotency key (for a server that dedups on an
            argument of its own rather than on ``_meta``); it is filled in by surefoot and
            must be declared by the tool's input schema.
        fields: output field -> kind (``record``, ``correspondent``, ``document``,
            ``content``), as ``ToolPolicy.fields``.
        document_arg: the argument that selects a document, as ``ToolPolicy.document_arg``.
        items: the output fields that name one element of a collection read, as
            ``ToolPolicy.items``.
        audience: the arguments naming who receives what the call carries, as
            ``ToolPolicy.audience`` (each must come from the user's words when another
            argument carries environment data).
        carried: arguments only carried into what the tool writes, as ``ToolPolicy.carried``.
        readers: output fields naming who can already read the item (a file's sharers, an
            event's participants), as ``ToolPolicy.readers``: a mapping keyed by readers has
            its keys labelled too.
    """

    kind: str | None = None
    args: Mapping[str, Any] = field(default_factory=dict)
    key_arg: str | None = None
    fields: Mapping[str, str] = field(default_factory=dict)
    document_arg: str | None = None
    items: tuple[str, ...] = ()
    audience: tuple[str, ...] = ()
    carried: tuple[str, ...] = ()
    readers: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind is not None and self.kind not in KINDS:
            raise ConfigError(f"McpTool kind must be one of {KINDS} or None, got {self.kind!r}")
        if self.key_arg is not None and self.key_arg in self.args:
            raise ConfigError(
                f"McpTool key_arg {self.key_arg!r} is filled in by surefoot; do not declare "
                "sources for it in args"
            )


def _canonical(value: Any) -> Any:
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def listing_of(tools: list[Any]) -> list[dict[str, Any]]:
    """The SDK's ``Tool`` objects as canonical JSON dicts, sorted by name."""
    out = []
    for t in tools:
        d = t.model_dump(mode="json", by_alias=True, exclude_none=True)
        out.append(_canonical({k: d[k] for k in ("name", *_COMPARED) if k in d}))
    return sorted(out, key=lambda d: str(d.get("name")))


def fingerprint(listing: list[dict[str, Any]]) -> str:
    """sha256 (first 16 hex digits) of a canonical listing."""
    blob = json.dumps(listing, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def changes(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Tool name -> what differs from ``old`` to ``new`` (empty when nothing does)."""
    a = {str(t["name"]): t for t in old}
    b = {str(t["name"]): t for t in new}
    out: dict[str, list[str]] = {}
    for name in sorted(a.keys() | b.keys()):
        if name not in b:
            out[name] = ["removed"]
        elif name not in a:
            out[name] = ["added"]
        else:
            diff = [k for k in _COMPARED if a[name].get(k) != b[name].get(k)]
            if diff:
                out[name] = diff
    return out


def rug_pull(server: str, where: str, changed: Mapping[str, list[str]]) -> ToolListChangedError:
    """The error for a listing that changed under a run."""
    what = "; ".join(f"{t}: {', '.join(c)}" for t, c in sorted(changed.items()))
    return ToolListChangedError(
        f"{where} changed its tools under a running run (a rug pull): {what}. Nothing was "
        "called. The run keeps the listing it journalled; if the change is expected, start "
        "a new run (it reads the new listing) or cancel this one",
        server,
        changed,
    )


def annotations_of(tool: Mapping[str, Any]) -> dict[str, Any]:
    ann = tool.get("annotations")
    return dict(ann) if isinstance(ann, Mapping) else {}


def kind_for(tool: Mapping[str, Any], decl: McpTool | None) -> str:
    """The durability kind of ``tool``: the user's declaration, else the server's hints
    read as a default (``readOnlyHint`` and not ``destructiveHint``: ``read``), else
    ``effect``."""
    if decl is not None and decl.kind is not None:
        return decl.kind
    ann = annotations_of(tool)
    if ann.get("readOnlyHint") is True and ann.get("destructiveHint") is not True:
        return "read"
    return "effect"


def schema_args(tool: Mapping[str, Any]) -> list[str]:
    """The argument names the tool's input schema declares (its ``properties``)."""
    schema = tool.get("inputSchema")
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    return sorted(str(k) for k in props) if isinstance(props, Mapping) else []


def derive_policy(
    server: str,
    listing: list[dict[str, Any]],
    declared: Mapping[str, McpTool],
    *,
    version: str = "1",
) -> CapabilityPolicy:
    """The per-argument policy of one server's listing, deny by default.

    Every tool of the listing gets a ``ToolPolicy`` whose arguments are those its input
    schema declares: the sources the user declared for it (``McpTool.args``), else
    ``Arg("trusted")`` (untainted values only), and the user's output fields, ``items``,
    ``audience``, ``carried`` and ``readers`` as declared. Descriptions and annotations are
    not read.

    Raises:
        ConfigError: a declaration names a tool the listing does not have, or an argument
            (or ``key_arg``) its schema does not declare.
    """
    by_name = {str(t["name"]): t for t in listing}
    unknown = sorted(set(declared) - set(by_name))
    if unknown:
        raise ConfigError(
            f"MCP server {server!r}: declarations name tools it does not list: {unknown} "
            f"(it lists {sorted(by_name)})"
        )
    tools = []
    for name, tool in sorted(by_name.items()):
        decl = declared.get(name) or McpTool()
        names = schema_args(tool)
        extra = sorted(set(decl.args) - set(names))
        key_missing = decl.key_arg is not None and decl.key_arg not in names
        if extra or key_missing:
            bad = extra or [str(decl.key_arg)]
            raise ConfigError(
                f"MCP server {server!r}, tool {name!r}: {bad} not in its input schema's "
                f"arguments {names}; declare only arguments the schema has"
            )
        args: dict[str, Any] = {a: decl.args.get(a, Arg("trusted")) for a in names}
        if decl.key_arg is not None:
            del args[decl.key_arg]  # supplied by surefoot, never by the caller
        tools.append(
            ToolPolicy(
                name,
                args,
                dict(decl.fields),
                decl.document_arg,
                items=decl.items,
                audience=decl.audience,
                carried=decl.carried,
                readers=decl.readers,
            )
        )
    return CapabilityPolicy(f"mcp:{server}", tools, version=version)
