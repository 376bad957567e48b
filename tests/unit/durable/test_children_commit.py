"""Child runs on the writer's path: in an async workflow, creating a child (with the
parent's step, one transaction) and journalling its end go through the group-commit
writer, so the loop runs other runs meanwhile; and a child created while its parent is
cancelled is not left behind."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from surefoot.durable import App, Worker
from surefoot.storage.runs import ChildWrite


def _kinds(records: list[Any]) -> list[str]:
    return [type(r).__name__ for r in records]


def test_an_async_parents_child_is_created_while_the_loop_runs_other_runs(app: App) -> None:
    """The commit that creates a child waits until another run on the same loop has made
    progress: it only can if the commit is not holding the loop (before: the child was
    created by a transaction on the loop, and the other run could not move)."""
    journal: Any = app.journal
    in_flight, other_ran, other_began = threading.Event(), threading.Event(), threading.Event()
    waited: list[bool] = []
    seen: list[tuple[str, list[str]]] = []
    real_commit, real_create = journal.commit, journal.create_run

    def hold() -> None:
        if not in_flight.is_set():
            in_flight.set()
            waited.append(other_ran.wait(10))

    def commit(records: list[Any]) -> list[bool]:
        seen.append((threading.current_thread().name, _kinds(records)))
        if any(type(r) is ChildWrite for r in records):
            hold()
        return real_commit(records)  # type: ignore[no-any-return]

    def create_run(row: Any) -> Any:
        if row.parent_id is not None:
            hold()
        return real_create(row)

    journal.commit, journal.create_run = commit, create_run

    @app.step
    async def double(x: int) -> int:
        return 2 * x

    @app.workflow
    async def kid(x: int) -> int:
        return await double(x)

    @app.workflow
    async def parent(x: int) -> int:
        await asyncio.to_thread(other_began.wait, 10)  # not alone: the writer's thread commits
        return await app.child(kid, x) + 1

    @app.step
    async def note() -> str:
        other_began.set()
        await asyncio.to_thread(in_flight.wait, 10)  # while the child's commit is in flight
        other_ran.set()
        return "ran"

    @app.workflow
    async def other() -> str:
        return await note()

    p = app.enqueue(parent, 4, run_id="p")
    o = app.enqueue(other, run_id="o")
    w = Worker(app, concurrency=4)
    end = time.monotonic() + 30
    while p.status() != "succeeded" and time.monotonic() < end:
        w.run_once(timeout=10)
    assert waited == [True], seen
    assert p.result(timeout=1) == 9 and o.result(timeout=1) == "ran"
    created = [(t, k) for t, k in seen if "ChildWrite" in k]
    assert [t.startswith("surefoot-writer") for t, _ in created] == [True]  # off the loop
    assert [(s.name, s.status) for s in app.show("p").steps] == [("child:kid", "done")]
    assert [r.run_id for r in app.journal.children.of("p")] == ["p:1"]
    audit = [(e.action, e.detail) for e in app.show("p:1").audit if e.action == "created"]
    assert audit == [("created", {"parent": "p"})]


def test_a_child_and_its_parents_step_are_one_commit(app: App) -> None:
    """Creating the child writes the child's row and the parent's waiting step together,
    and the parent's sleep is the next commit (two commits, as before, not three)."""
    journal: Any = app.journal
    seen: list[list[str]] = []
    real = journal.commit

    def commit(records: list[Any]) -> list[bool]:
        seen.append([type(r).__name__ for r in records if r.run_id == "p"])
        return real(records)  # type: ignore[no-any-return]

    journal.commit = commit

    @app.workflow
    async def kid() -> str:
        return str(await app.wait_for("go"))

    @app.workflow
    async def parent() -> str:
        return await app.child(kid)

    app.enqueue(parent, run_id="p")
    Worker(app).run_once(timeout=10)
    assert [b for b in seen if b] == [["ChildWrite"], ["RunWrite"]]
    (step,) = app.show("p").steps
    assert (step.name, step.status) == ("child:kid", "waiting")
    assert app.handle("p").status() == "sleeping"
    assert [r.run_id for r in app.journal.children.of("p")] == ["p:1"]


def test_a_child_created_after_its_parent_was_cancelled_is_not_created(app: App) -> None:
    """The parent's worker goes on after an operator cancelled the parent (it learns at
    its next write): its child is not created, and the parent stops there (before: the
    child was created pending, outside the cancelled tree, and ran)."""
    journal: Any = app.journal
    real_commit, real_create = journal.commit, journal.create_run
    cancelled: list[bool] = []

    def cancel_first() -> None:
        if not cancelled:
            cancelled.append(app.cancel("p", reason="not needed"))

    def commit(records: list[Any]) -> list[bool]:
        if any(type(r) is ChildWrite for r in records):
            cancel_first()
        return real_commit(records)  # type: ignore[no-any-return]

    def create_run(row: Any) -> Any:
        if row.parent_id is not None:
            cancel_first()
        return real_create(row)

    journal.commit, journal.create_run = commit, create_run

    @app.workflow
    async def kid() -> str:
        return "kid ran"

    @app.workflow
    async def parent() -> str:
        return await app.child(kid)

    app.enqueue(parent, run_id="p")
    w = Worker(app)
    assert w.run_once(timeout=10) == 1
    for _ in range(3):
        w.run_once(timeout=10)
    assert cancelled == [True]
    assert [(r.run_id, r.status) for r in app.list_runs()] == [("p", "cancelled")]
    assert app.show("p").steps == []
