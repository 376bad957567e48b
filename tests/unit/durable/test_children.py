"""Child workflows: started once, awaited durably, failures and cancellation passed on."""

from __future__ import annotations

import time

import pytest

from surefoot import FakeClock
from surefoot.durable import App, CrashPlan, SimulatedCrash, Worker
from surefoot.errors import DeadlineExceededError, RunFailedError


def _until(app: App, w: Worker, statuses: dict[str, str], tries: int = 200) -> None:
    """Let the worker (and runs driven here) work until the runs have ``statuses``."""
    for _ in range(tries):
        if all(app.handle(r).status() == s for r, s in statuses.items()):
            return
        w.run_once(timeout=10)
        time.sleep(0.01)
    raise AssertionError({r: app.handle(r).status() for r in statuses})


def test_parent_gets_the_childs_result(app: App) -> None:
    """A parent awaits a child run's result; the parent's journal holds the child's id."""
    calls: list[int] = []

    @app.step
    async def double(x: int) -> int:
        calls.append(x)
        return 2 * x

    @app.workflow
    async def kid(x: int) -> int:
        return await double(x)

    @app.workflow
    async def parent(x: int) -> int:
        return await app.child(kid, x) + 1

    assert app.start(parent, 5, run_id="p").result(timeout=10) == 11
    assert calls == [5]
    child = app.show("p:1").run
    assert (child.workflow, child.status, child.result) == ("kid", "succeeded", 10)
    (step,) = app.show("p").steps
    assert (step.name, step.kind, step.status, step.result) == ("child:kid", "child", "done", 10)
    assert app.journal.get_run("p:1").parent_id == "p"


def test_a_resumed_parent_never_starts_its_child_twice(db_url: str, clock: FakeClock) -> None:
    """The parent dies after its child finished; resumed elsewhere it reads the child's
    result from its journal: one child run, one execution of the child's step."""
    app = App(db_url, clock=clock, poll=0.01, crash=CrashPlan("before_step", step="tail"))
    calls: list[int] = []

    @app.step
    def work(x: int) -> int:
        calls.append(x)
        return x * 3

    @app.step
    def tail(v: int) -> int:
        return v + 1

    @app.workflow
    def kid(x: int) -> int:
        return work(x)

    @app.workflow
    def parent(x: int) -> int:
        return tail(app.child(kid, x))

    try:
        h = app.enqueue(parent, 2, run_id="p")
        w = Worker(app)
        with pytest.raises(SimulatedCrash):
            for _ in range(500):  # the child runs here on its own; wait for it
                w.run_once(timeout=10)
                time.sleep(0.01)
        assert app.handle("p").status() == "running"  # dead holder, lease not renewed
        clock.advance(app.lease + 1)
        _until(app, w, {"p": "succeeded"})
        assert h.result(timeout=5) == 7
        assert calls == [2]
        assert sorted(r.run_id for r in app.list_runs()) == ["p", "p:1"]
    finally:
        app.close()


def test_a_childs_failure_is_the_parents_exception(app: App) -> None:
    """The child's error is raised in the parent as itself (caught by its type)."""

    @app.workflow
    def kid() -> None:
        raise ValueError("bad input")

    @app.workflow
    def parent() -> str:
        try:
            app.child(kid)
        except ValueError as exc:
            return f"caught: {exc}"
        return "not raised"

    @app.workflow
    def careless() -> None:
        app.child(kid)

    assert app.start(parent).result(timeout=10) == "caught: bad input"
    with pytest.raises(RunFailedError) as err:
        app.start(careless, run_id="c").result(timeout=10)
    assert err.value.error["type"] == "builtins.ValueError"


def test_cancelling_the_parent_cancels_its_children(app: App) -> None:
    """Cancel a parent that awaits a child (that awaits its own child): all three end
    cancelled, in one go, and say why in their audit logs."""

    @app.workflow
    async def leaf() -> str:
        return str(await app.wait_for("go"))

    @app.workflow
    async def middle() -> str:
        return str(await app.child(leaf))

    @app.workflow
    async def top() -> str:
        return str(await app.child(middle))

    app.enqueue(top, run_id="t")
    w = Worker(app)
    _until(app, w, {"t": "sleeping", "t:1": "sleeping", "t:1:1": "sleeping"})
    assert len(app.list_runs()) == 3
    assert app.cancel("t", reason="not needed") is True
    assert {r.status for r in app.list_runs()} == {"cancelled"}
    (entry,) = [a for a in app.show("t:1:1").audit if a.action == "cancel"]
    assert entry.detail == {"parent_cancelled": "t"}
    assert app.cancel("t") is False


def test_a_cancelled_child_raises_in_its_parent(app: App) -> None:
    """Cancelling only the child wakes the parent with RunFailedError (cancelled)."""

    @app.workflow
    async def kid() -> str:
        return str(await app.wait_for("go"))

    @app.workflow
    async def parent() -> str:
        try:
            return str(await app.child(kid))
        except RunFailedError as exc:
            return f"child {exc.status}"

    h = app.enqueue(parent, run_id="p")
    w = Worker(app)
    _until(app, w, {"p": "sleeping", "p:1": "sleeping"})
    assert app.cancel("p:1") is True
    _until(app, w, {"p": "succeeded"})
    assert h.result(timeout=5) == "child cancelled"


def test_a_child_wait_times_out(app: App, clock: FakeClock) -> None:
    """child(timeout=10): ten seconds later the child is cancelled and the parent gets
    DeadlineExceededError."""

    @app.workflow
    async def kid() -> str:
        return str(await app.wait_for("go"))

    @app.workflow
    async def parent() -> str:
        try:
            return str(await app.child(kid, timeout=10))
        except DeadlineExceededError as exc:
            return exc.what

    h = app.enqueue(parent, run_id="p")
    w = Worker(app)
    _until(app, w, {"p": "sleeping", "p:1": "sleeping"})
    clock.advance(11)
    _until(app, w, {"p": "succeeded"})
    assert h.result(timeout=5) == "child run 'p:1'"
    assert app.handle("p:1").status() == "cancelled"
