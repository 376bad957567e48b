"""Capabilities per argument: which sources may supply each argument of each tool.

A tool is not simply "consequential" or not: a payment's recipient must come from the user
or a trusted record, while its amount may come from a document the user pointed to; a URL a
read tool fetches must be trusted or on an allow-list (a read is a sink when its argument can
carry data out); an email's recipient must be someone the user named or who already wrote to
them. A :class:`CapabilityPolicy` declares that per argument (its tools' :class:`ToolPolicy`
declarations), as data (printable, versioned, fingerprinted), and denies by default: an
undeclared tool or argument is refused.

A **user-delegated source** widens one argument for one task: when the user's own words name
the document that supplies it ("her email is on her website www.dora-website.com"),
:meth:`CapabilityPolicy.delegate` grants ``invite.user_email <- document get_webpage
[www.dora-website.com]``. Only arguments declared ``Arg(..., delegable=True)`` can be
delegated, the document must be named in the trusted task text, and only content read from
that document (its source is ``document:TOOL[SELECTOR].FIELD``) gets through: whatever else
is planted elsewhere is refused as before. Text planted *in* the delegated document does get
through for that argument: the user trusted that document for it.

:meth:`CapabilityPolicy.call` checks a call, runs it and labels its output per field
(:func:`~surefoot.guard.label_output`). The final answer is a sink too:
:meth:`CapabilityPolicy.check_answer` marks text derived from untrusted data and, if the
policy says so, refuses it until endorsed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError, TrustError
from ._labels import Label, Labeled, plain
from ._tools import (
    Arg,
    Delegation,
    ToolPolicy,
    document_of,
    item_source,
    kind_of,
    label_output,
    named_in,
)

__all__ = ["Answer", "CapabilityPolicy"]


_ENVIRONMENT = ("record", "document", "correspondent", "content")
"""Kinds of data read from the environment: the user's private data when it leaves (a
``name`` selects a thing the system lists, and says no more than that it exists)."""


def _elements(value: Labeled[Any]) -> list[Labeled[Any]]:
    """A list of labelled elements checked one by one (each carries its own label), else
    the value itself."""
    items = value.value
    if isinstance(items, list | tuple) and items and all(isinstance(x, Labeled) for x in items):
        return list(items)
    return [value]


def _brief(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


@dataclass(frozen=True, slots=True)
class Answer:
    """The final answer as it may be shown: its text, label and whether it is marked.

    Attributes:
        text: the answer text.
        label: what it derives from.
        marked: True when it derives from untrusted data not endorsed; whoever displays it
            must show :attr:`notice` with it.
        withheld: the sources of parts cut from it (:func:`~surefoot.guard.compose_answer`).
    """

    text: str
    label: Label
    marked: bool
    withheld: tuple[str, ...] = ()

    @property
    def notice(self) -> str:
        if not self.marked:
            return ""
        return "derived from untrusted data: " + ", ".join(sorted(self.label.tainted))

    def display(self) -> str:
        """The text as a viewer should show it: prefixed with the notice when marked."""
        return f"[{self.notice}]\n{self.text}" if self.marked else self.text


@dataclass(frozen=True, slots=True, init=False)
class CapabilityPolicy:
    """Per-argument capabilities of a set of tools, deny by default; data, not code.

    Args:
        name: the policy's name (printed in refusals).
        tools: the declared tools.
        version: bump when a declaration changes; stored with runs that use it.
        answer_requires_endorsement: refuse a final answer derived from untrusted data
            until endorsed (default: allow it, marked).
        delegations: the grants of one task (made by :meth:`delegate`, which checks them).
    """

    name: str
    tools: Mapping[str, ToolPolicy] = field(default_factory=dict)
    version: str = "1"
    answer_requires_endorsement: bool = False
    delegations: tuple[Delegation, ...] = ()

    def __init__(
        self,
        name: str,
        tools: Iterable[ToolPolicy] | Mapping[str, ToolPolicy] = (),
        *,
        version: str = "1",
        answer_requires_endorsement: bool = False,
        delegations: Iterable[Delegation] = (),
    ) -> None:
        items = list(tools.values()) if isinstance(tools, Mapping) else list(tools)
        by_name: dict[str, ToolPolicy] = {}
        for t in items:
            if not isinstance(t, ToolPolicy):
                raise ConfigError(f"{name}: tools must be ToolPolicy values, got {t!r}")
            if t.name in by_name:
                raise ConfigError(f"{name}: tool {t.name!r} declared twice")
            by_name[t.name] = t
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "tools", by_name)
        object.__setattr__(self, "version", str(version))
        object.__setattr__(self, "answer_requires_endorsement", bool(answer_requires_endorsement))
        grants = tuple(delegations)
        for d in grants:
            self._check_grant(d)
        object.__setattr__(self, "delegations", grants)

    # -- user-delegated sources ----------------------------------------------------------

    def _check_grant(self, d: Delegation) -> None:
        if not isinstance(d, Delegation):
            raise ConfigError(f"{self.name}: delegations must be Delegation values, got {d!r}")
        tool, _, name = d.arg.partition(".")
        spec = self.tools.get(tool)
        arg = spec.args.get(name) if spec else None
        if arg is None:
            raise ConfigError(f"{self.name}: delegation {d.arg!r} names no declared argument")
        if not arg.delegable:
            raise TrustError(
                f"{d.arg} is not delegable in {self._where()}, so the task cannot let a "
                f"document supply it (it accepts {arg.describe()}); declare "
                f"Arg(..., delegable=True) for it if a user may",
                sink=f"tool:{d.arg}",
            )
        reader = self.tools.get(d.source)
        if reader is None or reader.document_arg is None:
            raise ConfigError(
                f"{self.name}: delegation {d.arg!r} reads from {d.source!r}, which is not a "
                "declared tool with a document_arg (the argument that selects a document)"
            )

    def delegate(self, task: Labeled[str], grants: Iterable[Delegation]) -> CapabilityPolicy:
        """This policy plus ``grants``, each checked against the user's own ``task``.

        A grant is sound only when the user said it: the task must be untainted (the user's
        words, not something read) and must name the document (its selector, verbatim) and
        the element it points at (verbatim, or a file name in words: ``team meeting
        minutes`` names ``team-meeting-minutes.docx``, :func:`named_in`).

        Raises:
            TrustError: the task is tainted or unlabelled, an argument is not delegable, or
                a document is not named in the task.
            ConfigError: a grant names an undeclared argument or reading tool.
        """
        if not isinstance(task, Labeled) or task.tainted:
            srcs = sorted(task.label.tainted) if isinstance(task, Labeled) else "no label"
            raise TrustError(
                f"a delegation is made from the user's own task only; {task!r:.80} is not ({srcs})",
                sink="delegation",
            )
        new = tuple(grants)
        for d in new:
            if d.item and not named_in(d.item, str(task.value)):
                raise TrustError(
                    f"delegation {d.describe()!r} names an element the task does not: "
                    f"{d.item!r} is not in {str(task.value)!r:.120}; a delegation to a "
                    "collection covers only the messages the task points at",
                    sink=f"tool:{d.arg}",
                )
            if d.selector not in str(task.value):
                raise TrustError(
                    f"delegation {d.describe()!r} names a document the task does not: "
                    f"{d.selector!r} is not in {str(task.value)!r:.120}; only the user's own "
                    "words can delegate an argument to a document",
                    sink=f"tool:{d.arg}",
                )
        return CapabilityPolicy(
            self.name,
            self.tools,
            version=self.version,
            answer_requires_endorsement=self.answer_requires_endorsement,
            delegations=(*self.delegations, *new),
        )

    # -- as data -------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The declaration as plain JSON data."""
        return {
            "name": self.name,
            "version": self.version,
            "answer_requires_endorsement": self.answer_requires_endorsement,
            "tools": {k: t.to_dict() for k, t in sorted(self.tools.items())},
        } | ({"delegations": [d.to_dict() for d in self.delegations]} if self.delegations else {})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CapabilityPolicy:
        """Rebuild a policy from :meth:`to_dict` output."""
        try:
            tools = [
                ToolPolicy(
                    name,
                    {
                        k: Arg(
                            *a["accepts"],
                            allow=a.get("allow", ()),
                            delegable=a.get("delegable", False),
                        )
                        for k, a in t["args"].items()
                    },
                    t.get("fields", {}),
                    t.get("document_arg"),
                    t.get("output_trust", "untrusted"),
                    tuple(t.get("items", ())),
                    tuple(t.get("audience", ())),
                    tuple(t.get("carried", ())),
                    tuple(t.get("readers", ())),
                )
                for name, t in data["tools"].items()
            ]
            return cls(
                data["name"],
                tools,
                version=data.get("version", "1"),
                answer_requires_endorsement=data.get("answer_requires_endorsement", False),
                delegations=[Delegation(**d) for d in data.get("delegations", [])],
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ConfigError(f"not a CapabilityPolicy dict ({exc!r}): {data!r:.200}") from exc

    @property
    def fingerprint(self) -> str:
        """sha256 of the declaration (first 16 hex digits): which policy a run used."""
        blob = json.dumps(self.to_dict(), sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def describe(self) -> str:
        """The policy as lines a person reads."""
        lines = [f"policy {self.name} v{self.version} ({self.fingerprint}); undeclared: refused"]
        for name, t in sorted(self.tools.items()):
            args = ", ".join(f"{k} <- {a.describe()}" for k, a in sorted(t.args.items()))
            lines.append(f"  {name}({args or 'no arguments'})")
            if t.fields:
                lines.append(f"    output: {dict(sorted(t.fields.items()))}")
        ans = "refused until endorsed" if self.answer_requires_endorsement else "shown, marked"
        lines.append(f"  final answer derived from untrusted data: {ans}")
        lines += [f"  this task: {d.describe()}" for d in self.delegations]
        return "\n".join(lines)

    # -- the checks ----------------------------------------------------------------------

    def _where(self) -> str:
        return f"policy {self.name} v{self.version}"

    def check_call(self, tool: str, args: Mapping[str, Any]) -> None:
        """Allow a call, or raise naming the tool, the argument, the source and the fix.

        Args:
            tool: the tool's name.
            args: argument name -> :class:`Labeled` value.

        Raises:
            TrustError: the tool or an argument is undeclared, a value is unlabelled, or a
                value derives from a source its argument does not accept.
        """
        spec = self.tools.get(tool)
        if spec is None:
            raise TrustError(
                f"{tool} is not declared in {self._where()}, so it is refused (deny by "
                f"default); declare ToolPolicy({tool!r}, args={{...}}) to allow it",
                sink=f"tool:{tool}",
            )
        for name, value in args.items():
            sink = f"tool:{tool}.{name}"
            arg = spec.args.get(name)
            if arg is None:
                raise TrustError(
                    f"{tool} argument {name!r} is not declared in {self._where()} (declared: "
                    f"{sorted(spec.args) or 'none'}); add {name!r}: Arg(...) to allow it",
                    sink=sink,
                )
            if not isinstance(value, Labeled):
                raise TrustError(
                    f"{tool} argument {name!r}={_brief(value)} has no label; pass the Labeled "
                    "value it came from (trusted(...) for the user's own input)",
                    sink=sink,
                )
            for one in _elements(value):
                self._check_value(tool, name, arg, one)
        if spec.audience:
            self._check_audience(tool, spec.audience, args)

    def _check_audience(
        self, tool: str, audience: tuple[str, ...], args: Mapping[str, Any]
    ) -> None:
        """Secrets don't flow to third parties: when an argument other than the audience
        carries data read from the environment, every recipient comes from the user's words,
        the user's own records (a contact), a document the task delegated it to, an
        endorsement, or the argument's ``allow`` list; never from a correspondent (a sender,
        a participant) or from text. The readers of an item the task delegated the argument
        to (a named file's sharers) receive that item's own data and records, never text
        read elsewhere."""
        private = sorted(
            {
                s
                for name, v in args.items()
                if name not in audience and isinstance(v, Labeled)
                for one in _elements(v)
                for s in one.label.sources
                if kind_of(s) in _ENVIRONMENT
            }
        )
        if not private:
            return
        spec = self.tools[tool]
        for name in audience:
            if name not in args:
                continue
            for one in _elements(args[name]):
                lab = one.label
                # the user's words, the user's own records (contacts, what they sent), or a
                # document the user's task delegated this argument to
                foreign = [
                    s
                    for s in sorted(lab.sources)
                    if kind_of(s) not in ("user", "record")
                    and not self._delegated(tool, name, s, private)
                ]
                endorsed = bool(lab.endorsed_by) and not lab.tainted
                if not foreign or endorsed or spec.args[name].allowed_value(one.value):
                    continue
                src = foreign[0]
                raise TrustError(
                    f"{tool} argument {name!r}={_brief(one.value)} comes from {src}, and the "
                    f"call carries data read from {private[:3]} (the user's private data), "
                    f"which goes only to whom the user's task names or the user's own records "
                    f"hold. To allow it: name "
                    f"{_brief(one.value)} in the task, have a person endorse the recipient "
                    f"(Endorser.endorse), or list it in {tool}.{name}'s allow patterns in "
                    f"{self._where()}",
                    sink=f"tool:{tool}.{name}",
                    sources=(src, *private),
                )

    def _delegated(self, tool: str, name: str, source: str, private: list[str]) -> bool:
        """A grant covers ``source`` for ``tool.name``; for the readers of an item
        (``ToolPolicy.readers``), only when what the call carries is that item's own data or
        records (what the system keeps: a time, an id)."""
        if not any(d.covers(tool, name, source) for d in self.delegations):
            return False
        if kind_of(source) != "correspondent":
            return True
        item = item_source(source)
        return all(kind_of(p) == "record" or item_source(p) == item for p in private)

    def _check_value(self, tool: str, name: str, arg: Arg, value: Labeled[Any]) -> None:
        label = value.label
        bad = [
            s
            for s in sorted(label.sources)
            if not arg.accepts_source(s, label)
            and not any(d.covers(tool, name, s) for d in self.delegations)
        ]
        if not bad or arg.allowed_value(value.value):
            return
        src = bad[0]
        state = "untrusted" if src in label.tainted else "trusted"
        fixes = [f"supply it from {Arg(*arg.accepts, allow=arg.allow).describe()}"]
        if src in label.tainted and "trusted" in arg.accepts:
            fixes.append("have a person endorse it (Endorser.endorse)")
        if arg.allow:
            fixes.append(f"use a value matching {list(arg.allow)}")
        doc = document_of(src)
        if doc and arg.delegable:
            fixes.append(
                f"let the user's task delegate it: policy.delegate(task, [Delegation("
                f"{tool + '.' + name!r}, {doc[0]!r}, {doc[1]!r})]) (the task must name {doc[1]!r})"
            )
        fixes.append(f"or declare Arg(..., {kind_of(src)!r}) for it in {self._where()}")
        raise TrustError(
            f"{tool} argument {name!r}={_brief(value.value)} comes from {src} ({kind_of(src)}, "
            f"{state}), which {tool}.{name} does not accept (it accepts {arg.describe()}). "
            f"To allow it: {'; '.join(fixes)}",
            sink=f"tool:{tool}.{name}",
            sources=tuple(bad),
        )

    def allows(self, tool: str, args: Mapping[str, Any]) -> bool:
        """True if :meth:`check_call` would pass."""
        try:
            self.check_call(tool, args)
        except TrustError:
            return False
        return True

    def call(self, tool: str, fn: Callable[..., Any], args: Mapping[str, Labeled[Any]]) -> Any:
        """Check the call, run ``fn`` with the plain values, and label its output per field.

        Returns:
            the output as :func:`label_output` gives it (containers of :class:`Labeled`).

        Raises:
            TrustError: as :meth:`check_call`; ``fn`` is then not called.
        """
        self.check_call(tool, args)
        result = fn(**{k: plain(v) for k, v in args.items()})
        return label_output(self.tools[tool], result, args)

    def check_answer(self, text: Labeled[str]) -> Answer:
        """The final answer as a sink: marked when derived from untrusted data.

        Raises:
            TrustError: unlabelled text, or tainted text under
                ``answer_requires_endorsement``.
        """
        if not isinstance(text, Labeled):
            raise TrustError(
                f"final answer {_brief(text)} has no label; pass the Labeled text it was "
                "derived from (derive(...) joins the labels of what it used)",
                sink="answer",
            )
        if text.tainted and self.answer_requires_endorsement:
            srcs = tuple(sorted(text.label.tainted))
            raise TrustError(
                f"final answer {_brief(text.value)} derives from untrusted {list(srcs)}; "
                f"{self._where()} requires an endorsement (Endorser.endorse) before it is "
                "presented as the agent's own claim",
                sink="answer",
                sources=srcs,
            )
        return Answer(str(text.value), text.label, text.tainted)
