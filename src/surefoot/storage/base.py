"""The small protocols the subsystems need from storage. Every method is atomic.

A backend implements the protocols it can make atomic; ``Storage`` hands them out:

    st = storage.open("sqlite:///runs.db")
    keys = st.keystore()          # KeyStore    (resilience: idempotency records)
    state = st.statestore("team") # StateStore  (statebus: versioned keys)
    log = st.stream("findings")   # Stream      (statebus: append-only log, consumers)
    journal = st.journal()        # Journal     (durable: runs, steps, leases, timers)

Each protocol section below is owned by the subsystem that uses it; add a method only when a
subsystem needs it and every backend offering the protocol can make it atomic.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = ["Storage"]


@runtime_checkable
class Storage(Protocol):
    """An opened storage URL. Hands out the protocol objects; ``close`` releases connections."""

    url: str

    def keystore(self) -> Any: ...
    def statestore(self, namespace: str = "default") -> Any: ...
    def stream(self, name: str) -> Any: ...
    def journal(self) -> Any: ...
    def close(self) -> None: ...


# --- KeyStore (idempotency records) -- owned by surefoot.resilience -----------------------

# --- StateStore (versioned keys) -- owned by surefoot.statebus ------------------------------

# --- Stream (append-only log with ids and consumer positions) -- owned by surefoot.statebus --

# --- Journal (runs, steps, leases, timers, audit) -- owned by surefoot.durable ---------------
