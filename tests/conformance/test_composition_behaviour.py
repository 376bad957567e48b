"""Child runs, run deadlines and ``patched()`` (issue 13), the same workflow code on every
engine (embedded SQLite and Temporal); what does not map to Temporal is refused by name
(docs/engines.md lists the same)."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest
from _conformance_support import Harness, until

from surefoot import durable
from surefoot.errors import (
    ConfigError,
    DeadlineExceededError,
    RunConflictError,
    RunFailedError,
    UnknownRunError,
)


@dataclass
class Report:
    """Not registered with the codec: a child's result comes back one by its annotation."""

    title: str
    pages: int


def status(app: durable.App, run_id: str) -> str | None:
    """The run's status, or None while it does not exist yet."""
    try:
        return app.handle(run_id).status()
    except UnknownRunError:
        return None


def build(app: durable.App, calls: list[Any]) -> SimpleNamespace:
    """The steps and workflows of this suite, registered on ``app``."""

    @app.step
    async def write(title: str) -> Report:
        calls.append(("write", title))
        return Report(title, len(title))

    @app.step
    async def read(r: Report) -> str:
        calls.append(("read", type(r).__name__))
        return f"{r.title}:{r.pages}"

    def unbook(item: str, *, key: str, result: str) -> None:
        calls.append(("unbook", item, key))

    @app.step(effect=True, compensate=unbook)
    async def book(item: str, *, key: str) -> str:
        calls.append(("book", item, key))
        return f"booking {item}"

    @app.workflow
    async def author(title: str) -> Report:
        return await write(title)

    @app.workflow
    async def refuse(why: str) -> None:
        raise ValueError(why)

    @app.workflow
    async def dawdle() -> str:
        await app.sleep(3600)
        return "woke"

    @app.workflow
    async def editor(title: str) -> list[str]:
        report = await app.child(author, title)  # a Report, not a dict
        got = await read(report)
        go = await app.wait_for("go", timeout=120)
        return [type(report).__name__, got, go]

    @app.workflow
    async def careful() -> str:
        try:
            await app.child(refuse, "no such page")
        except ValueError as exc:
            return f"caught ValueError: {exc}"
        return "not raised"

    @app.workflow
    async def impatient() -> str:
        try:
            await app.child(dawdle, timeout=2)
        except DeadlineExceededError:
            return "gave up"
        return "not raised"

    @app.workflow(timeout=2)
    async def slowpoke() -> str:
        await app.sleep(3600)  # its own deadline comes first
        return "woke"

    @app.workflow
    async def waits_for_slowpoke() -> str:
        try:
            await app.child(slowpoke)
        except DeadlineExceededError as exc:
            return f"child failed: {exc.what}"
        return "not raised"

    @app.workflow
    async def adopter(name: str) -> str:
        try:
            report = await app.child(author, name, run_id="shared-child")
        except RunConflictError:
            return "refused"
        return report.title

    @app.workflow
    async def trip(item: str) -> str:
        await book(item)
        await app.sleep(3600)  # the run's deadline comes first
        return "unreachable"

    return SimpleNamespace(**{k: v for k, v in locals().items() if k not in ("app", "calls")})


def build_tax(app: durable.App, calls: list[Any], *, patched: bool) -> Any:
    """``order`` before the fix (``patched=False``) and after it (``app.patched("tax")``)."""

    @app.step
    async def old_tax(x: int) -> int:
        calls.append(("old_tax", x))
        return x + 1

    @app.step
    async def new_tax(x: int) -> int:
        calls.append(("new_tax", x))
        return x + 2

    if not patched:

        @app.workflow(name="order")
        async def order(x: int) -> list[Any]:
            t = await old_tax(x)
            return [t, await app.wait_for("go", timeout=120)]

        return order

    @app.workflow(name="order")
    async def order_fixed(x: int) -> list[Any]:
        t = await new_tax(x) if app.patched("tax") else await old_tax(x)
        return [t, await app.wait_for("go", timeout=120)]

    return order_fixed


def test_a_child_run_returns_its_declared_type_once_even_after_a_restart(
    engine: Harness,
) -> None:
    """The parent awaits a child run (id ``<parent>:<pos>``) whose ``-> Report`` result
    reaches it as a Report; the first worker stops once the child ended; a new one
    finishes the parent (reading the child's result back from the run's history, as the
    declared type) without running the child again."""
    calls: list[Any] = []
    first = engine.app()
    f1 = build(first, calls)
    first.start(f1.editor, "dune", run_id="ed-1")
    assert first.signal("ed-1", "go", "now") is True  # kept until the parent's wait
    until(lambda: status(first, "ed-1:1") == "succeeded", "the child run")
    first.close()
    second = engine.app()
    f2 = build(second, calls)
    handle = second.start(f2.editor, "dune", run_id="ed-1")
    assert handle.result(timeout=60) == ["Report", "dune:4", "now"]
    assert calls == [("write", "dune"), ("read", "Report")]


def test_a_childs_error_is_the_parents_exception(engine: Harness) -> None:
    """A child that raises ValueError: the parent catches ValueError."""
    app = engine.app()
    f = build(app, [])
    out = app.start(f.careful, run_id="car-1").result(timeout=60)
    assert out == "caught ValueError: no such page"
    assert app.handle("car-1:1").status() == "failed"


def test_a_childs_timeout_cancels_it_and_raises_in_the_parent(engine: Harness) -> None:
    """``app.child(…, timeout=2)`` on a child that sleeps an hour: the parent gets
    DeadlineExceededError after 2 s and the child ends cancelled."""
    app = engine.app()
    f = build(app, [])
    assert app.start(f.impatient, run_id="imp-1").result(timeout=60) == "gave up"
    until(lambda: status(app, "imp-1:1") == "cancelled", "the child to be cancelled")


def test_a_child_workflows_own_timeout_fails_it_and_the_parent_sees_why(
    engine: Harness,
) -> None:
    """A child declared ``@app.workflow(timeout=2)`` passes its deadline: it fails with
    DeadlineExceededError, raised in the parent as itself."""
    app = engine.app()
    f = build(app, [])
    assert app.start(f.waits_for_slowpoke, run_id="sp-1").result(timeout=60) == "child failed: run"
    assert status(app, "sp-1:1") == "failed"


def test_a_given_child_run_id_belongs_to_one_parent(engine: Harness) -> None:
    """A child's explicit ``run_id`` taken by another parent's child is refused there
    (RunConflictError), never a second run under the same id."""
    app = engine.app()
    f = build(app, [])
    assert app.start(f.adopter, "first", run_id="ad-1").result(timeout=60) == "first"
    assert app.start(f.adopter, "first", run_id="ad-2").result(timeout=60) == "refused"


def test_a_run_past_its_deadline_fails_after_its_compensations(engine: Harness) -> None:
    """``start(…, timeout=2)`` on a run that books, then sleeps an hour: it wakes at its
    deadline, undoes the booking (same key as embedded) and ends failed with
    DeadlineExceededError."""
    calls: list[Any] = []
    app = engine.app()
    f = build(app, calls)
    handle = app.start(f.trip, "hotel", run_id="trip-1", timeout=2)
    with pytest.raises(RunFailedError) as info:
        handle.result(timeout=60)
    assert info.value.status == "failed"
    assert "passed its deadline" in str(info.value.error)
    assert calls == [("book", "hotel", "trip-1:1"), ("unbook", "hotel", "trip-1:1.undo")]
    assert [a for a, _ in engine.audit(app, handle)] == ["compensated", "failed"]


def test_patched_keeps_old_runs_on_the_old_branch(engine: Harness) -> None:
    """A run begun before the fix waits; the worker is replaced by one with
    ``app.patched("tax")``: the old run replays old_tax, a new run takes new_tax."""
    calls: list[Any] = []
    before = engine.app()
    build_tax(before, calls, patched=False)
    before.start("order", 10, run_id="old-1")
    until(lambda: ("old_tax", 10) in calls, "the old run's step")
    before.close()
    after = engine.app()
    build_tax(after, calls, patched=True)
    old = after.start("order", 10, run_id="old-1")
    new = after.start("order", 10, run_id="new-1")
    until(lambda: ("new_tax", 10) in calls, "the new run's step")
    assert after.signal("old-1", "go", "a") is True
    assert after.signal("new-1", "go", "b") is True
    assert old.result(timeout=60) == [11, "a"]
    assert new.result(timeout=60) == [12, "b"]
    assert calls == [("old_tax", 10), ("new_tax", 10)]


def test_what_does_not_map_to_temporal_is_refused_by_name(engine: Harness) -> None:
    """Queues, priorities, dedup ids and schedules live in surefoot's own journal: on
    Temporal each is refused naming the option (on a journal they work)."""
    app = engine.app()
    f = build(app, [])
    if engine.name != "temporal":
        app.queue("mail", concurrency=1)
        app.schedule("nightly", f.author, cron="0 3 * * *", args=["x"])
        return
    with pytest.raises(ConfigError, match="queue"):
        app.enqueue(f.author, "x", queue="mail")
    with pytest.raises(ConfigError, match="priority"):
        app.enqueue(f.author, "x", priority=3)
    with pytest.raises(ConfigError, match="schedules"):
        app.schedule("nightly", f.author, cron="0 3 * * *", args=["x"])
