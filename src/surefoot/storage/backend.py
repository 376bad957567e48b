"""``Storage``: an opened storage URL, handing out the protocol objects it offers."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from .journal import Journal
from .keys import KeyStore
from .state import StateStore
from .streams import StreamLog

__all__ = ["Storage"]


@runtime_checkable
class Storage(Protocol):
    """An opened storage URL. Hands out the protocol objects; ``close`` releases connections."""

    url: str

    def keystore(self) -> KeyStore: ...
    def statestore(self, namespace: str = "default") -> StateStore: ...
    def stream(self, name: str) -> StreamLog: ...
    def journal(self) -> Journal: ...
    def close(self) -> None: ...
