"""Agent registrations, kept in the storage: every process sharing a store sees them.

``store.register_agent("critic", ...)`` writes the key ``critic`` (trust, read and write
scopes, and who registered it) as ``system`` in a state namespace of its own beside the
store's (``agents_namespace(namespace)``), so registering touches none of the namespace's
keys, versions or revisions. A ``Store`` in another process on the same URL and namespace
finds the agent on first use. Each registration is a new version of that key:
``store.agents.history("critic")`` is its audit (when, and ``registered_by``: the ``by=``
given, or ``user@host:pid``). A ``Store`` made from a bare ``StateStore`` has no storage
to keep them in: its registrations live in its process.
"""

from __future__ import annotations

import getpass
import os
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

from ..clock import Clock
from ..codec import dumps, loads
from ..storage.state import StateStore
from ._entry import AgentSpec
from ._history import Change, change

__all__ = ["AgentRegistry", "agents_namespace", "registrant"]


def agents_namespace(namespace: str) -> str:
    """The state namespace holding the agent registrations of ``namespace``."""
    return f"_agents:{namespace}"


def registrant() -> str:
    """Who registers, when ``by=`` is not given: ``user@host:pid`` of this process."""
    try:
        user = getpass.getuser()
    except Exception:  # no user name in this environment (a bare container)
        user = "unknown"
    return f"{user}@{socket.gethostname()}:{os.getpid()}"


class AgentRegistry(Mapping[str, AgentSpec]):
    """The agents registered in a store's namespace, by name (a read-through cache).

    ``get(name)`` answers from this process's cache while its copy is at most ``max_age``
    seconds old, else reads the storage again; ``fresh(name)`` always reads it. Sessions
    check every operation against ``get``, so a registration changed in another process
    (trust narrowed, a scope revoked) reaches this process's live sessions within
    ``max_age`` seconds, at the cost of one storage read per agent per ``max_age``.

    Args:
        state: where registrations are kept (None: in this process only).
        clock: the store's clock (``registered_at`` of each version).
        max_age: seconds a cached registration is trusted (0: read the storage every time).
    """

    def __init__(self, state: StateStore | None, clock: Clock, max_age: float = 1.0) -> None:
        if not isinstance(max_age, (int, float)) or isinstance(max_age, bool) or max_age < 0:
            raise ValueError(
                f"max_age is the seconds a cached registration is trusted, a number >= 0; "
                f"got {max_age!r}"
            )
        self._state = state
        self._clock = clock
        self.max_age = float(max_age)
        self._cache: dict[str, tuple[AgentSpec, float]] = {}
        self._lock = threading.Lock()

    def put(self, spec: AgentSpec, *, by: str) -> None:
        """Record ``spec`` (a new version of its registration), and who registered it."""
        if self._state is not None:
            value = {"trust": spec.trust, "read": list(spec.read), "write": list(spec.write)}
            text = dumps({**value, "registered_by": by}, where=f"agent {spec.name!r}")
            now = self._clock.now()
            self._state.write(
                spec.name, text, author="system", trust="system", expect=None, now=now
            )
        with self._lock:
            self._cache[spec.name] = (spec, time.monotonic())

    def fresh(self, name: str) -> AgentSpec | None:
        """The registration as the storage holds it now (None: nobody registered ``name``)."""
        if self._state is None:
            with self._lock:
                got = self._cache.get(name)
            return None if got is None else got[0]
        read_at = time.monotonic()
        rec = self._state.read(name, self._clock.now())
        if rec is None:
            with self._lock:
                self._cache.pop(name, None)
            return None
        data: dict[str, Any] = loads(rec.value)
        spec = AgentSpec(name, data["trust"], tuple(data["read"]), tuple(data["write"]))
        with self._lock:
            self._cache[name] = (spec, read_at)
        return spec

    def get(self, name: str, default: AgentSpec | None = None) -> AgentSpec | None:  # type: ignore[override]
        """The registration of ``name`` (this process's copy while at most ``max_age``
        seconds old, else read again), else ``default``."""
        with self._lock:
            got = self._cache.get(name)
        if got is not None and (self._state is None or time.monotonic() - got[1] <= self.max_age):
            spec: AgentSpec | None = got[0]
        elif self._state is not None:
            spec = self.fresh(name)
        else:
            spec = None
        return default if spec is None else spec

    def history(self, name: str) -> list[Change]:
        """Every kept registration of ``name``, oldest first: its value (trust, scopes,
        ``registered_by``) and when it was written."""
        return [] if self._state is None else [change(c) for c in self._state.history(name)]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def __getitem__(self, name: str) -> AgentSpec:
        spec = self.get(name)
        if spec is None:
            raise KeyError(name)
        return spec

    def __iter__(self) -> Iterator[str]:
        """Every agent registered in this namespace, from any process, sorted."""
        if self._state is None:
            with self._lock:
                return iter(sorted(self._cache))
        return iter(sorted(self._state.snapshot(self._clock.now())))

    def __len__(self) -> int:
        return len(list(iter(self)))
