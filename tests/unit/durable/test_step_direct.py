"""An async step's direct path (``_step.run_async``): a plain step whose first attempt
succeeds is journalled without the step flow's generator; anything else, and a failed
first attempt, goes through ``step_flow``, with the same rows and attempts as before."""

from __future__ import annotations

from typing import Any

import pytest

from surefoot import FakeClock
from surefoot.durable import App
from surefoot.durable import _step as step_module
from surefoot.errors import RunFailedError
from surefoot.resilience import Backoff, RetryPolicy


@pytest.fixture
def flows(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The positions ``step_flow`` was entered for."""
    entered: list[str] = []
    real = step_module.step_flow

    def counted(run: Any, sd: Any, pos: str, *rest: Any) -> Any:
        entered.append(pos)
        return real(run, sd, pos, *rest)

    monkeypatch.setattr(step_module, "step_flow", counted)
    return entered


def _app(strategy: str = "journal_keys") -> tuple[App, FakeClock]:
    clock = FakeClock()
    return App("sqlite://", clock=clock, strategy=strategy), clock


def test_plain_async_steps_are_journalled_without_the_flow(flows: list[str]) -> None:
    """Three plain async steps: three done rows of one attempt, and no flow entered."""
    app, _ = _app()

    @app.step
    async def add(x: int) -> int:
        return x + 1

    @app.workflow
    async def flow(n: int) -> int:
        total = 0
        for i in range(n):
            total += await add(i)
        return total

    assert app.start(flow, 3, run_id="r").result(timeout=10) == 6
    steps = app.show("r").steps
    assert [(s.pos, s.status, s.result, s.attempts) for s in steps] == [
        ("1", "done", 1, 1),
        ("2", "done", 2, 1),
        ("3", "done", 3, 1),
    ]
    assert flows == []
    app.close()


def test_a_failed_first_attempt_is_retried_by_the_flow(flows: list[str]) -> None:
    """The first attempt fails on the direct path: the flow takes over at that attempt,
    waits as the policy says and journals the step once, with both attempts."""
    app, clock = _app()
    tries: list[int] = []

    @app.step(retry=RetryPolicy(max_attempts=3, backoff=Backoff(2, 8, "none"), retry_on=ValueError))
    async def flaky() -> str:
        tries.append(1)
        if len(tries) == 1:
            raise ValueError("once")
        return "ok"

    @app.workflow
    async def flow() -> str:
        return await flaky()

    assert app.start(flow, run_id="r").result(timeout=10) == "ok"
    assert len(tries) == 2 and clock.sleeps[:1] == [2.0]
    (step,) = app.show("r").steps
    assert (step.status, step.attempts) == ("done", 2)
    assert flows == ["1"]
    app.close()


def test_the_retry_deadline_counts_from_the_first_attempt(flows: list[str]) -> None:
    """A first attempt that used up the policy's deadline is not retried: the flow that
    takes over measures from when that attempt began, not from when it took over."""
    app, clock = _app()
    tries: list[int] = []

    @app.step(
        retry=RetryPolicy(
            max_attempts=5, backoff=Backoff(1, 1, "none"), deadline=10, retry_on=ValueError
        )
    )
    async def slow() -> str:
        tries.append(1)
        clock.advance(30)
        raise ValueError("slow and failing")

    @app.workflow
    async def flow() -> str:
        return await slow()

    with pytest.raises(RunFailedError):
        app.start(flow, run_id="r").result(timeout=10)
    assert tries == [1]
    (step,) = app.show("r").steps
    assert (step.status, step.attempts) == ("error", 1)
    assert flows == ["1"]
    app.close()


def test_an_effect_with_journal_keys_takes_the_flow(flows: list[str]) -> None:
    """An effect under ``journal_keys`` writes its intent row first: the flow does that."""
    app, _ = _app()

    @app.step(effect=True)
    async def send(x: int) -> int:
        return x

    @app.workflow
    async def flow() -> int:
        return await send(7)

    assert app.start(flow, run_id="r").result(timeout=10) == 7
    assert flows == ["1"]
    app.close()


def test_a_run_that_restarts_journals_nothing_on_either_path(flows: list[str]) -> None:
    """Strategy ``restart`` journals no step rows: such a run takes the flow, which knows."""
    app, _ = _app("restart")

    @app.step
    async def add(x: int) -> int:
        return x + 1

    @app.workflow
    async def flow() -> int:
        return await add(1)

    assert app.start(flow, run_id="r").result(timeout=10) == 2
    assert app.show("r").steps == []
    assert flows == ["1"]
    app.close()
