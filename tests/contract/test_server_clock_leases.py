"""Leases on PostgreSQL and Redis are judged on the server's clock (``ServerClock``) when the
holder uses the real clock, at no extra round trip per claim or renewal; a FakeClock keeps
driving time (docs/reliability.md §3)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from surefoot import durable, storage
from surefoot.clock import FakeClock, ServerClock
from surefoot.resilience import IdempotentExecutor
from surefoot.statebus import Store
from surefoot.storage.runs import RunRow

pytestmark = pytest.mark.services


@pytest.fixture
def pg(pg_url: str) -> Iterator[str]:
    url = f"{pg_url}?schema=sf_t_{uuid.uuid4().hex[:12]}"
    yield url
    st = storage.open(url)
    st.db.drop_schema()  # type: ignore[attr-defined]
    st.close()


def test_an_app_on_postgres_uses_the_database_clock_unless_given_a_fake_one(pg: str) -> None:
    app = durable.App(pg)
    app.journal  # noqa: B018 - opens the storage
    first = app.clock
    assert isinstance(first, ServerClock)
    app.close()
    app.journal  # noqa: B018 - reopened: the new storage's clock
    assert isinstance(app.clock, ServerClock) and app.clock is not first
    app.close()
    fake = FakeClock()
    app = durable.App(pg, clock=fake)
    app.journal  # noqa: B018
    assert app.clock is fake
    app.close()


def _pending(journal: object, n: int) -> None:
    t = time.time()
    for _ in range(n):
        row = RunRow(
            run_id=uuid.uuid4().hex, workflow="wf", version="1", structure_hash="",
            args="[[], {}]", strategy="journal", status="pending", created_at=t, updated_at=t,
        )  # fmt: skip
        journal.create_run(row)  # type: ignore[attr-defined]


def test_claims_and_renewals_on_the_database_clock_cost_no_extra_round_trip(pg: str) -> None:
    st = storage.open(pg)
    j = st.journal()
    server = st.server_clock()  # type: ignore[attr-defined]
    fake = FakeClock(start=time.time())

    def trips(clock: object, n: int = 10) -> int:
        _pending(j, n)
        before = st.db.round_trips  # type: ignore[attr-defined]
        held: list[tuple[str, int]] = []
        for _ in range(n):
            now = clock.now()  # type: ignore[attr-defined]
            held += j.claim("w", now=now, lease_until=now + 60, workflows=[("wf", "1")], limit=1)
            now = clock.now()  # type: ignore[attr-defined]
            assert j.heartbeat("w", held, lease_until=now + 60, now=now) == []
        assert len(held) == n
        return st.db.round_trips - before  # type: ignore[attr-defined, no-any-return]

    server.now()  # the first reading (once per process, then every 30 s)
    assert trips(server) == trips(fake)  # 10 claims and 10 renewals each
    assert server.reads == 1
    st.close()


def test_idempotency_keys_and_store_locks_cost_no_extra_round_trip(pg: str) -> None:
    st = storage.open(pg)
    counted = st.db  # type: ignore[attr-defined]

    def key_trips(clock: object) -> int:
        ex = IdempotentExecutor(st, clock=clock)  # type: ignore[arg-type]
        ex.clock.now()
        before = counted.round_trips
        for i in range(5):
            ex.run(f"k-{uuid.uuid4().hex}", lambda i: i, i)
        return counted.round_trips - before  # type: ignore[no-any-return]

    def lock_trips(clock: object) -> int:
        store = Store(st, clock=clock)  # type: ignore[arg-type]
        store.clock.now()
        before = counted.round_trips
        for _ in range(5):
            lease = store.acquire(f"L-{uuid.uuid4().hex}", "me", ttl=30)
            assert lease is not None and store.release(lease)
        return counted.round_trips - before  # type: ignore[no-any-return]

    assert isinstance(IdempotentExecutor(st).clock, ServerClock)
    assert isinstance(Store(st).clock, ServerClock)
    assert key_trips(None) == key_trips(FakeClock(start=time.time()))
    assert lock_trips(None) == lock_trips(FakeClock(start=time.time()))
    st.close()


def test_a_store_on_redis_uses_the_servers_time(redis_url: str) -> None:
    url = f"{redis_url}?prefix=sf_t_{uuid.uuid4().hex[:8]}"
    store = Store(url)
    try:
        assert isinstance(store.clock, ServerClock)
        assert abs(store.clock.now() - time.time()) < 5  # local server: same machine
        assert store.clock.reads == 1  # type: ignore[attr-defined]
    finally:
        store.storage.db.delete_prefix()
        store.close()
