"""Versions: a run finishes on the version it began with; changed code is detected."""

from __future__ import annotations

import pytest

from surefoot import FakeClock
from surefoot.durable import App, Worker
from surefoot.errors import RunFailedError, StepMismatchError


def _v1(app: App, log: list[str]) -> object:
    @app.step(name="draft")
    async def draft_v1(topic: str) -> str:
        log.append("v1")
        return f"v1:{topic}"

    @app.workflow(name="write", version="1")
    async def write_v1(topic: str) -> str:
        await app.sleep(60)
        return await draft_v1(topic)

    return write_v1


def _v2(app: App, log: list[str]) -> object:
    @app.step(name="draft2")
    async def draft_v2(topic: str) -> str:
        log.append("v2")
        return f"v2:{topic}"

    @app.step(name="polish")
    async def polish(text: str) -> str:
        return text + "!"

    @app.workflow(name="write", version="2")
    async def write_v2(topic: str) -> str:
        await app.sleep(60)
        return await polish(await draft_v2(topic))

    return write_v2


def test_old_runs_finish_on_old_version(db_url: str, clock: FakeClock) -> None:
    """A run begun on v1 finishes on v1 while new runs of the name use v2."""
    log: list[str] = []
    with App(db_url, clock=clock, poll=0.01) as old:
        _v1(old, log)
        old.enqueue("write", "a", run_id="old")
        Worker(old).run_once(timeout=10)
    with App(db_url, clock=clock, poll=0.01) as new:
        _v1(new, log)
        _v2(new, log)
        h = new.enqueue("write", "b", run_id="new")
        clock.advance(61)
        w = Worker(new)
        w.run_once(timeout=10)
        w.run_once(timeout=10)
        clock.advance(61)
        w.run_once(timeout=10)
        assert new.handle("old").result(timeout=1) == "v1:a"
        assert h.result(timeout=1) == "v2:b!"
        assert new.show("old").run.version == "1" and new.show("new").run.version == "2"
        assert sorted(log) == ["v1", "v2"]


def test_run_of_unregistered_version_waits_visibly(db_url: str, clock: FakeClock) -> None:
    """No worker takes a run whose version it lacks; show() marks it stranded, not lost."""
    log: list[str] = []
    with App(db_url, clock=clock, poll=0.01) as old:
        _v1(old, log)
        old.enqueue("write", "a", run_id="old")
    with App(db_url, clock=clock, poll=0.01) as new:
        _v2(new, log)
        assert Worker(new).run_once(timeout=10) == 0
        d = new.show("old")
        assert d.run.status == "pending" and d.stranded and not d.registered


def test_changed_steps_raise_step_mismatch(db_url: str, clock: FakeClock) -> None:
    """Replay that meets another step than journalled stops with StepMismatchError facts."""
    log: list[str] = []
    with App(db_url, clock=clock, poll=0.01) as old:

        @old.step
        async def plan() -> str:
            return "p"

        @old.workflow(name="w", version="1")
        async def w1() -> str:
            await plan()
            await old.sleep(10)
            return "done"

        old.enqueue("w", run_id="x")
        Worker(old).run_once(timeout=10)
    with App(db_url, clock=clock, poll=0.01) as new:

        @new.step
        async def research() -> str:
            log.append("research")
            return "r"

        @new.workflow(name="w", version="1")  # same label, edited in place: the mistake
        async def w1_edited() -> str:
            await research()
            return "done"

        clock.advance(11)
        Worker(new).run_once(timeout=10)
        d = new.show("x")
        assert d.run.status == "needs_attention"
        assert d.run.error["type"] == "surefoot.errors.StepMismatchError"
        assert "step 1 was recorded as 'plan'" in d.run.error["message"]
        assert "'research'" in d.run.error["message"]
        assert log == []
        with pytest.raises(RunFailedError) as info:
            new.handle("x").result(timeout=1)
        assert info.value.status == "needs_attention"


def test_step_mismatch_error_names_everything() -> None:
    """StepMismatchError keeps run, step, recorded and current names as attributes."""
    e = StepMismatchError("order-42", 3, "charge_card", "send_receipt")
    assert (e.run_id, e.step, e.recorded, e.current) == (
        "order-42",
        3,
        "charge_card",
        "send_receipt",
    )
