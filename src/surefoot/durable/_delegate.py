"""A facade's method that is one of its parts' methods, under the same name.

::

    class App:
        show = PartMethod("_ops", Operations.show)   # app.show(...) is app._ops.show(...)

``app.show`` is the part's bound method itself: its signature, its docstring
(``help(app.show)``) and its type (through ``ParamSpec``) are the part's, written once, and
a call costs what a call of the part's method costs; ``App.show`` is the part's function (so
``help(App)`` lists it). Only the named part is reached; there is no catch-all passthrough.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

__all__ = ["PartMethod"]

P = ParamSpec("P")
R = TypeVar("R")


class PartMethod(Generic[P, R]):
    """The method ``method`` of the part held in the facade's attribute ``part``."""

    def __init__(self, part: str, method: Callable[Concatenate[Any, P], R]) -> None:
        self.part = part
        self.name = method.__name__
        self.method = method

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> Callable[Concatenate[Any, P], R]: ...
    @overload
    def __get__(self, obj: object, owner: type[Any] | None = None) -> Callable[P, R]: ...

    def __get__(self, obj: object, owner: type[Any] | None = None) -> Any:
        if obj is None:
            return self.method
        return getattr(getattr(obj, self.part), self.name)
