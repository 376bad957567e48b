"""PostgreSQL: children ending, parents waking, heartbeats and cancels lock run rows in one
order, so many parents and children on two workers never deadlock."""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from surefoot import storage
from surefoot.durable import App, Worker
from surefoot.storage.postgres import _db

PARENTS, KIDS = 30, 3


@pytest.fixture
def pg_schema_url(pg_url: str) -> Iterator[str]:
    url = f"{pg_url}?schema=sf_t_{uuid.uuid4().hex[:12]}"
    yield url
    st: Any = storage.open(url)
    st.db.drop_schema()
    st.close()


@pytest.fixture
def deadlocks(monkeypatch: pytest.MonkeyPatch) -> list[BaseException]:
    """Every deadlock PostgreSQL reports to this process (the store retries them silently)."""
    seen: list[BaseException] = []
    real = _db.PostgresDB._retryable_rollback

    def spy(self: Any, exc: BaseException) -> bool:
        if isinstance(exc, self.psycopg.errors.DeadlockDetected):
            seen.append(exc)
        return real(self, exc)

    monkeypatch.setattr(_db.PostgresDB, "_retryable_rollback", spy)
    return seen


def _app(url: str, name: str, ran: list[str], lock: threading.Lock) -> App:
    app = App(url, poll=0.005, worker_id=name, lease=0.6)  # short lease: frequent heartbeats

    @app.step
    def work(p: int, k: int) -> int:
        with lock:
            ran.append(f"{p}.{k}")
        return p * 10 + k

    @app.workflow
    def kid(p: int, k: int) -> int:
        return work(p, k)

    @app.workflow
    async def parent(p: int) -> int:
        total = 0
        for k in range(KIDS):
            total += await app.child(kid, p, k)
        return total

    return app


def test_many_parents_and_children_on_two_workers_never_deadlock(
    pg_schema_url: str, deadlocks: list[BaseException]
) -> None:
    """30 parents x 3 children on two workers, while an operator cancels every third
    parent mid-flight (a cancel locks parent then children; a child's end locks child then
    parent unless ordered): no deadlock reported, every other parent finishes with its
    children's sum."""
    ran: list[str] = []
    lock = threading.Lock()
    apps = [_app(pg_schema_url, f"w{i}", ran, lock) for i in range(2)]
    stop = threading.Event()
    threads = [
        threading.Thread(target=Worker(a, concurrency=8).run, args=(stop,), daemon=True)
        for a in apps
    ]
    handles = [apps[0].enqueue("parent", p, run_id=f"p{p:02d}") for p in range(PARENTS)]
    doomed = [f"p{p:02d}" for p in range(0, PARENTS, 3)]
    rng = random.Random(13)
    try:
        for t in threads:
            t.start()
        for run_id in doomed:  # cancel while children start and end
            time.sleep(rng.uniform(0.0, 0.05))
            apps[1].cancel(run_id, reason="test")
        for h in handles:
            if h.run_id in doomed:
                continue
            p = int(h.run_id[1:])
            assert h.result(timeout=120) == sum(p * 10 + k for k in range(KIDS))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            open_ = [r for r in apps[0].list_runs() if r.status not in ("succeeded", "cancelled")]
            if not open_:
                break
            time.sleep(0.05)
        assert open_ == []
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=10)
        for a in apps:
            a.close()
    assert deadlocks == []
    kept = [p for p in range(PARENTS) if f"p{p:02d}" not in doomed]
    finished = {f"{p}.{k}" for p in kept for k in range(KIDS)}
    assert finished <= set(ran)


def test_a_childs_end_locks_its_parent_before_itself(pg_schema_url: str, pg_url: str) -> None:
    """Hold the parent's row locked from another connection as the child ends: the child's
    finishing transaction waits for the parent *before* it locks the child's own row (run-id
    order), so the child's row stays free meanwhile; the other order (child, then parent)
    is the half of a deadlock with any transaction that locks parent, then child."""
    import psycopg

    schema = pg_schema_url.split("schema=", 1)[1]
    app = App(pg_schema_url, poll=0.005, worker_id="w", lease=30.0)
    inside, go = threading.Event(), threading.Event()

    @app.step
    def slow() -> int:
        inside.set()
        go.wait(30)
        return 7

    @app.workflow
    def kid() -> int:
        return slow()

    @app.workflow
    def parent() -> int:
        return app.child(kid) + 1  # type: ignore[no-any-return]

    stop = threading.Event()
    t = threading.Thread(target=Worker(app, concurrency=4).run, args=(stop,), daemon=True)
    h = app.enqueue(parent, run_id="p")
    holder = psycopg.connect(pg_url)
    probe = psycopg.connect(pg_url, autocommit=True)
    try:
        t.start()
        assert inside.wait(30)
        for c in (holder, probe):
            c.execute(f"SET search_path TO {schema}")
        holder.execute("SELECT 1 FROM durable_runs WHERE run_id = 'p' FOR UPDATE")
        go.set()
        waiting = (  # blocked by the holder itself, not by another test's lock
            "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid)) "
            "AND query LIKE %s"
        )
        blocker = holder.info.backend_pid
        end = time.monotonic() + 30
        while time.monotonic() < end:  # the child's finish is blocked on the parent's row
            row = probe.execute(waiting, (blocker, "%durable_runs%")).fetchone()
            if row is not None and row[0] >= 1:
                break
            time.sleep(0.02)
        else:
            raise AssertionError("the child's finish never waited for its parent's row")
        with probe.transaction():
            got = probe.execute(
                "SELECT status FROM durable_runs WHERE run_id = 'p:1' FOR UPDATE NOWAIT"
            ).fetchone()
        assert got == ("running",)  # not locked by the waiting finish, not finished yet
        holder.rollback()
        assert h.result(timeout=30) == 8
    finally:
        go.set()
        holder.close()
        probe.close()
        stop.set()
        t.join(timeout=10)
        app.close()


def test_a_child_committed_while_its_tree_is_cancelled_is_cancelled_with_it(
    pg_schema_url: str,
) -> None:
    """A child's creation holds its parent's row (share) as an operator cancels the parent:
    the cancel, which read the tree before the child existed, waits for that row, then
    reads the tree again and cancels the child too (before: it cancelled the parent only,
    and the child, committed meanwhile, ran on)."""
    from surefoot.durable._newrun import RunOptions
    from surefoot.storage.runs import ChildWrite, StepWrite

    app = App(pg_schema_url, poll=0.005, worker_id="w", lease=30.0)

    @app.workflow
    def kid() -> int:
        return 1

    @app.workflow
    def parent() -> int:
        return 0

    st = storage.open(pg_schema_url)  # the SQL journal itself: its children part, its dialect
    try:
        journal: Any = st.journal()
        app.enqueue(parent, run_id="p")
        now = time.time()
        ((_, epoch),) = journal.claim("w", now=now, lease_until=now + 30, workflows=[],
                                      limit=1, run_id="p")  # fmt: skip
        child, _ = app.new_runs.row(kid, (), {}, "p:1", RunOptions(parent="p"))
        wait = StepWrite("p", epoch, "1", "child:kid", "child", "waiting", "{}", None, 1, now, None)
        inside, go = threading.Event(), threading.Event()
        pid: list[int] = []
        applied: list[int] = []

        def create(c: Any) -> None:
            applied.append(journal.children.write_child(c, ChildWrite(wait, child)).rowcount)
            pid.append(c.execute("SELECT pg_backend_pid()").fetchone()[0])
            inside.set()
            go.wait(30)

        creator = threading.Thread(target=journal.d.transaction, args=(create,))
        creator.start()
        assert inside.wait(30)
        cancelled: list[list[str]] = []
        canceller = threading.Thread(
            target=lambda: cancelled.append(
                journal.children.cancel_tree("p", now=time.time(), actor="operator", detail="{}")
            )
        )
        canceller.start()
        end = time.monotonic() + 30
        while not journal.d.read(
            "SELECT 1 FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))", (pid[0],)
        ):
            assert time.monotonic() < end, "the cancel never waited for the child's creation"
            time.sleep(0.01)
        go.set()
        creator.join(timeout=30)
        canceller.join(timeout=30)
        assert applied == [1]
        assert cancelled == [["p", "p:1"]]
        assert {r.run_id: r.status for r in app.list_runs()} == {
            "p": "cancelled",
            "p:1": "cancelled",
        }
        (entry,) = [a for a in app.show("p:1").audit if a.action == "cancel"]
        assert entry.detail == {"parent_cancelled": "p"}
    finally:
        app.close()
        st.close()
