"""Effects: the crash window after an effect, idempotency keys, outcome unknown."""

from __future__ import annotations

import pytest

from surefoot.durable import App, CrashPlan, SimulatedCrash
from surefoot.errors import RunFailedError


class Service:
    """A fake outside service that counts what it receives and dedups by key when given."""

    def __init__(self) -> None:
        self.received: list[str] = []
        self.seen: dict[str, str] = {}

    def charge(self, what: str, key: str | None) -> str:
        if key is not None and key in self.seen:
            return self.seen[key]
        self.received.append(what)
        out = f"charged {what}"
        if key is not None:
            self.seen[key] = out
        return out


def _app_with(app: App, svc: Service) -> object:
    @app.step(effect=True)
    def charge(what: str, *, key: str | None) -> str:
        return svc.charge(what, key)

    @app.workflow
    def order(what: str) -> str:
        return charge(what)

    return order


@pytest.mark.parametrize(("strategy", "effects"), [("journal", 2), ("journal_keys", 1)])
def test_crash_after_effect_duplicates_only_without_key(
    app: App, strategy: str, effects: int
) -> None:
    """Crash after the effect, before its journal write: a duplicate without key, none with."""
    svc = Service()
    order = _app_with(app, svc)
    app.crash = CrashPlan("after_effect", step="charge")
    with pytest.raises(SimulatedCrash):
        app.start(order, "book", run_id="o", strategy=strategy).result(timeout=10)
    assert app.resume("o").result(timeout=10) == "charged book"
    assert len(svc.received) == effects


def test_resumed_effect_reuses_its_key(app: App) -> None:
    """A resumed effect is called with the same key f'{run_id}:{step}' as the first time."""
    keys: list[str | None] = []

    @app.step(effect=True)
    def send(*, key: str | None) -> None:
        keys.append(key)

    @app.workflow
    def flow() -> None:
        send()

    app.crash = CrashPlan("after_effect")
    with pytest.raises(SimulatedCrash):
        app.start(flow, run_id="k").result(timeout=10)
    app.resume("k").result(timeout=10)
    assert keys == ["k:1", "k:1"]
    assert app.show("k").steps[0].attempts == 2


def test_effect_without_key_and_unknown_outcome_needs_attention(app: App) -> None:
    """An effect that takes no key and may have happened is not rerun blindly."""
    sent: list[str] = []

    @app.step(effect=True)
    def email(to: str) -> None:
        sent.append(to)

    @app.workflow
    def flow() -> str:
        email("ann")
        return "done"

    app.crash = CrashPlan("after_effect")
    with pytest.raises(SimulatedCrash):
        app.start(flow, run_id="m").result(timeout=10)
    with pytest.raises(RunFailedError) as info:
        app.resume("m").result(timeout=10)
    assert info.value.status == "needs_attention"
    assert sent == ["ann"]
    detail = app.show("m")
    assert detail.audit[-1].action == "needs_attention"
    assert detail.audit[-1].detail["reason"] == "outcome_unknown"
    assert detail.audit[-1].detail["step"] == "email"
    # the operator checked and decides to send again
    assert app.retry("m").result(timeout=10) == "done"
    assert sent == ["ann", "ann"]


def test_crash_before_effect_runs_it_once(app: App) -> None:
    """A crash after the intent row but before the effect: resume performs it once."""
    svc = Service()
    order = _app_with(app, svc)
    app.crash = CrashPlan("before_effect")
    with pytest.raises(SimulatedCrash):
        app.start(order, "x", run_id="b").result(timeout=10)
    assert svc.received == []
    assert app.resume("b").result(timeout=10) == "charged x"
    assert svc.received == ["x"]


def test_restart_strategy_reruns_everything(app: App) -> None:
    """Strategy restart journals no steps: a crash reruns every step from the start."""
    calls: list[int] = []

    @app.step
    def work(n: int) -> int:
        calls.append(n)
        return n

    @app.workflow
    def flow() -> int:
        return work(1) + work(2)

    app.crash = CrashPlan("after_journal", step="2")
    with pytest.raises(SimulatedCrash):
        app.start(flow, run_id="rs", strategy="restart").result(timeout=10)
    assert app.resume("rs").result(timeout=10) == 3
    assert calls == [1, 2, 1, 2]
    assert app.show("rs").steps == []


def test_step_retries_are_counted(app: App) -> None:
    """A step retried by its policy journals how many attempts it took."""
    tries: list[int] = []

    @app.step(retry=3)
    def flaky() -> str:
        tries.append(1)
        if len(tries) < 3:
            raise ConnectionError("reset")
        return "ok"

    @app.workflow
    def flow() -> str:
        return flaky()

    assert app.start(flow, run_id="f").result(timeout=10) == "ok"
    assert len(tries) == 3
    assert app.show("f").steps[0].attempts == 3


def test_step_error_is_journalled_and_replayed(app: App) -> None:
    """A step that fails for good records its error; the workflow can catch it, and replay
    raises the same error without calling the step again."""
    tries: list[int] = []

    @app.step
    def boom() -> None:
        tries.append(1)
        raise ValueError("no")

    @app.step
    def after(x: str) -> str:
        return x

    @app.workflow
    def flow() -> str:
        try:
            boom()
        except ValueError as exc:
            return after(f"caught {exc}")
        return "unreachable"

    app.crash = CrashPlan("before_step", step="after")
    with pytest.raises(SimulatedCrash):
        app.start(flow, run_id="err").result(timeout=10)
    assert app.resume("err").result(timeout=10) == "caught no"
    assert tries == [1]
    s = app.show("err").steps[0]
    assert s.status == "error" and s.error["type"] == "builtins.ValueError"


@pytest.mark.parametrize("strategy", ["restart", "journal", "journal_keys"])
def test_every_crash_point_fires_in_every_strategy(app: App, strategy: str) -> None:
    """Each crash point stops an effect step under each strategy (so the lab can compare)."""
    svc = Service()
    order = _app_with(app, svc)
    for i, point in enumerate(("before_step", "before_effect", "after_effect", "after_journal")):
        app.crash = CrashPlan(point, step="charge")
        with pytest.raises(SimulatedCrash):
            app.start(order, f"o{i}", run_id=f"{strategy}-{point}", strategy=strategy).result(
                timeout=10
            )
        assert app.resume(f"{strategy}-{point}").result(timeout=10) == f"charged o{i}"
