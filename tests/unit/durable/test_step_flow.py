"""The step flow on its own: the requests it yields, with no journal and no event loop."""

from __future__ import annotations

from typing import Any

import pytest

from surefoot import FakeClock
from surefoot.durable import App, RunContext, current_run
from surefoot.durable._context import RunState
from surefoot.durable._current import in_step
from surefoot.durable._decide import begin
from surefoot.durable._step import CALL, SLEEP, WRITE, step_flow
from surefoot.errors import LeaseLostError
from surefoot.storage.runs import StepRow


class NoJournal:
    """The flow never touches the journal; any use of it fails the test."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the flow used the journal ({name})")


def _run(strategy: str = "journal_keys") -> RunState:
    return RunState(
        run_id="r",
        epoch=3,
        workflow="w",
        strategy=strategy,
        journal=NoJournal(),  # type: ignore[arg-type]
        clock=FakeClock(),
        actor="me",
        recorded={},
    )


APP = App("sqlite://", clock=FakeClock())


@APP.step
def pure(x: int) -> int:
    return x + 1


@APP.step(effect=True)
def charge(x: int, *, key: str | None = None) -> int:
    return x


@APP.step(retry=2)
def flaky(x: int) -> int:
    return x


def _sd(fn: Any) -> Any:
    return fn.__surefoot_step__


def test_pure_step_asks_to_call_then_to_write_its_result() -> None:
    """A pure step yields CALL with its arguments, then WRITE of a done row, and returns."""
    run = _run()
    flow = step_flow(run, _sd(pure), "1", (41,), {}, 0)
    assert next(flow) == (CALL, (41,), {})
    op, rec, _ = flow.send(42)
    assert op is WRITE and (rec.pos, rec.name, rec.status, rec.result, rec.attempts) == (
        "1",
        "pure",
        "done",
        "42",
        1,
    )
    with pytest.raises(StopIteration) as done:
        flow.send(None)
    assert done.value.value == 42 and run.steps_run == 1


def test_effect_writes_its_intent_first_and_gets_its_key() -> None:
    """An effect yields WRITE intent, CALL with key run:pos, then WRITE done."""
    flow = step_flow(_run(), _sd(charge), "2", (5,), {}, 0)
    op, rec, _ = next(flow)
    assert op is WRITE and rec.status == "intent" and rec.epoch == 3
    assert flow.send(None) == (CALL, (5,), {"key": "r:2"})
    op, rec, _ = flow.send(5)
    assert op is WRITE and rec.status == "done"


def test_a_failed_attempt_is_retried_after_a_sleep() -> None:
    """An error thrown in at CALL yields SLEEP, then CALL again; the row counts 2 attempts."""
    flow = step_flow(_run(), _sd(flaky), "1", (7,), {}, 0)
    next(flow)
    assert flow.throw(ConnectionError("once")) == (SLEEP, 0.0, None)
    assert flow.send(None) == (CALL, (7,), {})
    op, rec, _ = flow.send(7)
    assert op is WRITE and rec.attempts == 2


def test_giving_up_writes_the_error_then_raises_it() -> None:
    """With no attempts left the flow yields WRITE of an error row, then raises the error."""
    flow = step_flow(_run(), _sd(pure), "1", (1,), {}, 0)
    next(flow)
    op, rec, _ = flow.throw(ValueError("bad"))
    assert op is WRITE and rec.status == "error" and "bad" in (rec.error or "")
    with pytest.raises(ValueError, match="bad"):
        flow.send(None)


def test_the_step_sees_its_context_only_while_called() -> None:
    """During CALL current_run() names the step; after, even on a failed write, it is gone."""
    flow = step_flow(_run(), _sd(pure), "4", (1,), {}, 0)
    next(flow)
    assert current_run() == RunContext("r", "w", 3, "pure", "4", 1)
    flow.throw(ValueError("bad"))  # now at the error row's WRITE, still inside the step
    with pytest.raises(LeaseLostError):
        flow.throw(LeaseLostError("r", 3))  # the write was refused
    assert in_step.get() is None


def test_begin_replays_a_journalled_row_without_a_flow() -> None:
    """begin() returns the journalled value of a done row, and the attempts of an intent."""
    run = _run()
    row = StepRow("r", "1", "pure", "pure", "done", "9", None, 1, 3, 0.0, 1.0)
    run.recorded = {"1": row}
    assert begin(run, _sd(pure), "1", (1,), {}) == (True, 9)
    intent = StepRow("r", "2", "charge", "effect", "intent", None, None, 2, 3, 0.0, None)
    run.recorded = {"2": intent}
    assert begin(run, _sd(charge), "2", (1,), {}) == (False, 2)


def test_a_sync_step_raising_stopiteration_raises_it_in_the_workflow() -> None:
    """A sync step's own StopIteration reaches the workflow as is, and is journalled."""
    app = App("sqlite://", clock=FakeClock())

    @app.step
    def stops() -> None:
        raise StopIteration("out")

    @app.workflow
    def wf() -> str:
        try:
            stops()
        except StopIteration as exc:
            return f"caught {exc}"
        return "no error"

    try:
        assert app.start(wf, run_id="s").result(timeout=30) == "caught out"
        (row,) = app.show("s").steps
        assert row.status == "error" and "StopIteration" in str(row.error)
    finally:
        app.close()
