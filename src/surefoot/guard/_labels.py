"""Trust labels: where a value comes from, how labels join, and who may lift a taint.

This is the CaMeL/FIDES model, for any value an agent handles (a store entry, a tool's
output, the user's task):

- A :class:`Label` says which principals a value derives from and which of them were
  untrusted and not endorsed (``tainted``). :func:`label_of` reads it off a stored value
  that carries its ``author`` and ``trust`` (a ``surefoot.statebus`` entry, a logged change).
- Labels propagate: :func:`derive` applies a function to labelled values and labels the
  result with the union of their sources, so a value computed from untrusted text stays
  tainted however many hands it passes through.
- :class:`Endorser` lets a trusted principal (a person, a reviewing agent) vouch for a
  value, which lifts its taint and is logged.
- :func:`reject_label_fields` refuses a model-produced payload that tries to set provenance
  itself: labels are the runtime's to set, never the model's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from ..codec import register
from ..errors import ConfigError, TrustError

__all__ = [
    "LABEL_FIELDS",
    "TRUST_LEVELS",
    "AuthoredValue",
    "Endorser",
    "Label",
    "Labeled",
    "derive",
    "join_labels",
    "label_of",
    "labeled",
    "plain",
    "reject_label_fields",
    "trusted",
]

T = TypeVar("T")
U = TypeVar("U")

TRUST_LEVELS = ("system", "trusted", "untrusted")
"""The trust a writer is registered with: the runtime itself, a trusted or an untrusted agent."""
LABEL_FIELDS = frozenset({"author", "trust", "label", "endorsed_by", "$label"})
"""Fields a model must never supply: provenance is the runtime's to set."""

# The modules Label and Labeled lived in until 0.1: values stored then carry these tags.
_FORMER_MODULE = "surefoot.statebus._trust"


class AuthoredValue(Protocol):
    """A stored value with the provenance the runtime recorded for it (a store entry).

    It may also carry ``label``: a :class:`Label` stored with the value, or None.
    """

    @property
    def key(self) -> str: ...
    @property
    def value(self) -> Any: ...
    @property
    def author(self) -> str: ...
    @property
    def trust(self) -> str: ...


def _fs(x: Iterable[str]) -> frozenset[str]:
    return x if isinstance(x, frozenset) else frozenset(x)


@dataclass(frozen=True, slots=True)
class Label:
    """Where a value comes from.

    Attributes:
        sources: every principal the value derives from (agent ids, ``user``).
        untrusted: the sources that were untrusted when read.
        tainted: untrusted sources not (yet) endorsed; a tainted value is refused at sinks.
        endorsed_by: principals who endorsed it.
    """

    sources: frozenset[str] = frozenset()
    untrusted: frozenset[str] = frozenset()
    tainted: frozenset[str] = frozenset()
    endorsed_by: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        # decoded from the codec these arrive as sets or lists
        for name in ("sources", "untrusted", "tainted", "endorsed_by"):
            object.__setattr__(self, name, _fs(getattr(self, name)))

    @property
    def trust(self) -> str:
        """``untrusted`` if tainted, ``endorsed`` if it had untrusted sources, else ``trusted``."""
        if self.tainted:
            return "untrusted"
        return "endorsed" if self.untrusted else "trusted"

    def join(self, *others: Label) -> Label:
        """The label of a value derived from this one and ``others``: unions throughout."""
        labels = (self, *others)
        return Label(
            frozenset().union(*(x.sources for x in labels)),
            frozenset().union(*(x.untrusted for x in labels)),
            frozenset().union(*(x.tainted for x in labels)),
            frozenset().union(*(x.endorsed_by for x in labels)),
        )

    @classmethod
    def of(cls, author: str, trust: str) -> Label:
        """The label of a value written by ``author`` at ``trust`` level."""
        if trust not in TRUST_LEVELS:
            raise ConfigError(f"trust must be one of {TRUST_LEVELS}, got {trust!r}")
        bad = frozenset({author}) if trust == "untrusted" else frozenset()
        return cls(frozenset({author}), bad, bad)


@dataclass(frozen=True, slots=True)
class Labeled(Generic[T]):
    """A value with its label. Stored as is, it carries its taint into the store."""

    value: T
    label: Label = field(default_factory=Label)

    @property
    def tainted(self) -> bool:
        return bool(self.label.tainted)

    def map(self, fn: Callable[[T], U]) -> Labeled[U]:
        """Apply ``fn`` to the value; the result keeps this label."""
        return Labeled(fn(self.value), self.label)


register(Label, former=(f"{_FORMER_MODULE}.Label",))
register(Labeled, former=(f"{_FORMER_MODULE}.Labeled",))


def trusted(value: T, source: str = "user") -> Labeled[T]:
    """Label a value the runtime itself holds (the user's task, a constant) as trusted."""
    return Labeled(value, Label(frozenset({source})))


def _stored(entry: AuthoredValue) -> tuple[Any, Label | None]:
    label = getattr(entry, "label", None)
    if isinstance(entry.value, Labeled):  # an entry built by hand around an envelope
        inner = entry.value
        return inner.value, inner.label if label is None else label.join(inner.label)
    return entry.value, label


def label_of(entry: AuthoredValue) -> Label:
    """The label of a stored value: from its author and trust, joined with any stored label.

    A stored label (``Entry.label``) can only add sources and taint to what the author's
    identity gives; it never removes the author's own taint, so forging one gains nothing.
    """
    base = Label.of(entry.author, entry.trust)
    stored = _stored(entry)[1]
    return base.join(stored) if stored is not None else base


def labeled(entry: AuthoredValue) -> Labeled[Any]:
    """The entry's value with :func:`label_of`."""
    return Labeled(_stored(entry)[0], label_of(entry))


def derive(fn: Callable[..., U], *inputs: Labeled[Any]) -> Labeled[U]:
    """Compute ``fn(*values)`` and label it with the join of the inputs' labels."""
    label = Label().join(*(x.label for x in inputs))
    return Labeled(fn(*(x.value for x in inputs)), label)


def join_labels(tree: Any) -> Label:
    """The join of every label in a tree of :class:`Labeled` values (dicts, lists)."""
    if isinstance(tree, Labeled):
        return tree.label
    if isinstance(tree, Mapping):
        return Label().join(*(join_labels(v) for v in tree.values()))
    if isinstance(tree, list | tuple):
        return Label().join(*(join_labels(v) for v in tree))
    return Label()


def plain(tree: Any) -> Any:
    """A tree of :class:`Labeled` values without its labels."""
    if isinstance(tree, Labeled):
        return plain(tree.value)
    if isinstance(tree, Mapping):  # keys too: a mapping keyed by readers has Labeled keys
        return {(plain(k) if isinstance(k, Labeled) else k): plain(v) for k, v in tree.items()}
    if isinstance(tree, list | tuple):
        return [plain(v) for v in tree]
    return tree


def reject_label_fields(payload: Any, where: str) -> None:
    """Refuse a model-produced payload that tries to set provenance (author, trust, label).

    Raises:
        TrustError: naming the field and where it appeared.
    """
    if isinstance(payload, Mapping):
        for k, v in payload.items():
            if k in LABEL_FIELDS:
                raise TrustError(
                    f"{where}: the model tried to set {k!r}={v!r}; author and trust are set by "
                    "the runtime from the writer's identity. Drop the field.",
                    sink=where,
                )
            reject_label_fields(v, where)
    elif isinstance(payload, list | tuple):
        for v in payload:
            reject_label_fields(v, where)


class Endorser:
    """A trusted principal that can vouch for tainted values; every endorsement is logged.

    The runtime creates endorsers for people or reviewing agents; a model never gets one.

    Args:
        principal: who endorses (``human:alice``, ``agent:reviewer``).
    """

    def __init__(self, principal: str) -> None:
        if not principal:
            raise ConfigError("an endorser needs a principal name, got an empty string")
        self.principal = principal
        self.log: list[tuple[tuple[str, ...], str]] = []

    def endorse(self, value: Labeled[T], *, reason: str) -> Labeled[T]:
        """Lift the taint of ``value``; the label keeps its sources and names the endorser.

        Raises:
            ConfigError: no reason given (an endorsement must say why).
        """
        if not reason.strip():
            raise ConfigError(f"{self.principal}: an endorsement needs a reason")
        lab = value.label
        self.log.append((tuple(sorted(lab.tainted)), reason))
        return Labeled(
            value.value,
            Label(lab.sources, lab.untrusted, frozenset(), lab.endorsed_by | {self.principal}),
        )
