"""The shared ``Store``: versioned keys, agent identities and scopes, schemas and leases.

Every entry carries its author and trust level, taken from the writer's registered identity
(an ``AgentSession``), never from the value: a model cannot label its own output.
"""

from __future__ import annotations

import fnmatch
import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .. import storage as _storage
from ..clock import Clock, SystemClock
from ..codec import dumps, loads
from ..errors import ConfigError, ConflictError, ScopeError
from ..storage.base import StateRecord, StateStore, check_text
from ._trust import Endorser, Label, Labeled, label_of

__all__ = [
    "TRUST_LEVELS",
    "AgentSession",
    "AgentSpec",
    "Endorsement",
    "Entry",
    "Lease",
    "LostUpdate",
    "Store",
]

TRUST_LEVELS = ("system", "trusted", "untrusted")
LEASE_PREFIX = "_lease/"
ENDORSEMENT_PREFIX = "_endorsement/"
_HIDDEN = (LEASE_PREFIX, ENDORSEMENT_PREFIX)


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
    """

    key: str
    value: Any
    version: int
    revision: int
    author: str
    trust: str
    written_at: float
    label: Label | None = None


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
    """Version ``version`` of ``key`` was overwritten by ``overwritten_by``, whose write was
    based on version ``seen``: the change made in ``version`` is gone, silently."""

    key: str
    version: int
    overwritten_by: str
    seen: int


def _entry(rec: StateRecord) -> Entry:
    value = loads(rec.value)
    label = None
    if isinstance(value, Labeled):  # the envelope is provenance, not part of the value
        value, label = value.value, value.label
    return Entry(
        rec.key, value, rec.version, rec.revision, rec.author, rec.trust, rec.written_at, label
    )


def _check_key(key: Any) -> str:
    if not isinstance(key, str) or not key or len(key) > 512:
        raise ConfigError(
            f"a key must be a non-empty string of at most 512 characters, got {key!r}"
        )
    return check_text("key", key)


def _check_expect(key: str, expect: Any) -> int | None:
    if expect is None:
        return None
    if isinstance(expect, bool) or not isinstance(expect, int) or expect < 0:
        raise ConfigError(
            f"expect for key {key!r} must be a version number >= 0 (0 = create only) or None, "
            f"got {expect!r}; pass the version of the Entry you read"
        )
    return expect


class Store:
    """Versioned shared state for a team of agents.

    ``write(k, v)`` is last-writer-wins and counts the updates it silently loses (in
    ``lost_updates``); ``write(k, v, expect=version)`` raises ``ConflictError`` (with the
    current value, version and author) instead of losing one.

    Args:
        url: a storage URL (``sqlite:///team.db``, ``memory://``) or an opened ``Storage``.
        namespace: keys of different namespaces never meet.
        clock: time for ``written_at`` and leases (``SystemClock`` by default).

    Attributes:
        lost_updates: versions overwritten by a last-writer-wins write whose writer had
            read an older version, so their change is gone (counted in this process; only
            writes whose basis is known count: session writes, or ``seen=``).
        lost: one ``LostUpdate`` per such write.
        writes: successful writes through this object. conflicts: refused versioned writes.
    """

    def __init__(
        self, url: str | Any = "memory://", namespace: str = "default", clock: Clock | None = None
    ) -> None:
        if not isinstance(namespace, str) or not namespace:
            raise ConfigError(f"a namespace must be a non-empty string, got {namespace!r}")
        check_text("namespace", namespace)
        if isinstance(url, str):
            self.storage: Any = _storage.open(url)
            self.state: StateStore = self.storage.statestore(namespace)
        elif hasattr(url, "statestore"):
            self.storage = url
            self.state = url.statestore(namespace)
        elif isinstance(url, StateStore):
            self.storage = None
            self.state = url
        else:
            raise ConfigError(
                f"Store needs a storage URL like 'sqlite:///team.db', a Storage or a "
                f"StateStore, got {url!r}"
            )
        self.namespace = namespace
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.agents: dict[str, AgentSpec] = {}
        self._schemas: list[tuple[str, Any]] = []
        self._lock = threading.Lock()
        self.lost_updates = 0
        self.lost: list[LostUpdate] = []
        self.writes = 0
        self.conflicts = 0

    # -- identities and schemas --------------------------------------------------------

    def register_agent(
        self,
        name: str,
        *,
        trust: str = "trusted",
        read: Iterable[str] = ("*",),
        write: Iterable[str] = ("*",),
    ) -> AgentSpec:
        """Register an agent's identity: its trust level and read/write scopes (glob patterns).

        Raises:
            ConfigError: an empty name, the reserved name ``system``, or an unknown trust.
        """
        if not isinstance(name, str) or not name or name == "system":
            raise ConfigError(
                f"agent name must be a non-empty string other than 'system', got {name!r}"
            )
        check_text("agent name", name)
        if trust not in ("trusted", "untrusted"):
            raise ConfigError(
                f"agent {name!r}: trust must be 'trusted' or 'untrusted' ('system' is the "
                f"runtime's own), got {trust!r}"
            )
        if isinstance(read, str) or isinstance(write, str):
            raise ConfigError(
                f"agent {name!r}: read and write are lists of patterns, like read=['report*']"
            )
        spec = AgentSpec(name, trust, tuple(read), tuple(write))
        self.agents[name] = spec
        return spec

    def session(self, name: str) -> AgentSession:
        """The handle an agent uses: its reads are scoped, its writes labelled with its identity.

        Raises:
            ConfigError: the agent was not registered.
        """
        spec = self.agents.get(name)
        if spec is None:
            raise ConfigError(
                f"unknown agent {name!r}: register it first with "
                f"store.register_agent({name!r}, trust='trusted', read=[...], write=[...])"
            )
        return AgentSession(self, spec)

    def declare_schema(self, key_pattern: str, schema: Any) -> None:
        """Validate every write to keys matching ``key_pattern`` (a glob) against ``schema``.

        ``schema`` is a dict spec, a pydantic model class, or a callable validator (see
        ``surefoot.statebus`` docs). A failing write raises ``SchemaViolationError`` naming
        the key, the field and the reason; nothing is written.
        """
        from ._schema import compile_schema

        self._schemas.append((key_pattern, compile_schema(schema)))

    # -- reads and writes --------------------------------------------------------------

    def read(self, key: str) -> Entry | None:
        """The key's current entry, or None."""
        rec = self.state.read(_check_key(key))
        return _entry(rec) if rec is not None else None

    def snapshot(self) -> dict[str, Entry]:
        """Every key's current entry (leases and endorsement records excluded), by key."""
        return {k: _entry(r) for k, r in self.state.snapshot().items() if not k.startswith(_HIDDEN)}

    def endorsements(self) -> list[Endorsement]:
        """Every endorsement recorded in this namespace (by any process), oldest first."""
        recs = [r for k, r in self.state.snapshot().items() if k.startswith(ENDORSEMENT_PREFIX)]
        out = []
        for r in sorted(recs, key=lambda r: r.revision):
            d = loads(r.value)
            out.append(
                Endorsement(
                    d["principal"],
                    d["writer"],
                    d["key"],
                    d["version"],
                    tuple(d["sources"]),
                    d["reason"],
                    d["at"],
                )
            )
        return out

    def _record_endorsement(self, e: Endorsement) -> None:
        value = {
            "principal": e.principal,
            "writer": e.writer,
            "key": e.key,
            "version": e.version,
            "sources": list(e.sources),
            "reason": e.reason,
            "at": e.at,
        }
        self.write(f"{ENDORSEMENT_PREFIX}{uuid.uuid4().hex}", value, expect=0)

    @property
    def revision(self) -> int:
        """The global revision: the number of writes the namespace has seen."""
        return self.state.revision()

    def write(
        self,
        key: str,
        value: Any,
        *,
        author: str = "system",
        expect: int | None = None,
        seen: int | None = None,
        fence: Lease | None = None,
    ) -> Entry:
        """Write ``value`` to ``key`` (one conditional statement in the backend).

        Args:
            key: the key.
            value: any value the codec can store.
            author: ``system`` (the runtime) or a registered agent, whose trust is used.
            expect: None for last-writer-wins; 0 to create only; n to write only over version n.
            seen: the version the writer based its value on (lets last-writer-wins count what
                it overwrote unseen); sessions pass it for you.
            fence: a ``Lease``; the write succeeds only while that lease is still held.

        Raises:
            ConflictError: ``expect`` (or the fence) did not match; nothing was written.
            SchemaViolationError: the value fails its key's schema; nothing was written.
            ConfigError: a bad key, a bad ``expect``, or an unregistered author.
        """
        key = _check_key(key)
        expect = _check_expect(key, expect)
        if author == "system":
            trust = "system"
        else:
            spec = self.agents.get(author)
            if spec is None:
                raise ConfigError(
                    f"author {author!r} is not a registered agent, so its trust is unknown; "
                    f"call store.register_agent({author!r}, ...) or write as 'system'"
                )
            trust = spec.trust
        plain = value.value if isinstance(value, Labeled) else value  # not its provenance
        for pattern, check in self._schemas:
            if fnmatch.fnmatchcase(key, pattern):
                check(key, plain)
        text = dumps(value, where=f"key {key!r}")
        try:
            rec = self.state.write(
                key,
                text,
                author=author,
                trust=trust,
                expect=expect,
                now=self.clock.now(),
                fence=(fence.key, fence.epoch) if fence is not None else None,
            )
        except ConflictError:
            with self._lock:
                self.conflicts += 1
            raise
        with self._lock:
            self.writes += 1
            # Version n-1 is lost when the write making version n never saw it. Each version
            # has one successor, so every lost version is counted exactly once.
            if expect is None and seen is not None and seen < rec.version - 1:
                self.lost_updates += 1
                self.lost.append(LostUpdate(key, rec.version - 1, author, seen))
        return _entry(rec)

    # -- leases ------------------------------------------------------------------------

    def acquire(self, name: str, holder: str, ttl: float) -> Lease | None:
        """Take the lease ``name`` for ``ttl`` seconds of the store's clock, or return None.

        The lease is a row, not a database lock: nothing is held open while the holder works
        (for example during a model call). A lease whose time ran out can be taken over; the
        takeover raises the epoch, so the old holder's fenced writes are refused.
        """
        if ttl <= 0:
            raise ConfigError(f"lease ttl must be > 0 seconds, got {ttl!r}")
        key = LEASE_PREFIX + name
        now = self.clock.now()
        rec = self.state.read(key)
        if rec is not None:
            cur = loads(rec.value)
            if not cur["released"] and cur["expires_at"] > now and cur["holder"] != holder:
                return None
        author = holder if holder in self.agents else "system"
        value = {"holder": holder, "expires_at": now + ttl, "released": False}
        try:
            new = self.write(key, value, author=author, expect=rec.version if rec else 0)
        except ConflictError:
            return None
        return Lease(name, key, holder, new.version, now + ttl)

    def release(self, lease: Lease) -> bool:
        """Give the lease back; False if it was already taken over (or released)."""
        author = lease.holder if lease.holder in self.agents else "system"
        value = {"holder": lease.holder, "expires_at": self.clock.now(), "released": True}
        try:
            self.write(lease.key, value, author=author, expect=lease.epoch)
        except ConflictError:
            return False
        return True

    def close(self) -> None:
        """Release the storage's connections (when this Store opened it from a URL)."""
        if self.storage is not None:
            self.storage.close()

    def __repr__(self) -> str:
        return f"Store({getattr(self.storage, 'url', self.state)!r}, namespace={self.namespace!r})"


class AgentSession:
    """What one agent uses: reads limited to its read scope, writes labelled with its identity.

    The session remembers the version of each key it last saw, so a last-writer-wins write
    that overwrites versions it never saw is counted in ``Store.lost_updates``.

    It also remembers what it read: ``context`` is the join of the labels of every entry
    this session has read. Once that includes untrusted, unendorsed data, every write of the
    session carries the taint (the value is stored with that label), so a trusted agent that
    relays untrusted text cannot launder it. To lift the taint of one write, have a trusted
    principal endorse it: ``write(key, value, endorsed_by=Endorser("human:alice"),
    reason="…")`` records who endorsed what (``Store.endorsements()``).
    """

    def __init__(self, store: Store, spec: AgentSpec) -> None:
        self.store = store
        self.spec = spec
        self.name = spec.name
        self.trust = spec.trust
        self.seen: dict[str, int] = {}
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
        self.seen[key] = e.version if e is not None else 0
        if e is not None:
            self.context = self.context.join(label_of(e))
        return e

    def snapshot(self) -> dict[str, Entry]:
        """Every entry this agent may read (keys outside its read scope are left out)."""
        out = {k: e for k, e in self.store.snapshot().items() if self.spec.may("read", k)}
        for k, e in out.items():
            self.seen[k] = e.version
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
        self.seen[e.key] = e.version
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
