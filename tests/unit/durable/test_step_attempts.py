"""What a step's provider calls went through (503, 429, ok) is journalled with the step:
an ``attempts`` audit entry written in the step's own transaction, fenced like it, only
when one of its attempts failed. The model is ``FakeLLM`` behind ``llm.connect("fake")``
with a scripted ``faults.Script``; retry waits go on a ``FakeClock``."""

from __future__ import annotations

from typing import Any

from surefoot import FakeClock, llm
from surefoot.durable import App
from surefoot.llm import FakeLLM
from surefoot.resilience import faults


def _client(clock: FakeClock, script: list[Any]) -> Any:
    fake = FakeLLM(seed=0, clock=clock, failures=faults.Script(script))
    return llm.connect("fake", llm=fake, clock=clock)


def test_a_steps_provider_attempts_are_journalled_with_it(app: App, clock: FakeClock) -> None:
    flaky = _client(clock, [503, 429, None])
    steady = _client(clock, [])

    @app.step
    def ask(q: str) -> str:
        return str(flaky.create(messages=[{"role": "user", "content": q}]).text)

    @app.step
    def check(a: str) -> str:
        return str(steady.create(messages=[{"role": "user", "content": a}]).text)

    @app.step
    def plain(a: str) -> int:
        return len(a)

    @app.workflow
    def agent(q: str) -> int:
        return plain(check(ask(q)))

    assert app.start(agent, "why?", run_id="r").result(timeout=10) > 0
    entries = [e for e in app.show("r").audit if e.action == "attempts"]
    assert [(e.actor, e.detail) for e in entries] == [
        (
            "test-worker",
            {"pos": "1", "step": "ask", "epoch": 1, "outcomes": ["503", "429", "ok"]},
        )
    ]  # check (one ok attempt) and plain (no call) add nothing
    assert flaky.meter.totals.attempts == 3


def test_a_step_that_gives_up_keeps_its_attempts(app: App, clock: FakeClock) -> None:
    down = _client(clock, [503] * 10)

    @app.step
    def ask(q: str) -> str:
        return str(down.create(messages=[{"role": "user", "content": q}]).text)

    @app.workflow
    def agent(q: str) -> str:
        return ask(q)

    handle = app.start(agent, "why?", run_id="r")
    try:
        handle.result(timeout=10)
    except Exception:
        pass
    d = app.show("r")
    assert d.run.status == "failed"
    (entry,) = [e for e in d.audit if e.action == "attempts"]
    assert entry.detail["outcomes"] == ["503"] * down.meter.totals.attempts
    assert [(s.name, s.status) for s in d.steps] == [("ask", "error")]
