"""§2: ambiguous commits. FaultProxy forwards a write to PostgreSQL or Redis, lets the
server apply it, then drops the answer and cuts the connection. Each part of surefoot must
resolve the unknown outcome itself: the write is found applied once (and answered as such)
or not applied (and then sent again), never applied twice, never lost; and every call
returns within its timeout once the fault heals."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from surefoot.testing import FaultProxy

pytestmark = pytest.mark.services


@pytest.fixture
def pg_schema_url(pg_url: str) -> Iterator[str]:
    url = f"{pg_url}?schema=sf_amb_{uuid.uuid4().hex[:10]}&reconnect_timeout=10"
    yield url
    from surefoot import storage

    st: Any = storage.open(url)
    st.db.drop_schema()
    st.close()


@pytest.fixture
def redis_prefix_url(redis_url: str) -> Iterator[str]:
    url = f"{redis_url}?prefix=sf_amb_{uuid.uuid4().hex[:10]}&reconnect_timeout=10"
    yield url
    from surefoot import storage

    st: Any = storage.open(url)
    st.db.delete_prefix()
    st.close()


def versions(store: Any, key: str) -> list[Any]:
    return [c.value for c in store.history(key)]


# -- the state store -------------------------------------------------------------------------


@pytest.mark.parametrize("expect", [0, None])
def test_postgres_store_write_resolves_a_dropped_commit_reply(
    pg_schema_url: str, expect: int | None
) -> None:
    """A write (compare-and-set and blind) whose commit answer is lost is found applied
    and answered with its version; it is in the history once."""
    from surefoot.statebus import Store

    with FaultProxy(pg_schema_url) as proxy:
        store, direct = Store(proxy.url), Store(pg_schema_url)
        try:
            store.write("warm", 0)
            proxy.drop_reply_to_commit(implicit=True, matching="unsure-key")
            e = store.write("unsure-key", "v1", expect=expect)
            assert (e.value, e.version) == ("v1", 1)
            assert proxy.counts().replies_dropped == 1
            assert versions(direct, "unsure-key") == ["v1"]
            assert store.write("unsure-key", "v2", expect=1).version == 2
        finally:
            store.close()
            direct.close()


@pytest.mark.parametrize("merge_id", ["m-1", None])
def test_postgres_store_merge_resolves_a_dropped_commit_reply(
    pg_schema_url: str, merge_id: str | None
) -> None:
    """A merge (with an id: sent again and deduplicated; without: found in the key's merge
    log) whose answer is lost is in the list once."""
    from surefoot.statebus import Store

    with FaultProxy(pg_schema_url) as proxy:
        store, direct = Store(proxy.url), Store(pg_schema_url)
        try:
            for s in (store, direct):
                s.declare_merge("notes", "append")
            store.merge("notes", "a")
            proxy.drop_reply_to_commit(implicit=True, matching="unsure-note")
            store.merge("notes", "unsure-note", id=merge_id)
            assert proxy.counts().replies_dropped == 1
            store.merge("notes", "c")
            e = direct.read("notes")
            assert e is not None and e.value == ["a", "unsure-note", "c"]
        finally:
            store.close()
            direct.close()


def test_postgres_stream_append_resolves_a_dropped_commit_reply(pg_schema_url: str) -> None:
    """An append whose answer is lost is sent again and found by its message id: one
    message, at one sequence number."""
    from surefoot.statebus import Stream

    with FaultProxy(pg_schema_url) as proxy:
        stream, direct = Stream(proxy.url, "s"), Stream(pg_schema_url, "s")
        try:
            stream.append("first", message_id="m0")
            proxy.drop_reply_to_commit(implicit=True, matching="unsure-msg")
            e = stream.append("payload", message_id="unsure-msg")
            assert proxy.counts().replies_dropped == 1
            assert [m.message_id for m in direct.read(0, 100)] == ["m0", "unsure-msg"]
            assert e.seq == 2
        finally:
            stream.close()
            direct.close()


def idempotency_key_runs_once(url: str, proxy: FaultProxy, drop: Any) -> None:
    """A claim (then a completion) whose answer is lost: the action runs once, the call
    returns its result, and a second executor replays it without running it."""
    from surefoot.resilience import IdempotentExecutor

    ran: list[str] = []

    def act(x: str) -> str:
        ran.append(x)
        return x.upper()

    ex, other = IdempotentExecutor(proxy.url, lease=30), IdempotentExecutor(url, lease=30)
    try:
        assert ex.run("warm", act, "w") == "W"
        drop("claim-key")  # the claim's insert
        assert ex.run("claim-key", act, "a") == "A"
        drop("done-key", complete=True)  # the completion's update
        assert ex.run("done-key", act, "b") == "B"
        assert proxy.counts().replies_dropped == 2
        assert other.run("claim-key", act, "a") == "A"
        assert other.run("done-key", act, "b") == "B"
        assert ran == ["w", "a", "b"]
    finally:
        ex.close()
        other.close()


def test_postgres_idempotency_key_resolves_dropped_commit_replies(pg_schema_url: str) -> None:
    with FaultProxy(pg_schema_url) as proxy:

        def drop(key: str, complete: bool = False) -> None:
            what = "UPDATE surefoot_keys" if complete else "INSERT INTO surefoot_keys"
            proxy.drop_reply_to_commit(implicit=True, matching=f"(?s){what}.*{key}")

        idempotency_key_runs_once(pg_schema_url, proxy, drop)


def journal_steps_once(url: str, proxy: FaultProxy, drop: Any) -> None:
    """A run whose step writes lose their answers: every step body runs once, the run
    finishes with the right result, and the journal holds each step once."""
    from surefoot import durable

    ran: list[str] = []
    app = durable.App(proxy.url)

    @app.step
    async def first(x: str) -> str:
        ran.append("first")
        return x + "1"

    @app.step(effect=True)
    async def second(x: str, *, key: str) -> str:
        ran.append("second")
        return x + "2"

    @app.workflow
    async def flow(x: str) -> str:
        return await second(await first(x))

    try:
        drop()
        assert app.start(flow, "x", run_id="amb-run").result(timeout=30) == "x12"
        assert proxy.counts().replies_dropped >= 2
        assert ran == ["first", "second"]
        steps = app.journal.steps("amb-run")
        assert [(s.name, s.status) for s in steps] == [("first", "done"), ("second", "done")]
    finally:
        app.close()


def test_postgres_journal_resolves_dropped_commit_replies(pg_schema_url: str) -> None:
    with FaultProxy(pg_schema_url) as proxy:
        journal_steps_once(
            pg_schema_url,
            proxy,
            lambda: proxy.drop_reply_to_commit(
                times=None, probability=0.5, implicit=True, matching="amb-run"
            ),
        )


# -- Redis: the same parts, a script call's answer dropped ---------------------------------


@pytest.mark.parametrize("expect", [0, None])
def test_redis_store_write_resolves_a_dropped_reply(
    redis_prefix_url: str, expect: int | None
) -> None:
    from surefoot.statebus import Store

    with FaultProxy(redis_prefix_url) as proxy:
        store, direct = Store(proxy.url), Store(redis_prefix_url)
        try:
            store.write("warm", 0)
            proxy.drop_reply_to_exec(matching="unsure-val")
            e = store.write("unsure-key", "unsure-val", expect=expect)
            assert (e.value, e.version) == ("unsure-val", 1)
            assert proxy.counts().replies_dropped == 1
            assert versions(direct, "unsure-key") == ["unsure-val"]
        finally:
            store.close()
            direct.close()


@pytest.mark.parametrize("merge_id", ["m-1", None])
def test_redis_store_merge_resolves_a_dropped_reply(
    redis_prefix_url: str, merge_id: str | None
) -> None:
    from surefoot.statebus import Store

    with FaultProxy(redis_prefix_url) as proxy:
        store, direct = Store(proxy.url), Store(redis_prefix_url)
        try:
            for s in (store, direct):
                s.declare_merge("notes", "append")
            store.merge("notes", "a")
            proxy.drop_reply_to_exec(matching="unsure-note")
            store.merge("notes", "unsure-note", id=merge_id)
            assert proxy.counts().replies_dropped == 1
            e = direct.read("notes")
            assert e is not None and e.value == ["a", "unsure-note"]
        finally:
            store.close()
            direct.close()


def test_redis_stream_append_resolves_a_dropped_reply(redis_prefix_url: str) -> None:
    from surefoot.statebus import Stream

    with FaultProxy(redis_prefix_url) as proxy:
        stream, direct = Stream(proxy.url, "s"), Stream(redis_prefix_url, "s")
        try:
            stream.append("first", message_id="m0")
            proxy.drop_reply_to_exec(matching="unsure-msg")
            e = stream.append("payload", message_id="unsure-msg")
            assert proxy.counts().replies_dropped == 1
            assert [m.message_id for m in direct.read(0, 100)] == ["m0", "unsure-msg"]
            assert e.seq == 2
        finally:
            stream.close()
            direct.close()


def test_redis_offers_no_journal_and_no_idempotency_store(redis_prefix_url: str) -> None:
    """Redis acknowledges before its disk has a write: the journal and the idempotency
    store refuse it, so their ambiguous commits are PostgreSQL's and SQLite's only."""
    from surefoot import durable
    from surefoot.errors import ConfigError
    from surefoot.resilience import IdempotentExecutor

    with pytest.raises(ConfigError, match="does not offer the idempotency"):
        IdempotentExecutor(redis_prefix_url)
    app = durable.App(redis_prefix_url)
    with pytest.raises(ConfigError, match="does not offer the durable Journal"):
        app.journal.steps("x")
    app.close()


# -- every call returns once the fault heals -------------------------------------------------


@pytest.mark.parametrize("backend", ["postgres", "redis"])
def test_a_write_held_in_a_blackhole_returns_once_healed(
    backend: str, request: pytest.FixtureRequest
) -> None:
    """A write sent into a blackhole waits; after ``heal()`` it completes, once."""
    import threading

    from surefoot.statebus import Store

    url = request.getfixturevalue("pg_schema_url" if backend == "postgres" else "redis_prefix_url")
    with FaultProxy(url) as proxy:
        store, direct = Store(proxy.url), Store(url)
        try:
            store.write("warm", 0)
            proxy.blackhole()
            done: list[Any] = []
            t = threading.Thread(target=lambda: done.append(store.write("held", "v", expect=0)))
            t.start()
            t.join(1.0)
            assert t.is_alive() and not done  # held, not lost and not failed
            proxy.heal()
            t.join(15.0)
            assert not t.is_alive() and done[0].version == 1
            assert versions(direct, "held") == ["v"]
        finally:
            store.close()
            direct.close()


def test_postgres_write_cut_before_it_landed_is_sent_again_once(pg_schema_url: str) -> None:
    """The other outcome: a write waiting on a lock has its backend terminated, so it never
    landed. surefoot sees the old session gone, does not find the write, sends it again,
    and it lands once when the lock is released."""
    import threading
    import time

    import psycopg

    from surefoot.statebus import Store

    tag = f"sf_amb_{uuid.uuid4().hex[:8]}"
    url = f"{pg_schema_url}&application_name={tag}"
    schema = pg_schema_url.split("schema=")[1].split("&")[0]
    store = Store(url)
    locker = psycopg.connect(pg_schema_url.split("?")[0])
    try:
        store.write("warm", 0)
        locker.execute(f"SELECT 1 FROM {schema}.sf_state_ns FOR UPDATE")  # writers wait
        done: list[Any] = []
        t = threading.Thread(target=lambda: done.append(store.write("cut", "v", expect=0)))
        t.start()
        with psycopg.connect(pg_schema_url.split("?")[0], autocommit=True) as admin:
            waiting: list[Any] = []
            for _ in range(100):
                waiting = admin.execute(
                    "SELECT pid FROM pg_stat_activity WHERE application_name = %s "
                    "AND wait_event_type = 'Lock'",
                    (tag,),
                ).fetchall()
                if waiting:
                    break
                time.sleep(0.05)
            assert waiting, "the write never waited on the lock"
            admin.execute("SELECT pg_terminate_backend(%s)", (waiting[0][0],))
        time.sleep(0.5)
        locker.commit()  # the lock goes; the write sent again lands
        t.join(20)
        assert not t.is_alive() and done and done[0].version == 1
        assert versions(store, "cut") == ["v"]
    finally:
        locker.close()
        store.close()
