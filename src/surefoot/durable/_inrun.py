"""Small helpers of the steps a run awaits (children, patches): the running scope, the loop."""

from __future__ import annotations

import asyncio

from ..errors import ConfigError
from ._context import RunState, Scope, Suspend, current

__all__ = ["in_loop", "run_scope", "suspend"]


def run_scope(what: str) -> Scope:
    """The scope of the running run.

    Raises:
        ConfigError: not inside a workflow run.
    """
    scope = current.get()
    if scope is None:
        raise ConfigError(f"app.{what}() works only inside a workflow run (it is journalled)")
    return scope


def in_loop() -> bool:
    """Whether an event loop runs in this thread (an async workflow)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def suspend(run: RunState, s: Suspend) -> Suspend:
    """Note ``s`` on the run (waits under one ``gather`` each journal their deadline)."""
    run.suspends.append(s)
    return s
