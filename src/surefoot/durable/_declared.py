"""What an app declared by name (its queues, its schedules), and which of those it has
recorded in its journal: once each per app."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Generic, Protocol, TypeVar

from ..errors import ConfigError

__all__ = ["Declared"]


class _Named(Protocol):
    @property
    def name(self) -> str: ...


T = TypeVar("T", bound=_Named)


class Declared(Generic[T]):
    """Declarations of one ``kind`` (``queue``, ``schedule``) by name, in declaration order.

    Attributes:
        recorded: the names already recorded in the journal by this app.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}
        self.recorded: set[str] = set()

    def add(self, item: T) -> None:
        """Declare ``item``.

        Raises:
            ConfigError: its name is declared here already.
        """
        if item.name in self._items:
            raise ConfigError(f"{self.kind} {item.name!r} is declared twice in this app")
        self._items[item.name] = item

    def get(self, name: str) -> T | None:
        """The declaration named ``name``, or None."""
        return self._items.get(name)

    def names(self) -> list[str]:
        """The declared names, sorted."""
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[T]:
        return iter(self._items.values())

    def __bool__(self) -> bool:
        return bool(self._items)
