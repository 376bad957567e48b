"""The shared ``Store``: versioned keys, agent identities and scopes, schemas and leases.

Every entry carries its author and trust level, taken from the writer's registered identity
(an ``AgentSession``), never from the value: a model cannot label its own output.
"""

from __future__ import annotations

import fnmatch
import threading
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from .. import storage as _storage
from ..clock import Clock, server_clock_for
from ..codec import dumps, loads
from ..errors import ConfigError, ConflictError
from ..guard import Labeled
from ..resilience import RetryPolicy
from ..storage.checks import check_text
from ..storage.history import check_policy
from ..storage.state import LeaseWatch, MergeOutcome, StateStore
from ._agents import AgentRegistry, agents_namespace, registrant
from ._entry import (
    AgentSpec,
    Endorsement,
    Entry,
    Lease,
    LostUpdate,
    basis_of,
    check_expect,
    check_key,
    entry_of,
)
from ._history import HIDDEN, Change, TxnResult, Watch, change, txn_result
from ._merge import MergeRule, find_rule, make_rule, update
from ._session import AgentSession

__all__ = ["Store"]

LEASE_PREFIX = "_lease/"
ENDORSEMENT_PREFIX = "_endorsement/"
_HIDDEN = HIDDEN
assert _HIDDEN == (LEASE_PREFIX, ENDORSEMENT_PREFIX)


class Store:
    """Versioned shared state for a team of agents.

    ``write(k, v)`` is last-writer-wins and counts the updates it silently loses (in
    ``lost_updates``, kept by the store); ``write(k, v, expect=version)`` raises
    ``ConflictError`` (with the current value, version and author) instead of losing one.

    What counts as lost: every write is based on a version (the one its writer read) and
    carries that version's changes plus its own, so each version descends from a chain of
    earlier ones, its lineage. A version none of the key's current value descends from was
    overwritten without its change being read: it is lost. A write based on version ``v``
    that lands over version ``w > v`` drops versions ``v+1 … w`` from the lineage; a later
    write based on one of those (read before it was overwritten) brings it back.

    Args:
        url: a storage URL (``sqlite:///team.db``, ``memory://``) or an opened ``Storage``.
        namespace: keys of different namespaces never meet.
        clock: time for ``written_at`` and leases (``SystemClock`` by default).

    Attributes:
        lost_updates: versions of this namespace's keys that no current value descends
            from (read from the store: the same total in every process). Only writes whose
            basis is known can lose one: session writes, or ``seen=``.
        lost: one ``LostUpdate`` per last-writer-wins write of this process that landed
            over versions its writer had not read.
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
        # On PostgreSQL and Redis, leases and TTLs are judged on the server's clock.
        self.clock: Clock = server_clock_for(clock, self.storage)
        # kept in the storage beside the namespace: shared by every process (see _agents)
        self.agents = AgentRegistry(
            self.storage.statestore(agents_namespace(namespace)) if self.storage else None,
            self.clock,
        )
        self._schemas: list[tuple[str, Any]] = []
        self._merges: list[MergeRule] = []
        self._lock = threading.Lock()
        self.lost: list[LostUpdate] = []
        self.writes = 0
        self.conflicts = 0
        self.duplicates = 0

    # -- identities and schemas --------------------------------------------------------

    def register_agent(
        self,
        name: str,
        *,
        trust: str = "trusted",
        read: Iterable[str] = ("*",),
        write: Iterable[str] = ("*",),
        by: str | None = None,
    ) -> AgentSpec:
        """Register an agent's identity: its trust level and read/write scopes (glob patterns).

        The registration is kept in the storage (beside the namespace, not in it), so every
        ``Store`` on the same URL and namespace, in any process, knows the agent; registering
        again replaces it. ``store.agents.history(name)`` is its audit: each version says
        when and by whom (``by``, default ``user@host:pid`` of this process). A ``Store``
        made from a bare ``StateStore`` keeps registrations in this process only.

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
        self.agents.put(spec, by=registrant() if by is None else by)
        return spec

    def session(self, name: str) -> AgentSession:
        """The handle an agent uses: its reads are scoped, its writes labelled with its identity.

        Raises:
            ConfigError: the agent was not registered.
        """
        spec = self.agents.fresh(name)  # the latest registration, from any process
        if spec is None:
            raise ConfigError(
                f"unknown agent {name!r} in namespace {self.namespace!r}: no process sharing "
                "this store registered it; register it first with "
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

    def declare_merge(
        self,
        key_pattern: str,
        op: str | None = None,
        *,
        reducer: Callable[[Any, Any], Any] | None = None,
    ) -> None:
        """Make keys matching ``key_pattern`` (a glob) merge keys, combined by the store.

        ``op`` is ``append`` (a list; a contribution with an ``id`` already merged is not
        added again), ``set_add`` (strings or ints, each once), ``add`` (a number),
        ``max`` / ``min``, or ``merge`` (a dict updated key by key); or pass
        ``reducer=fn``, a pure ``fn(current, contribution) -> new`` run inside the store
        (memory and SQLite only; ``current`` is None for the first). Declare the same merges
        in every process that uses the keys. A merge key is written only by ``merge``.
        Declaring a rule again changes nothing.

        Raises:
            ConfigError: a bad pattern, an unknown op, or a reducer that is not callable.
        """
        rule = make_rule(key_pattern, op, reducer)
        if rule not in self._merges:
            self._merges.append(rule)

    # -- reads and writes --------------------------------------------------------------

    def read(self, key: str) -> Entry | None:
        """The key's current entry, or None (never written, deleted, or expired)."""
        rec = self.state.read(check_key(key), self.clock.now())
        return entry_of(rec) if rec is not None else None

    def snapshot(self) -> dict[str, Entry]:
        """Every key's current entry (leases and endorsement records excluded), by key."""
        now = self.clock.now()
        return {
            k: entry_of(r) for k, r in self.state.snapshot(now).items() if not k.startswith(_HIDDEN)
        }

    # -- history, deletes, expiry, watches, transactions ----------------------------------

    def history(self, key: str) -> list[Change]:
        """The key's kept versions, oldest first, each with its author and trust label
        (deletes and expiries are versions too, with no value)."""
        return [change(c) for c in self.state.history(check_key(key))]

    def read_at(self, key: str, revision: int) -> Change | None:
        """The key as it was at ``revision`` (its last change at or before it), or None
        when it did not exist then.

        Raises:
            CompactedError: that version was removed by compaction; names the oldest kept.
        """
        if isinstance(revision, bool) or not isinstance(revision, int) or revision < 0:
            raise ConfigError(f"revision must be a whole number >= 0, got {revision!r}")
        ch = self.state.read_at(check_key(key), revision)
        return change(ch) if ch is not None else None

    def delete(
        self,
        key: str,
        *,
        author: str = "system",
        expect: int | None = None,
        fence: Lease | None = None,
    ) -> Change | None:
        """Delete ``key``: a tombstone version, logged and watched like a write; None when
        the key is absent (nothing written).

        Raises:
            ConflictError: ``expect`` (or the fence) did not match: a stale delete conflicts
                like a stale write; nothing was deleted.
        """
        key = check_key(key)
        expect = check_expect(key, expect)
        try:
            ch = self.state.delete(
                key,
                author=author,
                trust=self._trust_of(author),
                expect=expect,
                now=self.clock.now(),
                fence=(fence.key, fence.epoch) if fence is not None else None,
            )
        except ConflictError:
            with self._lock:
                self.conflicts += 1
            raise
        return change(ch) if ch is not None else None

    def expire(self) -> int:
        """Log an ``expire`` for every key whose TTL ran out by the store's clock; how many.
        (Reads never return an expired key, and every write sweeps first; this makes the
        expiry events reach watchers and history without waiting for a write.)"""
        return self.state.expire(self.clock.now())

    def compact(self, *, keep: int | None = None, older_than: float | None = None) -> int:
        """Trim the change log: keep the last ``keep`` changes of each key and drop changes
        older than ``older_than`` seconds (by the store's clock); each key's latest change
        always stays. Returns how many were removed. Reading or watching a removed revision
        raises ``CompactedError`` naming the oldest revision kept.

        Raises:
            ConfigError: neither given, or a bad value.
        """
        if keep is None and older_than is None:
            raise ConfigError("compact needs keep=N (changes per key) or older_than=seconds")
        if older_than is not None and (
            isinstance(older_than, bool) or not isinstance(older_than, int | float)
        ):
            raise ConfigError(f"older_than must be seconds, got {older_than!r}")
        before = None if older_than is None else self.clock.now() - float(older_than)
        check_policy(keep, before)
        return self.state.compact(keep=keep, before=before)

    def watch(
        self,
        prefix: str = "",
        *,
        after_revision: int = 0,
        timeout: float | None = None,
        poll: float = 0.5,
        batch: int = 100,
    ) -> Watch:
        """Every change of keys starting with ``prefix`` after ``after_revision``, in
        revision order, as a sync or async iterator (``for c in`` / ``async for c in``).

        Resume with ``after_revision=watch.revision`` (the last one delivered): nothing is
        missed and nothing repeated. ``timeout``: stop iterating after that many seconds
        without a change (None: never). ``poll``: the longest the watch blocks before it
        sweeps expiries and looks again.

        Raises (while iterating):
            CompactedError: a change after ``after_revision`` was compacted away.
        """
        if not isinstance(prefix, str):
            raise ConfigError(f"watch prefix must be a string, got {prefix!r}")
        return Watch(
            self.state, self.clock, prefix, after_revision, timeout=timeout, poll=poll, batch=batch
        )

    def txn(
        self,
        compare: dict[str, int],
        success: list[tuple[Any, ...]],
        failure: list[tuple[Any, ...]] | None = None,
        *,
        author: str = "system",
    ) -> TxnResult:
        """A multi-key transaction (etcd's Txn): if every ``compare`` holds (``{key:
        version}``, 0 for "absent"), apply ``success``, else ``failure``, all at once.

        Operations are ``("put", key, value)``, ``("put", key, value, ttl)`` or ``("delete",
        key)``; each key at most once per branch. Values are checked against their schemas
        first; merge keys are refused (send them contributions).

        Returns:
            ``TxnResult``: whether it succeeded, the changes made, and for a failed compare a
            ``ConflictError`` naming the key.
        """
        if not isinstance(compare, dict):
            raise ConfigError(f"txn compare is a dict {{key: version}}, got {compare!r}")
        cmp = {}
        for key, version in compare.items():
            key = check_key(key)
            cmp[key] = check_expect(key, version)
            if cmp[key] is None:
                raise ConfigError(f"txn compare for key {key!r} needs a version (0: absent)")
        trust = self._trust_of(author)
        branches = [self._txn_ops(success), self._txn_ops(failure or [])]
        out = self.state.txn(
            [(k, int(v)) for k, v in cmp.items() if v is not None],
            branches[0],
            branches[1],
            author=author,
            trust=trust,
            now=self.clock.now(),
        )
        result = txn_result(out, {k: int(v) for k, v in cmp.items() if v is not None})
        with self._lock:
            self.writes += len(result.changes)
            self.conflicts += 0 if result.succeeded else 1
        return result

    def _txn_ops(self, ops: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        out: list[tuple[Any, ...]] = []
        for op in ops:
            if not isinstance(op, tuple) or len(op) < 2 or op[0] not in ("put", "delete"):
                raise ConfigError(
                    f"a txn operation is ('put', key, value[, ttl]) or ('delete', key), got {op!r}"
                )
            key = check_key(op[1])
            rule = find_rule(self._merges, key)
            if rule is not None:
                raise ConfigError(
                    f"key {key!r} is a merge key ({rule.op!r}); a transaction writes plain keys"
                )
            if op[0] == "delete":
                out.append(("delete", key))
                continue
            if len(op) not in (3, 4):
                raise ConfigError(f"a txn put is ('put', key, value[, ttl]), got {op!r}")
            value = op[2]
            plain = value.value if isinstance(value, Labeled) else value
            for pattern, check in self._schemas:
                if fnmatch.fnmatchcase(key, pattern):
                    check(key, plain)
            out.append(
                ("put", key, dumps(value, where=f"key {key!r}"), op[3] if len(op) == 4 else None)
            )
        return out

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
    def lost_updates(self) -> int:
        """Versions of this namespace's keys that no current value descends from (counted by
        the store with each write, so every process reads the same total)."""
        return self.state.lost_updates()

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
        seen: Entry | tuple[int, int] | int | None = None,
        fence: Lease | None = None,
        ttl: float | None = None,
    ) -> Entry:
        """Write ``value`` to ``key`` (one conditional statement in the backend).

        Args:
            key: the key.
            value: any value the codec can store.
            author: ``system`` (the runtime) or a registered agent, whose trust is used.
            expect: None for last-writer-wins; 0 to create only; n to write only over version n.
            seen: the Entry the writer based its value on (lets last-writer-wins count what
                it overwrote unseen); sessions pass it for you. A bare version number counts
                as a version that had lost nothing before it.
            fence: a ``Lease``; the write succeeds only while that lease is still held.
            ttl: seconds (store clock) after which the key expires: reads no longer return
                it and an ``expire`` change is logged. None: never (and clears a TTL).

        Raises:
            ConflictError: ``expect`` (or the fence) did not match; nothing was written.
            SchemaViolationError: the value fails its key's schema; nothing was written.
            ConfigError: a bad key, a bad ``expect``, or an unregistered author.
        """
        key = check_key(key)
        if expect is not None:
            expect = check_expect(key, expect)
        basis = basis_of(key, seen) if seen is not None else None
        rule = find_rule(self._merges, key) if self._merges else None
        if rule is not None:
            raise ConfigError(
                f"key {key!r} is a merge key ({rule.op!r}, declared for {rule.pattern!r}): "
                "send contributions with merge(key, value), which never conflicts"
            )
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
        if self._schemas:
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
                seen=basis,
                ttl=ttl,
            )
        except ConflictError:
            with self._lock:
                self.conflicts += 1
            raise
        with self._lock:
            self.writes += 1
            # The store counted it; this process keeps the story of its own writes.
            if expect is None and basis is not None and basis[0] < rec.version - 1:
                dropped = rec.version - 1 - basis[0]
                self.lost.append(LostUpdate(key, rec.version - 1, author, basis[0], dropped))
        return entry_of(rec)

    def merge(
        self, key: str, value: Any, *, author: str = "system", id: str | None = None
    ) -> MergeOutcome:
        """Contribute ``value`` to the merge key ``key``; the store combines it atomically.

        Never raises ``ConflictError``: contributions from any number of writers are all
        applied, each once (a contribution whose ``id`` was already merged changes nothing,
        so a retry is safe). Returns a ``MergeOutcome``: whether it was applied, and the
        key's version, revision and trust now; ``read(key)`` gives the merged value (a merge
        does not read a list back, so appending stays as cheap as a short write).

        Raises:
            ConfigError: no merge is declared for the key, the contribution does not fit its
                merge, the key holds a plain value, or the backend cannot run the reducer.
            ValueTooLargeError: the merged value would exceed the store's limit.
        """
        return self._merge(key, value, author, id, tainted=False)

    def _merge(
        self, key: str, value: Any, author: str, id: str | None, *, tainted: bool
    ) -> MergeOutcome:
        key = check_key(key)
        rule = find_rule(self._merges, key)
        if rule is None:
            raise ConfigError(
                f"no merge is declared for key {key!r}: call store.declare_merge(pattern, "
                "'append' | 'set_add' | 'add' | 'max' | 'min' | 'merge') first, or write it"
            )
        if id is not None:
            if not isinstance(id, str) or not id:
                raise ConfigError(f"a merge id must be a non-empty string or None, got {id!r}")
            check_text("merge id", id)
        trust = "untrusted" if tainted else self._trust_of(author)
        out = self.state.merge(
            key,
            rule.op,
            dumps(value, where=f"key {key!r}"),
            author=author,
            trust=trust,
            now=self.clock.now(),
            merge_id=id,
            reducer=rule.reducer,
        )
        with self._lock:
            if out.applied:
                self.writes += 1
            else:
                self.duplicates += 1
        return out

    def update(
        self,
        key: str,
        fn: Callable[[Any], Any],
        *,
        author: str = "system",
        policy: RetryPolicy | None = None,
    ) -> Entry:
        """Read-modify-write without a hand-written retry loop: ``fn(current value or None)``
        is written with ``expect=version``; on ``ConflictError`` the key is re-read and
        ``fn`` runs again, under ``policy`` (default: 10 attempts, waits from 5 ms to 200 ms).
        ``fn`` must be safe to run more than once (each run is a fresh attempt).

        Raises:
            ConflictError: the attempts ran out; the last conflict, unchanged.
        """

        def write(k: str, v: Any, version: int) -> Entry:
            return self.write(k, v, author=author, expect=version)

        return update(key, fn, read=self.read, write=write, policy=policy, clock=self.clock)

    def _trust_of(self, author: str) -> str:
        if author == "system":
            return "system"
        spec = self.agents.get(author)
        if spec is None:
            raise ConfigError(
                f"author {author!r} is not a registered agent, so its trust is unknown; "
                f"call store.register_agent({author!r}, ...) or write as 'system'"
            )
        return spec.trust

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
        rec = self.state.read(key, now)
        # SQLite (no server clock): a live holder's expired lease is also judged by
        # observation, so a process whose clock runs ahead does not take it (storage.state)
        watch: LeaseWatch | None = getattr(self.state, "leases", None)
        if rec is not None:
            cur = loads(rec.value)
            if not cur["released"] and cur["holder"] != holder:
                if cur["expires_at"] > now:
                    return None
                if watch is not None and not watch.may_take(
                    key, rec, cur.get("process"), float(cur["expires_at"])
                ):
                    return None
        author = holder if holder in self.agents else "system"
        value = {"holder": holder, "expires_at": now + ttl, "released": False}
        if watch is not None:
            watch.hold()
            value["process"] = watch.token
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
        where = getattr(self.storage, "url", None)
        shown = _storage.redact(where) if isinstance(where, str) else self.state
        return f"Store({shown!r}, namespace={self.namespace!r})"
