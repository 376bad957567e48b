"""``AgentSession``: one agent's handle on a ``Store`` — reads in its read scope, writes in
its write scope, labelled with its registered identity and with the taint of what it read.

The session states what it needs of its store as a protocol (``SessionHost``), so this module
does not import the store: ``Store`` creates sessions, and satisfies the protocol.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ..clock import Clock
from ..errors import ConfigError, ConflictError, ScopeError
from ..guard import Endorser, Label, Labeled, label_of
from ..resilience import RetryPolicy
from ..storage.state import MergeOutcome, StateStore
from ._entry import AgentSpec, Endorsement, Entry, Lease, seen_of
from ._history import Change, TxnResult, Watch
from ._merge import update

__all__ = ["AgentSession", "SessionHost", "write_labeled"]


class SessionHost(Protocol):
    """What a session uses of its store (``Store`` is one): reads, writes as the agent, and
    the two hooks only sessions call: a contribution marked untrusted when the session is
    tainted, and the audit record of an endorsed write."""

    @property
    def state(self) -> StateStore: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def agents(self) -> Mapping[str, AgentSpec]: ...

    def read(self, key: str) -> Entry | None: ...
    def snapshot(self) -> dict[str, Entry]: ...
    def history(self, key: str) -> list[Change]: ...
    def write(
        self,
        key: str,
        value: Any,
        *,
        author: str = ...,
        expect: int | None = ...,
        seen: Entry | tuple[int, int] | int | None = ...,
        fence: Lease | None = ...,
    ) -> Entry: ...
    def delete(self, key: str, *, author: str = ..., expect: int | None = ...) -> Change | None: ...
    def txn(
        self,
        compare: dict[str, int],
        success: list[tuple[Any, ...]],
        failure: list[tuple[Any, ...]] | None = ...,
        *,
        author: str = ...,
    ) -> TxnResult: ...
    def acquire(self, name: str, holder: str, ttl: float) -> Lease | None: ...
    def _merge(
        self, key: str, value: Any, author: str, id: str | None, *, tainted: bool
    ) -> MergeOutcome: ...
    def _record_endorsement(self, e: Endorsement) -> None: ...


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

    def __init__(self, store: SessionHost, spec: AgentSpec) -> None:
        self.store = store
        self.name = spec.name
        self._spec = spec
        self.seen: dict[str, tuple[int, int]] = {}
        self.context: Label = Label()

    @property
    def spec(self) -> AgentSpec:
        """The agent's registration as it stands now: a re-registration in any process
        (trust or scopes changed) reaches this session within ``store.agents.max_age``
        seconds; every read and write is checked against it."""
        spec = self.store.agents.get(self.name)
        if spec is None:  # a bare StateStore's registry, or the registration vanished
            return self._spec
        self._spec = spec
        return spec

    @property
    def trust(self) -> str:
        """The agent's registered trust, as it stands now (see ``spec``)."""
        return self.spec.trust

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
        try:
            e = self.store.write(
                key, stored, author=self.name, expect=expect, seen=self.seen.get(key)
            )
        except ConflictError as exc:
            self._saw_conflict(exc)
            raise
        return self._finish(e, record)

    def delete(self, key: str, *, expect: int | None = None) -> Change | None:
        """Delete as this agent (see ``Store.delete``): the tombstone carries its name.

        Raises:
            ScopeError: the key is outside this agent's write scope.
            ConflictError: ``expect`` did not match; nothing was deleted.
        """
        if not self.spec.may("write", key):
            raise ScopeError(self.name, key, "write", list(self.spec.write))
        try:
            return self.store.delete(key, author=self.name, expect=expect)
        except ConflictError as exc:
            self._saw_conflict(exc)
            raise

    def history(self, key: str) -> list[Change]:
        """The key's kept versions (see ``Store.history``); reading them taints the session
        like reading the value does.

        Raises:
            ScopeError: the key is outside this agent's read scope.
        """
        if not self.spec.may("read", key):
            raise ScopeError(self.name, key, "read", list(self.spec.read))
        changes = self.store.history(key)
        self.context = self.context.join(*(_change_label(c) for c in changes))
        return changes

    def watch(
        self,
        prefix: str = "",
        *,
        after_revision: int = 0,
        timeout: float | None = None,
        poll: float = 0.5,
        batch: int = 100,
    ) -> Watch:
        """``Store.watch`` as this agent: only changes of keys in its read scope.

        Changes of keys under ``prefix`` that the read scope does not cover are skipped
        (their values are never decoded); each change delivered joins its label into
        ``context`` as reading it would, so watching an untrusted agent's writes taints the
        session (a delete or an expiry too: its author chose when it happened). Resume with
        ``after_revision=watch.revision``: nothing in scope is missed or repeated.

        Raises:
            ScopeError: no key under ``prefix`` is in this agent's read scope.
            ConfigError: a bad prefix, revision, ``poll`` or ``batch``.
        """
        if not isinstance(prefix, str):
            raise ConfigError(f"watch prefix must be a string, got {prefix!r}")
        if not any(_glob_reaches(p, prefix) for p in self.spec.read):
            exc = ScopeError(self.name, prefix, "read", list(self.spec.read))
            exc.args = (
                f"agent {self.name!r} may not watch prefix {prefix!r}: no key under it is in "
                f"its read scope {list(self.spec.read)}. Watch a prefix the scope covers, or "
                f"widen it with Store.register_agent({self.name!r}, read=[...]) if that is "
                "intended.",
            )
            raise exc

        def delivered(c: Change) -> None:
            self.context = self.context.join(_change_label(c))

        return Watch(
            self.store.state,
            self.store.clock,
            prefix,
            after_revision,
            timeout=timeout,
            poll=poll,
            batch=batch,
            scope=lambda key: self.spec.may("read", key),
            delivered=delivered,
        )

    def txn(
        self,
        compare: dict[str, int],
        success: list[tuple[Any, ...]],
        failure: list[tuple[Any, ...]] | None = None,
    ) -> TxnResult:
        """``Store.txn`` as this agent: its scopes checked, its puts labelled like ``write``.

        Every ``compare`` key must be in the read scope (a compare reads its version, and a
        failed one reports the current value); every key a branch puts or deletes must be in
        the write scope, whichever branch runs. Puts carry this session's label, so a
        tainted session's values are stored tainted; the changes carry its name and
        registered trust. The session remembers the versions it wrote (as ``write`` does),
        and a failed compare's reported value joins its label into ``context``. To lift a
        taint, write with ``endorsed_by`` instead.

        Raises:
            ScopeError: naming the first key outside its scope; nothing was written.
            ConfigError, SchemaViolationError: as ``Store.txn``; nothing was written.
        """
        if not isinstance(compare, dict):
            raise ConfigError(f"txn compare is a dict {{key: version}}, got {compare!r}")
        for key in compare:
            if isinstance(key, str) and not self.spec.may("read", key):
                raise ScopeError(self.name, key, "read", list(self.spec.read))
        branches = [self._txn_ops(success), self._txn_ops(failure or [])]
        result = self.store.txn(compare, branches[0], branches[1], author=self.name)
        for c in result.changes:
            before = self.seen.get(c.key)
            # its lineage is known when this session had seen the version it replaced;
            # otherwise it counts as a version that lost nothing before it
            lineage = before[1] + 1 if before and before[0] == c.version - 1 else c.version
            self.seen[c.key] = (c.version, lineage)
        if result.conflict is not None:
            self._saw_conflict(result.conflict)
        return result

    def _txn_ops(self, ops: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """The operations with write scope checked and puts labelled; malformed ones pass
        through unchanged for ``Store.txn`` to refuse."""
        if not isinstance(ops, list):
            return ops
        out: list[tuple[Any, ...]] = []
        for op in ops:
            if not (isinstance(op, tuple) and len(op) >= 2 and isinstance(op[1], str)):
                out.append(op)
                continue
            if not self.spec.may("write", op[1]):
                raise ScopeError(self.name, op[1], "write", list(self.spec.write))
            if op[0] == "put" and len(op) in (3, 4):
                stored, _ = self._prepare(op[1], op[2], None, None)
                out.append((op[0], op[1], stored, *op[3:]))
            else:
                out.append(op)
        return out

    def _saw_conflict(self, exc: ConflictError) -> None:
        """A refused change showed this session the key's current value: join its label
        (an author registered in another process counts as untrusted)."""
        spec = self.store.agents.get(exc.author)
        trust = "system" if exc.author == "system" else spec.trust if spec else "untrusted"
        label = Label.of(exc.author, trust)
        if isinstance(exc.value, Labeled):
            label = label.join(exc.value.label)
        self.context = self.context.join(label)

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
            try:
                e = self.store.write(k, stored, author=self.name, expect=version)
            except ConflictError as exc:
                self._saw_conflict(exc)
                raise
            return self._finish(e, record)

        return update(key, fn, read=self.read, write=write, policy=policy, clock=self.store.clock)

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
        try:
            e = self.store.write(
                key, stored, author=self.name, expect=expect, seen=self.seen.get(key), fence=lease
            )
        except ConflictError as exc:
            self._saw_conflict(exc)
            raise
        return self._finish(e, record)

    def __repr__(self) -> str:
        return f"AgentSession({self.name!r}, trust={self.trust!r})"


class _Writer(Protocol):
    def write(self, key: str, value: Any, *, expect: int | None = None) -> Any: ...


def write_labeled(session: _Writer, key: str, value: Labeled[Any], **kwargs: Any) -> Any:
    """Write a derived value together with its label, so readers inherit the taint.

    A session's plain ``write`` already carries the taint of everything the session read;
    use this when a value derives from data read elsewhere (another session, a tool). A
    stored label can only add taint to what the author's identity gives.
    """
    return session.write(key, value, **kwargs)


def _change_label(c: Change) -> Label:
    """The label of a logged change, as ``label_of`` gives an entry's."""
    return Label.of(c.author, c.trust).join(c.label or Label())


def _glob_reaches(pattern: str, prefix: str) -> bool:
    """Whether some key starting with ``prefix`` matches the glob ``pattern`` (as
    ``fnmatch.fnmatchcase`` reads it): the pattern is walked over the prefix as an
    automaton, and any state left over can still be completed."""
    tokens = _glob_tokens(pattern)
    states = _closure(tokens, {0})
    for ch in prefix:
        step = set()
        for i in states:
            if i == len(tokens):
                continue
            tok = tokens[i]
            if tok is None:  # '*' takes the character and stays
                step.add(i)
            elif tok.fullmatch(ch):
                step.add(i + 1)
        states = _closure(tokens, step)
        if not states:
            return False
    return True


def _closure(tokens: list[re.Pattern[str] | None], states: set[int]) -> set[int]:
    """``states`` with every '*' also skipped (it matches the empty string)."""
    out, todo = set(states), list(states)
    while todo:
        i = todo.pop()
        if i < len(tokens) and tokens[i] is None and i + 1 not in out:
            out.add(i + 1)
            todo.append(i + 1)
    return out


def _glob_tokens(pattern: str) -> list[re.Pattern[str] | None]:
    """The glob as one single-character pattern per position (None for '*'), split as
    ``fnmatch`` splits it."""
    out: list[re.Pattern[str] | None] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        i += 1
        if c == "*":
            out.append(None)
        elif c == "?":
            out.append(re.compile(".", re.DOTALL))
        elif c == "[" and (j := _class_end(pattern, i)) > 0:
            out.append(re.compile(fnmatch.translate(pattern[i - 1 : j + 1])))
            i = j + 1
        else:  # a literal, or a '[' with no closing bracket
            out.append(re.compile(re.escape(c)))
    return out


def _class_end(pattern: str, i: int) -> int:
    """Where the character class opened just before ``i`` closes (-1: it does not)."""
    n = len(pattern)
    j = i + 1 if i < n and pattern[i] == "!" else i
    j = j + 1 if j < n and pattern[j] == "]" else j
    return pattern.find("]", j)


def _carry(own: Label, context: Label) -> Label:
    """``own`` joined with the session's ``context``: a session adds what it read, always.

    Only ``write(..., endorsed_by=...)`` lifts the session's taint, so every lift is audited;
    an envelope endorsed elsewhere is re-tainted by what this session read.
    """
    return own.join(context)
