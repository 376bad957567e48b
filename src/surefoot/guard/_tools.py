"""What a tool declares: which sources may supply each argument, and how its output is labelled.

Sources are the principals in a value's :class:`~surefoot.guard.Label`, named
``kind:where`` (``content:read_file.content``, ``correspondent:get_received_emails.sender``);
a name without a colon is its own kind (``user``). The kinds an argument may accept:

- ``user``: the user's own words (the task), never tainted.
- ``trusted``: any source that is not tainted (the user, trusted agents, endorsed values).
- ``record``: a field the system keeps (ids, the user's own account, timestamps), even when
  the environment is labelled untrusted.
- ``document``: content of a document the user pointed to (read with a user-given argument).
- ``correspondent``: the sender of something the user received (who already wrote to them).
- ``any``: anything, untrusted content included (a message body, a subject).

:class:`Arg` declares one argument, :class:`ToolPolicy` one tool, :class:`Delegation` one
grant a user's task makes (an argument a named document may supply). Tool outputs are
labelled where the tool runs: :func:`label_output` labels each field of a structured result
with its kind and where it came from (``document:TOOL[SELECTOR].FIELD`` for a document the
user pointed to).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError
from ._labels import Label, Labeled

__all__ = [
    "KINDS",
    "Arg",
    "Delegation",
    "ToolPolicy",
    "document_of",
    "env_label",
    "kind_of",
    "label_output",
]

KINDS = ("user", "trusted", "record", "document", "correspondent", "any")
_OUTPUT_KINDS = ("record", "document", "correspondent", "content")


def kind_of(source: str) -> str:
    """The kind of a source principal: the part before ``:`` (``user`` has no colon)."""
    return source.split(":", 1)[0]


def env_label(kind: str, where: str, *, trust: str = "untrusted") -> Label:
    """The label of one field of environment data: source ``kind:where`` at ``trust``."""
    return Label.of(f"{kind}:{where}", trust)


_DOCUMENT = re.compile(r"^document:([^\[\].]+)\[(.*)\]\.([^.\[\]]*)$", re.S)


def document_of(source: str) -> tuple[str, str] | None:
    """``(tool, selector)`` of a ``document:TOOL[SELECTOR].FIELD`` source, else None."""
    m = _DOCUMENT.match(source)
    return (m.group(1), m.group(2)) if m else None


def _selector_text(value: Any) -> str:
    """How a document's selecting argument is written in its source (lists comma-joined)."""
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


@dataclass(frozen=True, slots=True, init=False)
class Arg:
    """Which sources may supply one argument.

    ``Arg("user", "record")``; ``Arg("trusted", allow=["https://docs.example.com/*"])``.

    Args:
        *accepts: kinds from :data:`KINDS` (default ``trusted``).
        allow: shell-style patterns; a value matching one passes whatever its source
            (an allow-list of URLs, of recipients).
        delegable: the user may name, in their task, a document that supplies this
            argument (:meth:`CapabilityPolicy.delegate`); off by default.
    """

    accepts: frozenset[str] = frozenset({"trusted"})
    allow: tuple[str, ...] = ()
    delegable: bool = False

    def __init__(self, *accepts: str, allow: Iterable[str] = (), delegable: bool = False) -> None:
        kinds = frozenset(accepts or ("trusted",))
        bad = sorted(kinds - set(KINDS))
        if bad:
            raise ConfigError(f"Arg accepts kinds from {KINDS}, got {bad}; e.g. Arg('user')")
        pats = (allow,) if isinstance(allow, str) else tuple(allow)
        if not all(isinstance(p, str) and p for p in pats):
            raise ConfigError(f"Arg allow= takes non-empty pattern strings, got {pats!r}")
        object.__setattr__(self, "accepts", kinds)
        object.__setattr__(self, "allow", pats)
        object.__setattr__(self, "delegable", bool(delegable))

    @classmethod
    def any(cls) -> Arg:
        """An argument anything may supply (text that is only carried, like a body)."""
        return cls("any")

    def accepts_source(self, source: str, label: Label) -> bool:
        """True if ``source`` (one of ``label``'s sources) may supply this argument."""
        if "any" in self.accepts:
            return True
        tainted = source in label.tainted
        kind = kind_of(source)
        if not tainted and "trusted" in self.accepts:
            return True
        if kind == "user" and not tainted and "user" in self.accepts:
            return True
        return kind in self.accepts and kind in ("record", "document", "correspondent")

    def allowed_value(self, value: Any) -> bool:
        """True if every atom of ``value`` matches an ``allow`` pattern."""
        if not self.allow:
            return False
        atoms = value if isinstance(value, list | tuple | set | frozenset) else [value]
        return bool(atoms) and all(
            any(fnmatch.fnmatchcase(str(a), p) for p in self.allow) for a in atoms
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"accepts": sorted(self.accepts)}
        if self.allow:
            out["allow"] = list(self.allow)
        if self.delegable:
            out["delegable"] = True
        return out

    def describe(self) -> str:
        text = " or ".join(sorted(self.accepts))
        text += f" (or a value matching {list(self.allow)})" if self.allow else ""
        return text + ("; delegable to a document the user names" if self.delegable else "")


@dataclass(frozen=True, slots=True)
class ToolPolicy:
    """One tool's declaration: its arguments' sources and how its output is labelled.

    Args:
        name: the tool's name.
        args: argument name -> :class:`Arg` (or a kind string, or a tuple of kinds).
            An argument not declared is refused.
        fields: output field name -> kind (``record``, ``correspondent``, ``document``,
            ``content``) for structured results; ``"*"`` names the kind of fields not
            listed (``content`` if absent).
        document_arg: the argument that selects a document; when the user (or another
            trusted source) supplied it, the output's ``content`` fields become
            ``document`` (the user pointed to it).
        output_trust: the trust level of what the tool returns (``untrusted``: environment
            data; ``trusted`` for the runtime's own tools).
    """

    name: str
    args: Mapping[str, Arg] = field(default_factory=dict)
    fields: Mapping[str, str] = field(default_factory=dict)
    document_arg: str | None = None
    output_trust: str = "untrusted"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(f"ToolPolicy needs a tool name, got {self.name!r}")
        if not isinstance(self.args, Mapping):
            raise ConfigError(f"{self.name}: args must map names to Arg, got {self.args!r}")
        args = {k: _as_arg(self.name, k, v) for k, v in self.args.items()}
        object.__setattr__(self, "args", args)
        bad = {k: v for k, v in dict(self.fields).items() if v not in _OUTPUT_KINDS}
        if bad:
            raise ConfigError(f"{self.name}: output field kinds must be in {_OUTPUT_KINDS}: {bad}")
        object.__setattr__(self, "fields", dict(self.fields))
        if self.document_arg is not None and self.document_arg not in args:
            raise ConfigError(
                f"{self.name}: document_arg={self.document_arg!r} is not a declared argument "
                f"({sorted(args)})"
            )
        if self.output_trust not in ("trusted", "untrusted"):
            raise ConfigError(f"{self.name}: output_trust must be trusted or untrusted")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"args": {k: a.to_dict() for k, a in sorted(self.args.items())}}
        if self.fields:
            out["fields"] = dict(sorted(self.fields.items()))
        if self.document_arg:
            out["document_arg"] = self.document_arg
        if self.output_trust != "untrusted":
            out["output_trust"] = self.output_trust
        return out


def _as_arg(tool: str, name: str, spec: Any) -> Arg:
    if isinstance(spec, Arg):
        return spec
    if isinstance(spec, str):
        return Arg(spec)
    if isinstance(spec, tuple | list) and all(isinstance(s, str) for s in spec):
        return Arg(*spec)
    raise ConfigError(f"{tool}.{name}: expected an Arg, a kind or a tuple of kinds, got {spec!r}")


@dataclass(frozen=True, slots=True)
class Delegation:
    """The user's grant, for one task: argument ``arg`` (``tool.argument``) may come from
    the document that tool ``source`` reads with ``selector`` (as the user wrote it).

    ``Delegation("invite_user_to_slack.user_email", "get_webpage", "www.dora-website.com")``
    """

    arg: str
    source: str
    selector: str

    def __post_init__(self) -> None:
        tool, _, name = self.arg.partition(".")
        if not (tool and name and isinstance(self.source, str) and self.source):
            raise ConfigError(
                f"Delegation names 'tool.argument' and the reading tool, got {self.arg!r}, "
                f"{self.source!r}; e.g. Delegation('send_money.amount', 'read_file', 'bill.txt')"
            )
        if not isinstance(self.selector, str) or not self.selector:
            raise ConfigError(f"Delegation {self.arg!r}: selector must be non-empty text")

    def covers(self, tool: str, name: str, source: str) -> bool:
        """True if this grant lets ``source`` supply ``tool.name``."""
        return f"{tool}.{name}" == self.arg and document_of(source) == (self.source, self.selector)

    def to_dict(self) -> dict[str, str]:
        return {"arg": self.arg, "source": self.source, "selector": self.selector}

    def describe(self) -> str:
        return f"{self.arg} <- document {self.source}[{self.selector}] (delegated by the user)"


def _plain(value: Any) -> Any:
    """A tool's result as plain containers: pydantic models and dataclasses become dicts."""
    dump = getattr(value, "model_dump", None)
    if callable(dump) and hasattr(type(value), "model_fields"):
        return _plain(dump())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def label_output(
    spec: ToolPolicy, result: Any, args: Mapping[str, Labeled[Any]] | None = None
) -> Any:
    """Label a tool's result per field: the same shape, every leaf a :class:`Labeled`.

    A leaf under field ``f`` (the nearest mapping key above it) gets source
    ``KIND:TOOL.f`` with ``KIND`` from ``spec.fields`` (``content`` if unlisted), at
    ``spec.output_trust``; ``content`` becomes ``document`` when ``spec.document_arg`` was
    supplied by an untainted source, and a document's source names it:
    ``document:TOOL[SELECTOR].f``, the selector as given (which document it is). A plain
    (unstructured) result is one leaf, field ``result``. Each leaf also carries the taint of
    the arguments (an output chosen by an untrusted argument is as untrusted as that
    argument).
    """
    pointed, selector = False, ""
    if spec.document_arg and args and spec.document_arg in args:
        pointed = not args[spec.document_arg].tainted
        selector = _selector_text(args[spec.document_arg].value)
    default = "document" if pointed else "content"

    def walk(value: Any, fieldname: str) -> Any:
        if isinstance(value, Mapping):
            return {k: walk(v, str(k)) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, fieldname) for v in value]
        kind = spec.fields.get(fieldname, spec.fields.get("*", default))
        if kind == "content" and pointed:
            kind = "document"
        where = f"{spec.name}[{selector}].{fieldname}" if kind == "document" and pointed else None
        own = env_label(kind, where or f"{spec.name}.{fieldname}", trust=spec.output_trust)
        return Labeled(value, own.join(inherited) if inherited.tainted else own)

    # what a tool returns depends on what it was asked: the arguments' taint flows into it
    bad = frozenset().union(*(a.label.tainted for a in (args or {}).values()))
    inherited = Label(bad, bad, bad)
    return walk(_plain(result), "result")
