"""What the durable experiments share: the seed file, an agent on its own journal, polling."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from surefoot.clock import Clock, FakeClock
from surefoot.durable import POINTS, App

from .._registry import LabContext
from ..agent import STEPS, AgentServices, build_agent

__all__ = ["SEED_FILE", "STRATEGIES", "agent_on_journal", "crash_points", "tasks_on", "wait_until"]

SEED_FILE = "002_91829255f3db9460.txt"
STRATEGIES = ("restart", "journal", "journal_keys")


def agent_on_journal(
    ctx: LabContext,
    name: str,
    *,
    clock: Clock | None = None,
    versions: tuple[str, ...] = ("1",),
    **svc: Any,
) -> tuple[App, AgentServices, dict[str, Any]]:
    clock = clock if clock is not None else FakeClock()
    app = App(ctx.sqlite_url(f"{name}.db"), clock=clock, poll=0.01, worker_id=f"lab-{name}")
    services = AgentServices(str(ctx.workdir / f"{name}-ledger.db"), clock=clock, **svc)
    return app, services, build_agent(app, services, versions=versions)


def wait_until(cond: Callable[[], bool], timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


def crash_points() -> list[tuple[str, str]]:
    """Every (step, point) a crash can hit: pure steps before/after, the effect at all four."""
    out = []
    for step in STEPS:
        if step == "approve":
            continue  # a wait journals no result of its own to lose
        pts = POINTS if step == "publish" else ("before_step", "after_journal")
        out += [(step, p) for p in pts]
    return out


def tasks_on(app: App) -> int:
    """Coroutines alive on the app's event loop (besides the one counting)."""

    async def count() -> int:
        return len(asyncio.all_tasks()) - 1

    return asyncio.run_coroutine_threadsafe(count(), app.executor.loop()).result(10)
