"""``Children``: runs started by another run, owned by ``surefoot.durable``.

A child is created by a ``ChildWrite`` in ``Journal.commit`` (with the parent's step that
names it, in one transaction); when it ends, the same transaction signals its parent
(``child:<id>``) and wakes it. This protocol reads a run's children and cancels a tree.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from .runs import RunRow

__all__ = ["Children"]


@runtime_checkable
class Children(Protocol):
    """A run's children. Every method is atomic."""

    def of(self, run_id: str) -> list[RunRow]:
        """The runs started by ``run_id`` as children, oldest first."""
        ...

    def cancel_tree(self, run_id: str, *, now: float, actor: str, detail: str) -> list[str]:
        """Cancel ``run_id`` and its unfinished descendants in one transaction.

        Each cancelled run's epoch goes up (a worker running it is fenced off, and a child
        it is creating now is not created) and gets an audit entry ``cancel``
        (descendants: with ``{"parent_cancelled": <root>}``). If the root is itself a child,
        its parent is signalled as when a child ends. Returns the ids cancelled (empty
        when the root had already ended).

        Raises:
            UnknownRunError: no such run.
        """
        ...
