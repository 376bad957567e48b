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
- ``name``: a name a third party chose for something the system lists (a channel): it
  selects that thing, for an argument that accepts it, and is content anywhere else (a URL
  or an address written into a channel's name is the writer's text).
- ``any``: anything, untrusted content included (a message body, a subject).

:class:`Arg` declares one argument, :class:`ToolPolicy` one tool, :class:`Delegation` one
grant a user's task makes (an argument a named document may supply). Tool outputs are
labelled where the tool runs: :func:`label_output` labels each field of a structured result
with its kind and where it came from (``document:TOOL[SELECTOR].FIELD`` for a document the
user pointed to; ``document:TOOL[SELECTOR]{"sender": "Bob"}.FIELD`` for one message of a
collection, an inbox or a channel, named by its declared ``items`` fields).

**The labelling rule: who controls a field decides its kind, not what the field is called.**
A field the system keeps (an id, a timestamp, a size, the user's own account) is a
``record``; an address a third party chose (a sender, a calendar participant, a file's owner
or sharer, a transaction's counterparty) is a ``correspondent``; the name a third party gave
something the system lists (a channel) is a ``name``; anything else a third party wrote (a
body, a file's name, a review) is ``content``. The label depends
on the tool and the field only, never on the value: a runtime assigns it without knowing what
was planted.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError
from ._labels import Label, Labeled, plain

__all__ = [
    "KINDS",
    "Arg",
    "Delegation",
    "ToolPolicy",
    "document_of",
    "env_label",
    "item_of",
    "item_source",
    "kind_of",
    "label_output",
    "named_in",
]

KINDS = ("user", "trusted", "record", "document", "correspondent", "name", "any")
_OUTPUT_KINDS = ("record", "document", "correspondent", "name", "content")


def kind_of(source: str) -> str:
    """The kind of a source principal: the part before ``:`` (``user`` has no colon)."""
    return source.split(":", 1)[0]


def env_label(kind: str, where: str, *, trust: str = "untrusted") -> Label:
    """The label of one field of environment data: source ``kind:where`` at ``trust``."""
    return Label.of(f"{kind}:{where}", trust)


_ITEM = r"([^\[\].]+)\[(.*?)\](\{(?:[^\\}]|\\.|\"(?:[^\"\\]|\\.)*\")*\})?\.([^.\[\]]*)$"
_DOCUMENT = re.compile(r"^(?:document|correspondent):" + _ITEM, re.S)
_OF_ITEM = re.compile(r"^(?:document|correspondent|record):" + _ITEM, re.S)


def document_of(source: str) -> tuple[str, str] | None:
    """``(tool, selector)`` of a ``document:TOOL[SELECTOR].FIELD`` source, or of the readers
    of one (``correspondent:TOOL[SELECTOR].shared_with``, :class:`ToolPolicy` ``readers``),
    else None."""
    m = _DOCUMENT.match(source)
    return (m.group(1), m.group(2)) if m else None


_EXTENSION = re.compile(r"\.[A-Za-z0-9]{1,5}$")


def _words(text: str) -> str:
    return " ".join(re.sub(r"[-_\s]+", " ", text).lower().split())


def named_in(value: str, text: str) -> bool:
    """Whether ``text`` (the user's task) names ``value``: verbatim, or, for a file name,
    in words (``team meeting minutes`` names ``team-meeting-minutes.docx``: the extension
    dropped, dashes and underscores read as spaces, case ignored)."""
    if value and value in text:
        return True
    if not re.search(r"[-_]|\.[A-Za-z0-9]{1,5}$", value):
        return False
    words = _words(_EXTENSION.sub("", value))
    return len(words.split()) >= 2 and f" {words} " in f" {_words(text)} "


def item_source(source: str) -> tuple[str, str, str] | None:
    """``(tool, selector, item)`` of any field of one item of a document the user pointed
    to (its content, its readers, its ids: a tool declaring ``readers`` names them all),
    else None; ``item`` is the element's naming JSON, or ``""``."""
    m = _OF_ITEM.match(source)
    return (m.group(1), m.group(2), m.group(3) or "") if m else None


def item_of(source: str) -> dict[str, str]:
    """The fields naming one element of a collection in a document source (``{"sender":
    "Bob"}`` from ``document:read_inbox[alice]{"sender": "Bob"}.body``), else ``{}``."""
    m = _DOCUMENT.match(source)
    if not m or not m.group(3):
        return {}
    try:
        got = json.loads(m.group(3))
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in got.items()} if isinstance(got, dict) else {}


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
        return kind in self.accepts and kind in ("record", "document", "correspondent", "name")

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
        items: for a tool that reads a collection (an inbox, a channel), the fields that
            name one element of it (``("sender",)``): each element of a document read gets a
            source naming it, and a delegation to the collection covers only the elements
            the user's task names (:class:`Delegation` ``item``).
        audience: the arguments naming who receives what the call carries (``recipients``,
            ``cc``, ``channel``, ``url``). When another argument carries data read from the
            environment (the user's private data: a body, a file, a code), each of these
            must come from the user's own words (or match ``allow``): secrets never go to
            someone the task did not name (:meth:`CapabilityPolicy.check_call`).
        carried: arguments only carried into what the tool writes (a new file's content):
            they do not choose what it returns (the new file's id), so their taint does not
            flow into its output.
        readers: output fields naming who can already read the item (a file's owner and
            sharers, an event's participants). A mapping under one (``shared_with``:
            ``{address: permission}``) is keyed by readers: its keys are labelled too (as
            :class:`Labeled` keys), with the field's kind. When the user pointed to the
            document, every field of each of its items names it (``correspondent:TOOL[SEL]
            {item}.shared_with``, ``record:TOOL[SEL]{item}.id_``), so a task that names the
            item may delegate an argument to its readers ("send it to the file's sharers",
            "the same participants as that event"); the readers of other items found by
            the same read are not covered. Without a delegation a reader is a
            ``correspondent`` like any other.
    """

    name: str
    args: Mapping[str, Arg] = field(default_factory=dict)
    fields: Mapping[str, str] = field(default_factory=dict)
    document_arg: str | None = None
    output_trust: str = "untrusted"
    items: tuple[str, ...] = ()
    audience: tuple[str, ...] = ()
    carried: tuple[str, ...] = ()
    readers: tuple[str, ...] = ()

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
        for attr in ("items", "audience", "carried", "readers"):
            raw = getattr(self, attr)
            names = (raw,) if isinstance(raw, str) else tuple(raw)
            if not all(isinstance(n, str) and n for n in names):
                raise ConfigError(f"{self.name}: {attr} names fields, got {raw!r}")
            object.__setattr__(self, attr, names)
        for attr in ("audience", "carried"):
            missing = [a for a in getattr(self, attr) if a not in args]
            if missing:
                raise ConfigError(
                    f"{self.name}: {attr} {missing} are not declared arguments ({sorted(args)})"
                )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"args": {k: a.to_dict() for k, a in sorted(self.args.items())}}
        if self.fields:
            out["fields"] = dict(sorted(self.fields.items()))
        if self.document_arg:
            out["document_arg"] = self.document_arg
        if self.output_trust != "untrusted":
            out["output_trust"] = self.output_trust
        if self.items:
            out["items"] = list(self.items)
        if self.audience:
            out["audience"] = list(self.audience)
        if self.carried:
            out["carried"] = list(self.carried)
        if self.readers:
            out["readers"] = list(self.readers)
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

    A collection (an inbox, a channel: a tool declared with ``items``) is not one document:
    ``item`` names the element the task points at (a sender, a subject or an id written in
    the task), ``Delegation("send_direct_message.body", "read_inbox", "Alice", "Bob")``, and
    the grant covers that element only, never every message that arrives there.
    """

    arg: str
    source: str
    selector: str
    item: str = ""

    def __post_init__(self) -> None:
        tool, _, name = self.arg.partition(".")
        if not (tool and name and isinstance(self.source, str) and self.source):
            raise ConfigError(
                f"Delegation names 'tool.argument' and the reading tool, got {self.arg!r}, "
                f"{self.source!r}; e.g. Delegation('send_money.amount', 'read_file', 'bill.txt')"
            )
        if not isinstance(self.selector, str) or not self.selector:
            raise ConfigError(f"Delegation {self.arg!r}: selector must be non-empty text")
        if not isinstance(self.item, str):
            raise ConfigError(f"Delegation {self.arg!r}: item must be text, got {self.item!r}")

    def covers(self, tool: str, name: str, source: str) -> bool:
        """True if this grant lets ``source`` supply ``tool.name``: the same document and,
        for an element of a collection, the element this grant names."""
        if f"{tool}.{name}" != self.arg or document_of(source) != (self.source, self.selector):
            return False
        item = item_of(source)
        return not item if not self.item else self.item in item.values()

    def to_dict(self) -> dict[str, str]:
        out = {"arg": self.arg, "source": self.source, "selector": self.selector}
        return out | ({"item": self.item} if self.item else {})

    def describe(self) -> str:
        item = f" item {self.item!r}" if self.item else ""
        doc = f"{self.source}[{self.selector}]{item}"
        return f"{self.arg} <- document {doc} (delegated by the user)"


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
    argument), but for those declared ``carried``.
    """
    pointed, selector = False, ""
    if spec.document_arg and args and spec.document_arg in args:
        pointed = not args[spec.document_arg].tainted
        selector = _selector_text(plain(args[spec.document_arg]))
    default = "document" if pointed else "content"

    def leaf(value: Any, fieldname: str, item: str) -> Labeled[Any]:
        kind = spec.fields.get(fieldname, spec.fields.get("*", default))
        if kind == "content" and pointed:
            kind = "document"
        where = None
        if pointed and (kind == "document" or spec.readers):
            where = f"{spec.name}[{selector}]{item}.{fieldname}"
        own = env_label(kind, where or f"{spec.name}.{fieldname}", trust=spec.output_trust)
        return Labeled(value, own.join(inherited) if inherited.tainted else own)

    def walk(value: Any, fieldname: str, item: str) -> Any:
        if isinstance(value, Mapping):
            if fieldname in spec.readers:  # keyed by readers: {address: permission}
                return {
                    leaf(k, fieldname, item): walk(v, fieldname, item) for k, v in value.items()
                }
            if pointed and spec.items and not item:  # one element of a collection
                named = {k: str(value[k]) for k in spec.items if value.get(k) is not None}
                item = json.dumps(named, sort_keys=True) if named else ""
            return {k: walk(v, str(k), item) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, fieldname, item) for v in value]
        return leaf(value, fieldname, item)

    # what a tool returns depends on what it was asked: the arguments' taint flows into it,
    # but for those only carried into what it writes (a new file's content does not choose
    # the file's id), and a name that selected the thing it names (a channel) is its
    # identity, as an id is
    given = args or {}
    bad = frozenset(
        s
        for k, a in given.items()
        if k not in spec.carried
        for s in a.label.tainted
        if kind_of(s) != "name"
    )
    inherited = Label(bad, bad, bad)
    return walk(_plain(result), "result", "")
