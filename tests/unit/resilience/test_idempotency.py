"""IdempotentExecutor: once per key, conflicts, in-progress, expiry, restarts, real races."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from surefoot import FakeClock, storage
from surefoot.errors import (
    EncodeError,
    IdempotencyConflictError,
    IdempotencyInProgressError,
    SchemaVersionError,
    StoreUnavailableError,
)
from surefoot.resilience import IdempotentExecutor, retry_call


def charge(log: list[int], amount: int) -> dict[str, int]:
    log.append(amount)
    return {"charged": amount}


@pytest.fixture(params=["memory", "sqlite"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A storage URL per backend."""
    return "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'k.db'}"


def test_runs_once_and_replays_the_result(url: str) -> None:
    """The second call with a key returns the saved result without running the action."""
    ex = IdempotentExecutor(storage.open(url))
    log: list[int] = []
    fn = lambda amount: charge(log, amount)  # noqa: E731 - the log is not an argument
    assert ex.run("pay-1", fn, 5) == {"charged": 5}
    assert ex.run("pay-1", fn, 5) == {"charged": 5}
    assert log == [5] and ex.runs == 1 and ex.replays == 1


def test_key_reused_with_other_arguments_is_a_conflict(url: str) -> None:
    """Same key, different amount: IdempotencyConflictError naming the key."""
    ex = IdempotentExecutor(storage.open(url))
    ex.run("pay-1", lambda a: a, 5)
    with pytest.raises(IdempotencyConflictError, match="pay-1"):
        ex.run("pay-1", lambda a: a, 6)


def test_failed_action_releases_the_key(url: str) -> None:
    """An action that raises leaves no record; the next call runs it again."""
    ex = IdempotentExecutor(storage.open(url))
    n = {"c": 0}

    def flaky(x: int) -> int:
        n["c"] += 1
        if n["c"] == 1:
            raise RuntimeError("boom")
        return x

    with pytest.raises(RuntimeError):
        ex.run("k", flaky, 1)
    assert ex.run("k", flaky, 1) == 1 and n["c"] == 2


def test_in_progress_raises_or_waits(url: str) -> None:
    """A key running in another thread raises InProgress, or with wait=True returns its result."""
    st = storage.open(url)
    first = IdempotentExecutor(st)
    started, release = threading.Event(), threading.Event()

    def slow(x: int) -> int:
        started.set()
        release.wait(5)
        return x * 10

    t = threading.Thread(target=first.run, args=("k", slow, 4))
    t.start()
    assert started.wait(5)
    with pytest.raises(IdempotencyInProgressError, match="wait=True"):
        IdempotentExecutor(st).run("k", slow, 4)
    waiter = IdempotentExecutor(st, wait=True, poll=0.01, wait_timeout=10)
    out: list[int] = []
    w = threading.Thread(target=lambda: out.append(waiter.run("k", slow, 4)))
    w.start()
    release.set()
    t.join(5)
    w.join(5)
    assert out == [40] and waiter.runs == 0


def test_results_expire_after_ttl() -> None:
    """After ttl the key counts as new and the action runs again."""
    clock = FakeClock()
    ex = IdempotentExecutor("memory://", ttl=60, clock=clock)
    log: list[int] = []
    ex.run("k", lambda: log.append(1))
    clock.advance(59)
    ex.run("k", lambda: log.append(1))
    clock.advance(2)
    ex.run("k", lambda: log.append(1))
    assert log == [1, 1]


def test_unencodable_result_is_a_clear_error_and_releases(url: str) -> None:
    """A result that is not JSON raises EncodeError and leaves the key free."""
    ex = IdempotentExecutor(storage.open(url))
    with pytest.raises(EncodeError):
        ex.run("k", lambda: object())
    assert ex.store.get("k") is None


def test_async_run(url: str) -> None:
    """arun runs the coroutine once per key."""
    ex = IdempotentExecutor(storage.open(url))
    n = {"c": 0}

    async def work(x: int) -> int:
        n["c"] += 1
        return x + 1

    assert asyncio.run(ex.arun("k", work, 1)) == 2
    assert asyncio.run(ex.arun("k", work, 1)) == 2
    assert n["c"] == 1


def test_foreign_database_is_refused_untouched(tmp_path: Path) -> None:
    """A SQLite file of another program raises SchemaVersionError and keeps its data."""
    path = tmp_path / "other.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE customers (id INTEGER)")
    con.execute("INSERT INTO customers VALUES (7)")
    con.commit()
    con.close()
    with pytest.raises(SchemaVersionError, match="not a surefoot database"):
        IdempotentExecutor(f"sqlite:///{path}")
    con = sqlite3.connect(path)
    assert con.execute("SELECT id FROM customers").fetchall() == [(7,)]
    assert con.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall() == [
        ("customers",)
    ]
    con.close()


RACER = textwrap.dedent(
    """
    import sys, time
    from surefoot.resilience import IdempotentExecutor
    db, marker, start = sys.argv[1], sys.argv[2], float(sys.argv[3])

    def act(x):
        with open(marker, "a") as f:
            f.write("ran\\n")
        time.sleep(0.3)
        return {"order": x}

    ex = IdempotentExecutor(f"sqlite:///{db}", wait=True, poll=0.02, wait_timeout=20)
    while time.time() < start:
        time.sleep(0.001)
    print(ex.run("order-1", act, 42)["order"], ex.runs, flush=True)
    """
)


@pytest.mark.crash
def test_two_processes_racing_run_the_action_once(tmp_path: Path) -> None:
    """Two real processes start run() on one key together: one runs it, both get its result."""
    import time

    db, marker = tmp_path / "race.db", tmp_path / "ran.txt"
    start = time.time() + 1.0
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, str(db), str(marker), str(start)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outs = []
    for p in procs:
        out, _ = p.communicate(timeout=60)
        assert p.returncode == 0
        outs.append(out.split())
    assert marker.read_text().count("ran") == 1
    assert sorted(o[1] for o in outs) == ["0", "1"]  # exactly one process ran it
    assert all(o[0] == "42" for o in outs)


def test_unreadable_database_is_a_clear_error_and_untouched(tmp_path: Path) -> None:
    """A file that is not SQLite raises StoreUnavailableError and keeps its bytes."""
    path = tmp_path / "garbage.db"
    data = b"this is not a database" * 100
    path.write_bytes(data)
    with pytest.raises(StoreUnavailableError, match="not a SQLite"):
        IdempotentExecutor(f"sqlite:///{path}")
    assert path.read_bytes() == data


def test_non_callables_are_type_errors() -> None:
    """run() and retry_call() name a non-callable instead of failing obscurely."""
    with pytest.raises(TypeError, match="needs an action"):
        IdempotentExecutor("memory://").run("k", 42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="needs a function"):
        retry_call(42)  # type: ignore[arg-type]


class _ReleaseFails:
    """A KeyStore whose release() fails as if the database went away (the rest works)."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.release_calls = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def claim(self, *a: object) -> object:
        return self.inner.claim(*a)  # type: ignore[attr-defined]

    def complete(self, *a: object) -> object:
        return self.inner.complete(*a)  # type: ignore[attr-defined]

    def get(self, *a: object) -> object:
        return self.inner.get(*a)  # type: ignore[attr-defined]

    def delete(self, *a: object) -> object:
        return self.inner.delete(*a)  # type: ignore[attr-defined]

    def purge(self, *a: object) -> object:
        return self.inner.purge(*a)  # type: ignore[attr-defined]

    def release(self, key: str, owner: str) -> bool:
        self.release_calls += 1
        raise StoreUnavailableError("sqlite:///gone.db", "the database is gone")


def test_a_failed_release_does_not_hide_the_actions_error() -> None:
    """The action's own error propagates (with a note) when the key cannot be released."""
    clock = FakeClock()
    st = _ReleaseFails(storage.open("memory://").keystore())
    ex = IdempotentExecutor(st, clock=clock, lease=60)
    calls = []

    def boom(x: int) -> int:
        calls.append(x)
        raise ValueError("card declined")

    with pytest.raises(ValueError, match="card declined") as info:
        ex.run("k", boom, 1)
    assert st.release_calls == 1
    assert any("stays claimed" in n for n in info.value.__notes__)
    with pytest.raises(IdempotencyInProgressError):  # still claimed: the lease holds it
        ex.run("k", boom, 1)
    clock.advance(60)  # the lease ended: a retry runs the action again
    with pytest.raises(ValueError):
        ex.run("k", boom, 1)
    assert calls == [1, 1]


def test_a_cancelled_async_action_releases_its_key(url: str) -> None:
    """Cancelling arun mid-action frees the key, so the next call runs the action."""
    ex = IdempotentExecutor(storage.open(url))
    runs: list[int] = []

    async def action(x: int) -> int:
        runs.append(x)
        if len(runs) == 1:
            await asyncio.sleep(3600)
        return x

    async def main() -> int:
        task = asyncio.create_task(ex.arun("k", action, 7))
        while not runs:
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return await ex.arun("k", action, 7)

    assert asyncio.run(main()) == 7 and runs == [7, 7]


def test_a_foreign_keys_table_is_refused_untouched(tmp_path: Path) -> None:
    """A surefoot file with a surefoot_keys table surefoot did not create: a clear error."""
    path = tmp_path / "mixed.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE surefoot_schema (component TEXT PRIMARY KEY, version INTEGER)")
    con.execute("CREATE TABLE surefoot_keys (x)")
    con.execute("INSERT INTO surefoot_keys VALUES (1)")
    con.commit()
    con.close()
    with pytest.raises(SchemaVersionError, match="did not create"):
        IdempotentExecutor(f"sqlite:///{path}")
    con = sqlite3.connect(path)
    assert con.execute("SELECT x FROM surefoot_keys").fetchall() == [(1,)]
    con.close()


def test_a_database_from_a_newer_surefoot_is_refused_untouched(tmp_path: Path) -> None:
    """A keys schema version above this surefoot's raises SchemaVersionError, changes nothing."""
    path = tmp_path / "newer.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE surefoot_schema (component TEXT PRIMARY KEY, version INTEGER)")
    con.execute("INSERT INTO surefoot_schema VALUES ('keys', 9)")
    con.commit()
    con.close()
    with pytest.raises(SchemaVersionError, match="newer"):
        IdempotentExecutor(f"sqlite:///{path}")
    con = sqlite3.connect(path)
    assert con.execute("SELECT * FROM surefoot_schema").fetchall() == [("keys", 9)]
    assert con.execute("SELECT count(*) FROM sqlite_master").fetchone() == (2,)
    con.close()


def test_an_expired_key_is_new_on_every_backend_even_with_other_arguments(url: str) -> None:
    """Before ttl other arguments conflict; after it the key is free, purge drops only the old."""
    clock = FakeClock()
    ex = IdempotentExecutor(storage.open(url), ttl=60, clock=clock)
    log: list[int] = []

    def pay(amount: int) -> dict[str, int]:
        log.append(amount)
        return {"charged": amount}

    assert ex.run("k", pay, 5) == {"charged": 5}
    ex.run("other", pay, 1)
    clock.advance(59)
    with pytest.raises(IdempotencyConflictError):
        ex.run("k", pay, 7)
    clock.advance(1)  # exactly ttl: expired
    assert ex.run("k", pay, 7) == {"charged": 7}
    assert log == [5, 1, 7]
    assert ex.purge() == 1  # "other" expired too; "k" was just renewed
    assert ex.run("k", pay, 7) == {"charged": 7} and log == [5, 1, 7]
