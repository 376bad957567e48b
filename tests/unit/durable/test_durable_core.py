"""The core contract: one commit per step, replay instead of recompute, run identity."""

from __future__ import annotations

import asyncio

import pytest

from surefoot.durable import App, CrashPlan, SimulatedCrash
from surefoot.errors import EncodeError, RunConflictError, RunFailedError


def _hold_liveness(app: App) -> None:
    """What an app does once, before its first run executes: hold its liveness lock and
    mark its worker row (one commit per app, not per run)."""
    liveness = app.journal.liveness
    assert liveness is not None and liveness.hold(app.worker_id, now=app.clock.now())


def test_one_commit_per_pure_step(app: App) -> None:
    """A pure step costs exactly one commit; a run adds one to start and one to finish."""

    @app.step
    async def inc(x: int) -> int:
        return x + 1

    @app.workflow
    async def count(n: int) -> int:
        x = 0
        for _ in range(n):
            x = await inc(x)
        return x

    db = app.journal.wrapped.db  # type: ignore[attr-defined]  # opened (and migrated) before counting
    _hold_liveness(app)
    before = db.commits
    assert app.start(count, 20, run_id="c").result(timeout=10) == 20
    assert db.commits - before == 20 + 2


def test_effect_costs_intent_plus_result(app: App) -> None:
    """An effect step costs two commits: the intent row before it runs, the result after."""

    @app.step(effect=True)
    def send(x: int, *, key: str | None) -> int:
        return x

    @app.workflow
    def flow() -> int:
        return send(1) + send(2)

    db = app.journal.wrapped.db  # type: ignore[attr-defined]
    _hold_liveness(app)
    before = db.commits
    assert app.start(flow, run_id="e").result(timeout=10) == 3
    assert db.commits - before == 2 * 2 + 2
    kinds = [(s.name, s.status, s.kind) for s in app.show("e").steps]
    assert kinds == [("send", "done", "effect")] * 2


def test_sync_workflow_replays_after_crash(app: App) -> None:
    """After a crash, journalled steps are replayed, not rerun; the rest runs once."""
    calls: list[str] = []

    @app.step
    def fetch(n: int) -> int:
        calls.append(f"fetch{n}")
        return n * 10

    @app.workflow
    def flow() -> int:
        return fetch(1) + fetch(2) + fetch(3)

    app.crash = CrashPlan("after_journal", step="2")
    with pytest.raises(SimulatedCrash):
        app.start(flow, run_id="r").result(timeout=10)
    assert calls == ["fetch1", "fetch2"]
    assert app.show("r").run.status == "running"  # as a dead process leaves it
    assert app.resume("r").result(timeout=10) == 60
    assert calls == ["fetch1", "fetch2", "fetch3"]


def test_async_gather_positions_follow_call_order(app: App) -> None:
    """Steps under asyncio.gather get positions in call order, whatever order they finish."""
    finished: list[str] = []

    @app.step
    async def slow(tag: str, delay: float) -> str:
        await asyncio.sleep(delay)
        finished.append(tag)
        return tag

    @app.workflow
    async def flow() -> list[str]:
        a, b, c = await asyncio.gather(slow("a", 0.03), slow("b", 0.0), slow("c", 0.01))
        return [a, b, c]

    assert app.start(flow, run_id="g").result(timeout=10) == ["a", "b", "c"]
    assert finished == ["b", "c", "a"]
    steps = app.show("g").steps
    assert [(s.pos, s.result) for s in sorted(steps, key=lambda s: s.pos)] == [
        ("1", "a"),
        ("2", "b"),
        ("3", "c"),
    ]


def test_subflows_under_gather_replay_with_same_positions(app: App) -> None:
    """Sub-flows run concurrently get nested positions and replay without mismatch."""
    calls: list[str] = []

    @app.step
    async def leaf(tag: str) -> str:
        calls.append(tag)
        await asyncio.sleep(0.01 if tag.startswith("a") else 0)
        return tag

    async def branch(name: str) -> list[str]:
        return [await leaf(f"{name}1"), await leaf(f"{name}2")]

    @app.workflow
    async def flow() -> list[list[str]]:
        first = await leaf("root")
        pair = await asyncio.gather(branch("a"), branch("b"))
        return [[first], *pair]

    app.crash = CrashPlan("before_step", step="2.2")
    with pytest.raises(SimulatedCrash):
        app.start(flow, run_id="s").result(timeout=10)
    assert app.resume("s").result(timeout=10) == [["root"], ["a1", "a2"], ["b1", "b2"]]
    assert sorted(calls) == ["a1", "a2", "b1", "b2", "root"]  # nothing ran twice
    positions = {s.name and s.result: s.pos for s in app.show("s").steps}
    assert positions == {"root": "1", "a1": "2.1", "a2": "2.2", "b1": "3.1", "b2": "3.2"}


def test_same_run_id_returns_same_run(app: App) -> None:
    """Starting a run id twice runs it once; other arguments for it are refused."""
    calls: list[int] = []

    @app.step
    def once(x: int) -> int:
        calls.append(x)
        return x

    @app.workflow
    def flow(x: int) -> int:
        return once(x)

    assert app.start(flow, 5, run_id="same").result(timeout=10) == 5
    assert app.start(flow, 5, run_id="same").result(timeout=10) == 5
    assert calls == [5]
    with pytest.raises(RunConflictError, match="same"):
        app.start(flow, 6, run_id="same")
    assert app.show("same").run.args == [5]


def test_unencodable_result_fails_at_the_step(app: App) -> None:
    """A step result the codec cannot store fails the run, naming step and type; no row."""

    @app.step
    def bad() -> object:
        return object()

    @app.workflow
    def flow() -> object:
        return bad()

    with pytest.raises(RunFailedError) as info:
        app.start(flow, run_id="bad").result(timeout=10)
    err = info.value.error
    assert err["type"] == "surefoot.errors.EncodeError"
    assert "'bad'" in err["message"] and "builtins.object" in err["message"]
    assert app.show("bad").steps == []


def test_unencodable_argument_writes_nothing(app: App) -> None:
    """Arguments that cannot be stored are refused before any run is created."""

    @app.workflow
    def flow(x: object) -> None:
        return None

    with pytest.raises(EncodeError, match="arguments of workflow"):
        app.start(flow, object(), run_id="nope")
    assert app.list_runs() == []


def test_same_arguments_in_another_keyword_order_are_the_same_run(app: App) -> None:
    """Keyword arguments given in another order still name the same run."""

    @app.workflow
    def pair(a: int, b: int) -> int:
        return a - b

    assert app.start(pair, a=5, b=2, run_id="kw").result(timeout=10) == 3
    assert app.start(pair, b=2, a=5, run_id="kw").result(timeout=10) == 3
    with pytest.raises(RunConflictError):
        app.start(pair, a=2, b=5, run_id="kw")
