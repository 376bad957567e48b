"""current_run() names the run, step, position and attempt inside steps, workflows and
compensations, and outside a run says so clearly."""

from __future__ import annotations

import asyncio

import pytest

from surefoot.durable import App, RunContext, current_run
from surefoot.errors import ConfigError, RunFailedError


def test_current_run_inside_steps_workflow_and_compensation(app: App) -> None:
    """Steps, compensations and workflow code see their run id, step name and position."""
    seen: list[RunContext] = []

    def undo(*, key: str | None = None) -> None:
        seen.append(current_run())

    @app.step
    async def pure() -> str:
        seen.append(current_run())
        return "p"

    @app.step(effect=True, compensate=undo)
    def act(*, key: str | None = None) -> str:
        seen.append(current_run())
        return "a"

    @app.step
    def boom() -> None:
        raise ValueError("no")

    @app.workflow
    async def flow() -> None:
        seen.append(current_run())
        await pure()
        await asyncio.gather(pure(), pure())
        act()
        boom()

    with pytest.raises(RunFailedError):
        app.start(flow, run_id="cr").result(timeout=10)
    where = [(c.run_id, c.step, c.pos, c.attempt) for c in seen]
    assert where == [
        ("cr", None, None, 0),
        ("cr", "pure", "1", 1),
        ("cr", "pure", "2", 1),
        ("cr", "pure", "3", 1),
        ("cr", "act", "4", 1),
        ("cr", "undo", "4.undo", 1),
    ]
    assert seen[4].key == "cr:4" and seen[0].key is None
    assert seen[0].workflow == "flow"


def test_current_run_outside_a_run_is_a_clear_error(app: App) -> None:
    """A step called as a plain function has no run: current_run() says so."""

    @app.step
    def plain() -> str:
        return current_run().run_id

    with pytest.raises(ConfigError, match="only inside a workflow run"):
        plain()
