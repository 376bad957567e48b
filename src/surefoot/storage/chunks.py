"""``Chunks``: large step results stored as content-addressed pieces, owned by
``surefoot.durable`` (``App(value_chunks=…)``, see ``surefoot.durable._chunks``).

A step result over the app's threshold is stored as a small tree of nodes; the step row
holds a reference (``sfk:…``) to the root. The nodes of a step's value are committed with
the step (``Journal.commit(records, chunks)``), fenced by the run's epoch like the step,
and scoped to the run: pruning a run deletes exactly its nodes, a fork copies them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, runtime_checkable

__all__ = ["ChunkWrite", "Chunks"]

ChunkWrite = tuple[str, int, str, str]
"""One node to store: ``(run_id, epoch, id, data)``; written only under that epoch."""


@runtime_checkable
class Chunks(Protocol):
    """The stored nodes of chunked values.

    Attributes:
        max_value_bytes: the largest value the journal accepts (0: no limit); a chunked
            value is checked against it whole, as an unchunked one is.
    """

    max_value_bytes: int

    def get(self, run_id: str, ids: Iterable[str]) -> dict[str, str]:
        """The stored data of run ``run_id``'s nodes ``ids`` (missing ones are left out)."""
        ...

    def usage(self, run_id: str | None = None) -> tuple[int, int]:
        """``(nodes, characters of data)`` stored, for one run or the whole journal."""
        ...
