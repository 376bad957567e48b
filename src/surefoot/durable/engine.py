"""Hooks for running ``@app.workflow`` / ``@app.step`` code on another engine.

An app whose URL names an engine (``temporal://host:port?…``) hands its runs to that
engine instead of a journal: :func:`open_engine` imports the engine's package lazily (it
lives in ``surefoot.engines``, behind an extra) and asks it for an :class:`Engine`, which
``App.start`` / ``enqueue`` / ``signal`` / ``handle`` / ``close`` delegate to.

Inside a run the engine executes the workflow function with :func:`enter` around it: the
scope it sets makes every step call, ``app.sleep`` and ``app.wait_for`` of that run go to
its :class:`RunEngine` (with the same positions the embedded engine gives them, in call
order), and nothing to a journal. Activities, or whatever runs a step's code there, set
:func:`step_context` so that ``current_run()`` works inside the step as it does here.
"""

from __future__ import annotations

import contextvars
import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast

from ..errors import ConfigError
from ._context import RunState, Scope, current
from ._current import in_step
from ._defs import CompDef, StepDef
from ._registry import Registry
from ._versions import Workflow, describe

if TYPE_CHECKING:
    from ._handle import RunHandle

__all__ = [
    "SCHEMES",
    "CompDef",
    "Engine",
    "EngineHost",
    "EngineScope",
    "RunEngine",
    "StepDef",
    "Workflow",
    "describe",
    "engine_scheme",
    "enter",
    "find_step",
    "leave",
    "open_engine",
    "step_context",
]

SCHEMES: dict[str, str] = {"temporal": "surefoot.engines.temporal"}
"""URL scheme -> the package whose ``open_engine(app)`` serves it."""


class RunEngine(Protocol):
    """What runs a run's steps and waits on the other engine (one object per run)."""

    def step(self, sd: StepDef, pos: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Run (or replay) step ``sd`` at position ``pos``; an awaitable of its value."""

    def sleep(self, pos: str, wake_at: float) -> Any:
        """A durable timer until ``wake_at`` (the app clock's seconds); an awaitable."""

    def wait(self, pos: str, name: str, timeout: float | None, default: Any, ann: Any) -> Any:
        """Wait for signal ``name`` (each delivered once) or ``timeout``; an awaitable of
        the payload read as ``ann`` (``typing.Any``: as decoded)."""

    def patched(self, patch_id: str) -> bool:
        """Whether this run takes the new branch of patch ``patch_id`` (see ``_patches``)."""

    def child(
        self,
        wf: Workflow,
        pos: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        run_id: str | None,
        timeout: float | None,
    ) -> Any:
        """Start child run ``wf(*args, **kwargs)`` (id ``run_id`` or ``<run id>:<pos>``)
        and await it, at most ``timeout`` seconds; an awaitable of its result."""


class Engine(Protocol):
    """What an app with an engine URL delegates its runs to."""

    def start(
        self,
        workflow: Workflow,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        run_id: str | None,
        here: bool,
        timeout: float | None = None,
    ) -> RunHandle:
        """Start a run (``here``: also execute runs in this process; ``timeout``: its
        deadline, seconds from its start); its handle."""

    def signal(self, run_id: str, name: str, payload: Any, signal_id: str | None) -> bool:
        """Deliver a signal; False if ``signal_id`` was delivered before."""

    def handle(self, run_id: str) -> RunHandle:
        """A handle on an existing run."""

    def close(self) -> None:
        """Stop what runs in this process; runs go on elsewhere."""


def engine_scheme(url: str) -> str | None:
    """The engine scheme of ``url`` (``temporal``), or None for a journal URL."""
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    return scheme if scheme in SCHEMES else None


class EngineHost(Protocol):
    """What :func:`open_engine` reads of an app: its URL. The engine's package is handed
    the app itself (it registers the app's workflows and steps with the engine)."""

    url: str


def open_engine(app: EngineHost) -> Engine:
    """The engine serving ``app.url`` (its package is imported now).

    Raises:
        ConfigError: ``app.url`` names no engine.
        MissingExtraError: the engine's extra is not installed.
    """
    scheme = engine_scheme(app.url)
    if scheme is None:
        raise ConfigError(f"{app.url!r} names no engine; engines: {', '.join(SCHEMES)}")
    module = importlib.import_module(SCHEMES[scheme])
    return cast(Engine, module.open_engine(app))


@dataclass(frozen=True, slots=True)
class _Run:
    """The little of a run that ``current_run()`` reads, for runs on another engine."""

    run_id: str
    workflow: str
    epoch: int = 1


class EngineScope(Scope):
    """The scope of a run executing on another engine: positions, and who runs steps."""

    __slots__ = ("engine",)

    def __init__(self, engine: RunEngine, run_id: str, workflow: str) -> None:
        super().__init__(cast(RunState, _Run(run_id, workflow)))
        self.engine = engine


def enter(engine: RunEngine, run_id: str, workflow: str) -> contextvars.Token[Scope | None]:
    """Make the calling context's steps and waits go to ``engine``; pass the token to
    :func:`leave`. Tasks created from this context (``asyncio.gather``) share its scope."""
    return current.set(EngineScope(engine, run_id, workflow))


def leave(token: contextvars.Token[Scope | None]) -> None:
    """Undo :func:`enter`. A run closed from another context (an engine evicting it from
    its cache closes the coroutine elsewhere) has nothing left to undo."""
    try:
        current.reset(token)
    except ValueError:
        pass


@contextmanager
def step_context(run_id: str, workflow: str, step: str, pos: str, attempt: int) -> Iterator[None]:
    """Inside it, ``current_run()`` names this run, step, position and attempt."""
    token = current.set(None)  # code inside a step is not part of the workflow's scope
    here = in_step.set((cast(RunState, _Run(run_id, workflow)), step, pos, attempt))
    try:
        yield
    finally:
        in_step.reset(here)
        current.reset(token)


def find_step(registry: Registry, name: str) -> StepDef | None:
    """The step registered under ``name`` in ``registry``, or None."""
    return registry.step(name)
