"""App is a facade over parts: no mixin bases, and each delegated method is its part's own
(its signature, its docstring), reached by name, never by a catch-all."""

from __future__ import annotations

import inspect

from surefoot.durable import App
from surefoot.durable._manage import Operations
from surefoot.durable._workload import Workload


def test_app_has_no_mixin_bases() -> None:
    """App inherits from nothing but object: its parts are attributes."""
    assert App.__bases__ == (object,)


def test_a_delegated_method_is_the_parts_own(app: App) -> None:
    """app.cancel and app.queue are the bound methods of the app's parts, so help() and
    inspect show the part's signature and docstring; App.cancel is the part's function."""
    assert app.cancel.__func__ is Operations.cancel  # type: ignore[attr-defined]
    assert app.queue.__func__ is Workload.queue  # type: ignore[attr-defined]
    assert App.cancel is Operations.cancel and App.cancel.__doc__
    params = inspect.signature(app.list_runs).parameters
    assert {"status", "workflow", "order", "offset", "limit"} <= set(params)
    assert "status" in inspect.signature(App.list_runs).parameters
