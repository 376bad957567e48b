"""``AgentSession``: one agent's handle on a ``Store`` — reads in its read scope, writes in
its write scope, labelled with its registered identity and with the taint of what it read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, ScopeError
from ..storage.base import MergeOutcome
from ._entry import AgentSpec, Endorsement, Entry, Lease, seen_of
from ._history import Change
from ._merge import update
from ._trust import Endorser, Label, Labeled, label_of

if TYPE_CHECKING:
    from ..resilience import RetryPolicy
    from ._store import Store

__all__ = ["AgentSession"]


class AgentSession:
    """What one agent uses: reads limited to its read scope, writes labelled with its identity.

    The session remembers the version (and lineage) of each key it last saw, so a
    last-writer-wins write that overwrites versions it never saw is counted in
    ``Store.lost_updates``.

    It also remembers what it read: ``context`` is the join of the labels of every entry
    this session has read. Once that includes untrusted, unendorsed data, every write of the
    session carries the taint (the value is stored with that label), so a trusted agent that
    relays untrusted text cannot launder it; its merges are recorded as untrusted
    contributions. To lift the taint of one write, have a trusted
    principal endorse it: ``write(key, value, endorsed_by=Endorser("human:alice"),
    reason="…")`` records who endorsed what (``Store.endorsements()``).
    """

    def __init__(self, store: Store, spec: AgentSpec) -> None:
        self.store = store
        self.spec = spec
        self.name = spec.name
        self.trust = spec.trust
        self.seen: dict[str, tuple[int, int]] = {}
        self.context: Label = Label()

    @property
    def tainted(self) -> bool:
        """True once this session has read untrusted data that nobody endorsed."""
        return bool(self.context.tainted)

    def read(self, key: str) -> Entry | None:
        """The key's entry, or None.

        Raises:
            ScopeError: the key is outside this agent's read scope.
        """
        if not self.spec.may("read", key):
            raise ScopeError(self.name, key, "read", list(self.spec.read))
        e = self.store.read(key)
        self.seen[key] = seen_of(e)
        if e is not None:
            self.context = self.context.join(label_of(e))
        return e

    def snapshot(self) -> dict[str, Entry]:
        """Every entry this agent may read (keys outside its read scope are left out)."""
        out = {k: e for k, e in self.store.snapshot().items() if self.spec.may("read", k)}
        for k, e in out.items():
            self.seen[k] = seen_of(e)
        self.context = self.context.join(*(label_of(e) for e in out.values()))
        return out

    def labeled(self, value: Any) -> Labeled[Any]:
        """``value`` with the label a write by this session would give it."""
        if isinstance(value, Labeled):
            return Labeled(value.value, _carry(value.label, self.context))
        return Labeled(value, self.context)

    def _prepare(
        self, key: str, value: Any, endorsed_by: Endorser | None, reason: str | None
    ) -> tuple[Any, Endorsement | None]:
        if not self.spec.may("write", key):
            raise ScopeError(self.name, key, "write", list(self.spec.write))
        if endorsed_by is None:
            if reason is not None:
                raise ConfigError(
                    f"{self.name}: reason={reason!r} was given for {key!r} without endorsed_by; "
                    "pass endorsed_by=Endorser('human:...') to endorse the write"
                )
            item = self.labeled(value)
            # nothing untrusted read and no envelope given: store the value as it is
            if not item.label.untrusted and not isinstance(value, Labeled):
                return value, None
            return item, None
        if not isinstance(endorsed_by, Endorser):
            raise ConfigError(
                f"endorsed_by must be an Endorser (a trusted principal), got {endorsed_by!r}"
            )
        item = self.labeled(value)
        lifted = tuple(sorted(item.label.tainted))
        done = endorsed_by.endorse(item, reason=reason or "")
        record = Endorsement(
            endorsed_by.principal, self.name, key, 0, lifted, reason or "", self.store.clock.now()
        )
        return done, record

    def _finish(self, e: Entry, record: Endorsement | None) -> Entry:
        self.seen[e.key] = seen_of(e)
        if record is not None:
            self.store._record_endorsement(
                Endorsement(
                    record.principal,
                    record.writer,
                    e.key,
                    e.version,
                    record.sources,
                    record.reason,
                    record.at,
                )
            )
        return e

    def write(
        self,
        key: str,
        value: Any,
        *,
        expect: int | None = None,
        endorsed_by: Endorser | None = None,
        reason: str | None = None,
    ) -> Entry:
        """Write as this agent (author and trust come from its registration, not the value).

        If this session has read untrusted data, the value is stored with the session's
        label (``Entry.label``), so readers see it as tainted.

        Args:
            endorsed_by: a trusted principal vouching for this write: the taint is lifted
                (the label keeps its sources and names the endorser) and the endorsement is
                recorded in the store (``Store.endorsements()``).
            reason: why it is endorsed (required with ``endorsed_by``).

        Raises:
            ScopeError: the key is outside this agent's write scope.
            ConflictError, SchemaViolationError, ConfigError: as ``Store.write``.
        """
        stored, record = self._prepare(key, value, endorsed_by, reason)
        e = self.store.write(key, stored, author=self.name, expect=expect, seen=self.seen.get(key))
        return self._finish(e, record)

    def delete(self, key: str, *, expect: int | None = None) -> Change | None:
        """Delete as this agent (see ``Store.delete``): the tombstone carries its name.

        Raises:
            ScopeError: the key is outside this agent's write scope.
            ConflictError: ``expect`` did not match; nothing was deleted.
        """
        if not self.spec.may("write", key):
            raise ScopeError(self.name, key, "write", list(self.spec.write))
        return self.store.delete(key, author=self.name, expect=expect)

    def history(self, key: str) -> list[Change]:
        """The key's kept versions (see ``Store.history``); reading them taints the session
        like reading the value does.

        Raises:
            ScopeError: the key is outside this agent's read scope.
        """
        if not self.spec.may("read", key):
            raise ScopeError(self.name, key, "read", list(self.spec.read))
        changes = self.store.history(key)
        self.context = self.context.join(
            *(Label.of(c.author, c.trust).join(c.label or Label()) for c in changes)
        )
        return changes

    def merge(self, key: str, value: Any, *, id: str | None = None) -> MergeOutcome:
        """Contribute to a merge key as this agent (see ``Store.merge``); never conflicts.

        Raises:
            ScopeError: the key is outside this agent's write scope.
        """
        if not self.spec.may("write", key):
            raise ScopeError(self.name, key, "write", list(self.spec.write))
        if isinstance(value, Labeled):
            raise ConfigError(
                f"{self.name}: merge {key!r} takes a plain value; a contribution's labels are "
                "its author's trust (untrusted once this session read untrusted data)"
            )
        return self.store._merge(key, value, self.name, id, tainted=self.tainted)

    def update(
        self, key: str, fn: Callable[[Any], Any], *, policy: RetryPolicy | None = None
    ) -> Entry:
        """``Store.update`` as this agent: reads in its read scope, writes in its write scope."""
        if not self.spec.may("read", key):
            raise ScopeError(self.name, key, "read", list(self.spec.read))
        if not self.spec.may("write", key):
            raise ScopeError(self.name, key, "write", list(self.spec.write))

        def write(k: str, v: Any, version: int) -> Entry:
            stored, record = self._prepare(k, v, None, None)  # labelled like write()
            e = self.store.write(k, stored, author=self.name, expect=version)
            return self._finish(e, record)

        return update(self.store, key, fn, read=self.read, write=write, policy=policy)

    def acquire(self, name: str, ttl: float) -> Lease | None:
        """Take the lease ``name`` as this agent (see ``Store.acquire``)."""
        return self.store.acquire(name, self.name, ttl)

    def write_fenced(
        self,
        key: str,
        value: Any,
        lease: Lease,
        *,
        expect: int | None = None,
        endorsed_by: Endorser | None = None,
        reason: str | None = None,
    ) -> Entry:
        """Write only while ``lease`` is still held (fencing by its epoch); labels as ``write``."""
        stored, record = self._prepare(key, value, endorsed_by, reason)
        e = self.store.write(
            key, stored, author=self.name, expect=expect, seen=self.seen.get(key), fence=lease
        )
        return self._finish(e, record)

    def __repr__(self) -> str:
        return f"AgentSession({self.name!r}, trust={self.trust!r})"


def _carry(own: Label, context: Label) -> Label:
    """``own`` joined with the session's ``context``: a session adds what it read, always.

    Only ``write(..., endorsed_by=...)`` lifts the session's taint, so every lift is audited;
    an envelope endorsed elsewhere is re-tainted by what this session read.
    """
    return own.join(context)
