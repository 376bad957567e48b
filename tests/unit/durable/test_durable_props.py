"""Properties: whatever the crash point, a resumed run ends with the same result, each
journalled step ran once, and a keyed effect took effect once."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from surefoot import FakeClock
from surefoot.durable import POINTS, App, CrashPlan, SimulatedCrash
from surefoot.errors import RunFailedError
from surefoot.resilience import Backoff, RetryPolicy


@settings(max_examples=30)
@given(
    n=st.integers(min_value=1, max_value=6),
    point=st.sampled_from(POINTS),
    at=st.integers(min_value=1, max_value=7),
)
def test_any_single_crash_then_resume(
    tmp_path_factory: object, n: int, point: str, at: int
) -> None:
    """Crash once anywhere, resume: same result, pure steps journalled before never rerun,
    the effect happens once (it is keyed and the service dedups)."""
    base: Path = tmp_path_factory.mktemp("p")  # type: ignore[attr-defined]
    calls: dict[str, int] = {}
    effects: dict[str, int] = {}

    with App(f"sqlite:///{base / 'r.db'}", clock=FakeClock(), poll=0.01) as app:

        @app.step
        def work(i: int) -> int:
            calls[f"w{i}"] = calls.get(f"w{i}", 0) + 1
            return i * i

        @app.step(effect=True)
        def send(total: int, *, key: str | None) -> int:
            assert key is not None
            effects[key] = effects.get(key, 0) + 1
            return total

        @app.workflow
        def flow(k: int) -> int:
            return send(sum(work(i) for i in range(k)))

        app.crash = CrashPlan(point, step=str(at))
        try:
            result = app.start(flow, n, run_id="p").result(timeout=10)
        except SimulatedCrash:
            journalled = {s.pos for s in app.show("p").steps if s.status == "done"}
            result = app.resume("p").result(timeout=10)
            for i in range(n):
                if str(i + 1) in journalled:
                    assert calls[f"w{i}"] == 1
        assert result == sum(i * i for i in range(n))
        assert all(c <= 2 for c in calls.values())
        assert len(effects) == 1  # one key: the service saw one logical effect


def test_step_retry_uses_the_policy_backoff(app: App, clock: FakeClock) -> None:
    """A RetryPolicy on a step decides the waits (on the app's clock) and the attempts."""
    tries: list[int] = []

    @app.step(retry=RetryPolicy(max_attempts=4, backoff=Backoff(1, 8, "none"), retry_on=ValueError))
    def flaky() -> str:
        tries.append(1)
        if len(tries) < 3:
            raise ValueError("try again")
        return "ok"

    @app.workflow
    def flow() -> str:
        return flaky()

    assert app.start(flow, run_id="r").result(timeout=10) == "ok"
    assert clock.sleeps[:2] == [1.0, 2.0]
    assert app.show("r").steps[0].attempts == 3


def test_policy_gives_up_on_errors_it_does_not_retry(app: App) -> None:
    """An error the policy does not retry fails the step at once, with one attempt."""
    tries: list[int] = []

    @app.step(retry=RetryPolicy(max_attempts=5, retry_on=ValueError))
    def broken() -> None:
        tries.append(1)
        raise KeyError("permanent")

    @app.workflow
    def flow() -> None:
        broken()

    with pytest.raises(RunFailedError) as info:
        app.start(flow, run_id="x").result(timeout=10)
    assert info.value.status == "failed"
    assert tries == [1]
    assert app.show("x").steps[0].attempts == 1


def test_resolve_records_an_effect_without_rerunning_it(app: App) -> None:
    """An operator who checked that an unkeyed effect happened records its result; the run
    then goes on without performing it again."""
    sent: list[str] = []

    @app.step(effect=True)
    def email(to: str) -> str:
        sent.append(to)
        return f"sent to {to}"

    @app.workflow
    def flow() -> str:
        return email("ann") + "!"

    app.crash = CrashPlan("after_effect")
    try:
        app.start(flow, run_id="m").result(timeout=10)
    except SimulatedCrash:
        pass
    app.resume("m")
    app.handle("m")
    for _ in range(200):
        if app.show("m").run.status == "needs_attention":
            break
        clock_wait(app)
    assert app.show("m").run.status == "needs_attention"
    assert app.resolve("m", "1", "sent to ann", reason="seen in the mail log").result(
        timeout=10
    ) == ("sent to ann!")
    assert sent == ["ann"]
    assert "resolve" in [a.action for a in app.show("m").audit]


def clock_wait(app: App) -> None:
    """Give the app's executor a moment (real time) to finish what it is doing."""
    import time

    time.sleep(0.01)


def test_show_flags_code_changed_under_the_same_label(db_url: str, clock: FakeClock) -> None:
    """show() tells when the code under a run's version label is not the code it began with."""
    with App(db_url, clock=clock) as old:

        @old.step
        def a() -> None:
            return None

        @old.workflow(name="w", version="1")
        def w() -> None:
            a()

        old.enqueue("w", run_id="x")
        assert old.show("x").code_changed is False
    with App(db_url, clock=clock) as new:

        @new.step
        def b() -> None:
            return None

        @new.workflow(name="w", version="1")
        def w2() -> None:
            b()

        assert new.show("x").code_changed is True
