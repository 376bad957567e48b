"""What a ``Store`` hands out and keeps: entries, contributions, endorsements, agent specs,
leases, lost updates, and the small checks every write path shares (key, expect, the version
a writer saw). Records only: this module imports nothing else of ``statebus``.
"""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass
from typing import Any

from ..codec import loads
from ..errors import ConfigError
from ..guard import Label, Labeled
from ..storage.checks import check_text
from ..storage.merges import LIST_OPS
from ..storage.state import StateRecord

__all__ = ["AgentSpec", "Contribution", "Endorsement", "Entry", "Lease", "LostUpdate"]


@dataclass(frozen=True, slots=True)
class Contribution:
    """One contribution merged into a key: who sent it, with what trust, when, its id (None
    if it had none) and the value it contributed."""

    author: str
    trust: str
    at: float
    id: str | None
    value: Any


@dataclass(frozen=True, slots=True)
class Entry:
    """One key's current value and labels.

    Attributes:
        key: the key.
        value: the decoded value.
        version: writes to this key so far (1 for the first write).
        revision: the store's global revision at this write.
        author: who wrote it (an agent name, or ``system``); set by the runtime.
        trust: ``system``, ``trusted`` or ``untrusted``; set by the runtime.
        written_at: the store clock's time of the write.
        label: the provenance stored with the value (``write_labeled``, or a session that
            had read untrusted data), or None; :func:`label_of` joins it with the author's.
        lineage: how many versions this value descends from, itself included (``version``
            when no version of the key was lost); None for an entry not read from a store.
        merged_by: the merge a merge key's value is made by (``append``, ``add``, ...);
            None for a plain key.
        contributions: a merge key's contributions, oldest first, each with its author,
            trust, time and id.
        expires_at: when a key written with ``ttl=`` expires (store clock); None: never.
    """

    key: str
    value: Any
    version: int
    revision: int
    author: str
    trust: str
    written_at: float
    label: Label | None = None
    lineage: int | None = None
    merged_by: str | None = None
    contributions: tuple[Contribution, ...] = ()
    expires_at: float | None = None


@dataclass(frozen=True, slots=True)
class Endorsement:
    """The audit record of one endorsement: who vouched for which write, and why.

    Attributes:
        principal: who endorsed (``human:alice``). writer: the session that wrote.
        key / version: the entry written with the endorsement.
        sources: the untrusted sources whose taint was lifted. reason: as given.
        at: the store clock's time.
    """

    principal: str
    writer: str
    key: str
    version: int
    sources: tuple[str, ...]
    reason: str
    at: float


@dataclass(frozen=True, slots=True)
class AgentSpec:
    """A registered agent: its trust level and the key patterns it may read and write."""

    name: str
    trust: str
    read: tuple[str, ...]
    write: tuple[str, ...]

    def may(self, action: str, key: str) -> bool:
        patterns = self.read if action == "read" else self.write
        return any(fnmatch.fnmatchcase(key, p) for p in patterns)


@dataclass(frozen=True, slots=True)
class Lease:
    """A lease on a name. ``epoch`` is the fencing token: writes fenced by this lease succeed
    only while nobody has taken the lease over (or released it) since."""

    name: str
    key: str
    holder: str
    epoch: int
    expires_at: float


@dataclass(frozen=True, slots=True)
class LostUpdate:
    """A last-writer-wins write by ``overwritten_by``, based on version ``seen`` of ``key``,
    landed over version ``version``: the ``versions`` versions after ``seen`` (up to
    ``version``) are not in what it wrote, so their changes are gone, silently, unless a
    later write based on one of them brings it back."""

    key: str
    version: int
    overwritten_by: str
    seen: int
    versions: int = 1


def contributions(rec: StateRecord, value: Any) -> tuple[Contribution, ...]:
    """The contributions of a merge key's record, oldest first (none for a plain key).

    ``value`` is the record's value, decoded: a list merge's items are its last entries.
    """
    if rec.merge_op is None or rec.merge_log is None:
        return ()
    log = json.loads(rec.merge_log)
    if rec.merge_op in LIST_OPS:
        values = list(value[-len(log) :]) if log else []
    else:
        values = [loads(json.dumps(e[4])) for e in log]
    return tuple(
        Contribution(str(e[0]), str(e[1]), float(e[2]), e[3], v)
        for e, v in zip(log, values, strict=True)
    )


# Entry is a frozen dataclass, whose __init__ sets each field through object.__setattr__;
# entry_of (one per write and read) calls the slots' setters directly instead.
_NEW = object.__new__
(_KEY, _VALUE, _VER, _REV, _AUTHOR, _TRUST, _AT, _LABEL, _LIN, _MERGED, _CONTRIB, _EXP) = (
    getattr(Entry, f).__set__ for f in Entry.__slots__
)


def entry_of(rec: StateRecord) -> Entry:
    value = loads(rec.value)
    label = None
    if isinstance(value, Labeled):  # the envelope is provenance, not part of the value
        value, label = value.value, value.label
    e = _NEW(Entry)
    _KEY(e, rec.key)
    _VALUE(e, value)
    _VER(e, rec.version)
    _REV(e, rec.revision)
    _AUTHOR(e, rec.author)
    _TRUST(e, rec.trust)
    _AT(e, rec.written_at)
    _LABEL(e, label)
    _LIN(e, rec.lineage)
    _MERGED(e, rec.merge_op)
    _CONTRIB(e, contributions(rec, value) if rec.merge_op is not None else ())
    _EXP(e, rec.expires_at)
    return e


def basis_of(key: str, seen: Any) -> tuple[int, int] | None:
    """``seen`` as (version, lineage): an Entry read, a pair, or a version (taken as having
    lost nothing before it)."""
    if seen is None:
        return None
    if isinstance(seen, Entry):
        return (seen.version, seen.lineage if seen.lineage is not None else seen.version)
    if isinstance(seen, tuple) and len(seen) == 2:
        version, lineage = seen
    else:
        version = lineage = seen
    for n in (version, lineage):
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ConfigError(
                f"seen for key {key!r} must be the Entry you read (or its version, >= 0), "
                f"got {seen!r}"
            )
    if lineage > version:
        raise ConfigError(
            f"seen for key {key!r}: lineage {lineage} exceeds version {version}; pass the "
            "Entry you read"
        )
    return (version, lineage)


def seen_of(e: Entry | None) -> tuple[int, int]:
    """What a session remembers of an entry it saw: (version, lineage)."""
    if e is None:
        return (0, 0)
    return (e.version, e.lineage if e.lineage is not None else e.version)


def check_key(key: Any) -> str:
    if not isinstance(key, str) or not key or len(key) > 512:
        raise ConfigError(
            f"a key must be a non-empty string of at most 512 characters, got {key!r}"
        )
    return check_text("key", key)


def check_expect(key: str, expect: Any) -> int | None:
    if expect is None:
        return None
    if isinstance(expect, bool) or not isinstance(expect, int) or expect < 0:
        raise ConfigError(
            f"expect for key {key!r} must be a version number >= 0 (0 = create only) or None, "
            f"got {expect!r}; pass the version of the Entry you read"
        )
    return expect
