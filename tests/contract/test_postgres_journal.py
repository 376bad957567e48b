"""The PostgreSQL Journal, what only it does: one prepared statement (one round trip) per
journalled step and a pipelined batch, the epoch fence of a step sent during a takeover,
claims that skip a run whose step is in flight (SKIP LOCKED), and NOTIFY wake-ups.
Everything both journal backends do is in ``test_journal.py``."""

from __future__ import annotations

import tempfile
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from surefoot import storage
from surefoot.storage.postgres import PostgresStorage
from surefoot.storage.runs import RunRow, RunWrite, StepWrite

pytestmark = pytest.mark.services


def _url(pg_url: str) -> str:
    return f"{pg_url}?schema=sf_t_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def pg(pg_url: str) -> Iterator[PostgresStorage]:
    """A PostgresStorage on a fresh schema, dropped afterwards."""
    st = storage.open(_url(pg_url))
    assert isinstance(st, PostgresStorage)
    yield st
    st.db.drop_schema()
    st.close()


@pytest.fixture
def pg1(pg_url: str) -> Iterator[PostgresStorage]:
    """The same with a pool of one connection: every statement meets the same session."""
    st = storage.open(_url(pg_url) + "&pool_min=1&pool_max=1")
    assert isinstance(st, PostgresStorage)
    yield st
    st.db.drop_schema()
    st.close()


def _claimed(pg: PostgresStorage, run: str = "r") -> tuple[Any, int]:
    j = pg.journal()
    j.create_run(RunRow(run, "wf", "1", "h", "[]", "journal_keys", "pending", 1.0, 1.0))
    ((_, epoch),) = j.claim("w1", now=2.0, lease_until=10.0, workflows=[("wf", "1")], limit=1)
    return j, epoch


def _step(run: str, epoch: int, pos: str) -> StepWrite:
    return StepWrite(run, epoch, pos, "s", "pure", "done", '"x"', None, 1, 3.0, 3.0)


@contextmanager
def _wire(db: Any) -> Iterator[list[str]]:
    """The frontend messages sent on the wire meanwhile (libpq's trace), by name: ``Parse``,
    ``Bind``, ``Execute``, ``Sync`` (each Sync is one round trip) …"""
    from psycopg import pq

    sent: list[str] = []
    original = db.run

    def traced(fn: Any, **kw: Any) -> Any:
        def wrapped(conn: Any) -> Any:
            with tempfile.TemporaryFile("w+") as f:
                conn.pgconn.trace(f.fileno())
                conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS)
                try:
                    return fn(conn)
                finally:
                    conn.pgconn.untrace()
                    f.seek(0)
                    sent.extend(line.split("\t")[2].strip() for line in f if line[0] == "F")

        return original(wrapped, **kw)

    db.run = traced
    try:
        yield sent
    finally:
        del db.run


def test_one_step_is_one_statement_and_one_commit(pg1: PostgresStorage) -> None:
    """Journalling a step costs one round trip (its prepared statement: no parse, no plan)
    and one commit; a batch is one pipelined round trip and one commit."""
    j, epoch = _claimed(pg1)
    db = pg1.db
    assert j.commit([_step("r", epoch, "1")]) == [True]  # prepares on its connection
    c0 = db.commits
    with _wire(db) as sent:
        assert j.commit([_step("r", epoch, "2")]) == [True]
    assert sent.count("Sync") == 1 and sent.count("Execute") == 1 and "Parse" not in sent
    assert db.commits - c0 == 1
    with _wire(db) as sent:
        assert j.commit([_step("r", epoch, "3"), _step("r", epoch, "4")]) == [True, True]
    assert db.commits - c0 == 2
    assert sent.count("Sync") == 1 and sent.count("Execute") == 4  # BEGIN, 2 steps, COMMIT
    assert [s.pos for s in j.steps("r")] == ["1", "2", "3", "4"]


def test_a_step_whose_session_was_killed_is_sent_again_on_a_new_one(
    pg: PostgresStorage, pg_url: str
) -> None:
    """The server ends the session a step's statement is prepared on (a restart, a killed
    backend): the next step reconnects, prepares it on the new session and is written."""
    import psycopg

    j, epoch = _claimed(pg)
    assert j.commit([_step("r", epoch, "1")]) == [True]
    # statements one after another share one session (the lane): step 1's, and this one's
    ((pid, prepared),) = pg.db.execute(
        "SELECT pg_backend_pid(), count(*) FROM pg_prepared_statements "
        "WHERE statement LIKE 'INSERT INTO durable_steps%'",
        write=False,
    )
    assert prepared == 1
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    assert j.commit([_step("r", epoch, "2")]) == [True]
    assert [s.pos for s in j.steps("r")] == ["1", "2"]


def test_a_step_is_sent_in_the_connections_client_encoding(pg_url: str) -> None:
    """Text parameters travel in the session's client encoding (here LATIN1), as psycopg
    sends them: a non-ASCII result reads back unchanged."""
    st = storage.open(_url(pg_url) + "&client_encoding=LATIN1")
    assert isinstance(st, PostgresStorage)
    try:
        j, epoch = _claimed(st)
        step = StepWrite("r", epoch, "1", "s", "pure", "done", '"café"', None, 1, 3.0, 3.0)
        assert j.commit([step]) == [True]
        assert [s.result for s in j.steps("r")] == ['"café"']
    finally:
        st.db.drop_schema()
        st.close()


def test_prepared_types_must_fit_the_placeholders(pg: PostgresStorage) -> None:
    """A prepared write given the wrong number (or an unknown kind) of types says so."""
    with pytest.raises(ValueError, match="one type per"):
        pg.db.prepared("INSERT INTO t VALUES (%s, %s)", ("text",), idempotent=True)
    with pytest.raises(ValueError, match="int4, int8, float8"):
        pg.db.prepared("INSERT INTO t VALUES (%s)", ("jsonb",), idempotent=True)


def test_a_runs_end_alone_is_one_prepared_statement(pg1: PostgresStorage) -> None:
    """A run's end with no parent (its update and audit entries) is one prepared statement:
    one round trip, one commit, nothing parsed once prepared."""
    j = pg1.journal()
    db = pg1.db
    for run in ("a", "b"):
        j.create_run(RunRow(run, "wf", "1", "h", "[]", "journal_keys", "running", 1.0, 1.0))
    done = [("claimed", "{}"), ("finished", "{}")]
    assert j.commit([RunWrite("a", 0, "succeeded", 5.0, "w", result="1", audit=done)]) == [True]
    c0 = db.commits
    with _wire(db) as sent:
        end = RunWrite("b", 0, "failed", 5.0, "w", error='"e"', audit=done)
        assert j.commit([end]) == [True]
    assert sent.count("Sync") == 1 and sent.count("Execute") == 1 and "Parse" not in sent
    assert db.commits - c0 == 1
    assert [a.action for a in j.audit_log("b")] == ["created", "claimed", "finished"]


def test_a_step_sent_during_a_takeover_waits_for_it_and_is_refused(pg: PostgresStorage) -> None:
    """A zombie's step that reaches the server while a takeover's UPDATE of the run is not
    yet committed waits for it (the step's FOR SHARE on the run row), then sees the new
    epoch and inserts nothing: no row of the old epoch lands after the takeover."""
    j, old = _claimed(pg)
    assert j.commit([_step("r", old, "1")]) == [True]  # prepared on a connection already
    got: list[list[bool]] = []
    with pg.db.pool.connection() as conn:
        with conn.transaction():
            take = "UPDATE durable_runs SET epoch = epoch + 1, owner = 'w2' WHERE run_id = 'r'"
            conn.execute(take)
            t = threading.Thread(target=lambda: got.append(j.commit([_step("r", old, "2")])))
            t.start()
            t.join(0.5)
            assert t.is_alive() and got == []  # the step waits for the takeover
        t.join(10)
    assert got == [[False]]
    assert [(s.pos, s.epoch) for s in j.steps("r")] == [("1", old)]


def test_a_step_is_prepared_again_after_psycopg_deallocates_everything(
    pg1: PostgresStorage,
) -> None:
    """psycopg sends DEALLOCATE ALL when it rolls back a connection where it prepared
    statements; the next step on that connection prepares its own again and is written."""
    j, epoch = _claimed(pg1)
    assert j.commit([_step("r", epoch, "1")]) == [True]
    pg1.db.execute("DEALLOCATE ALL", write=False)  # on the one connection
    with _wire(pg1.db) as sent:
        assert j.commit([_step("r", epoch, "2")]) == [True]
    assert sent.count("Parse") == 1 and sent.count("Execute") == 2  # refused, prepared, sent
    assert [s.pos for s in j.steps("r")] == ["1", "2"]


def test_claims_skip_a_run_whose_step_is_in_flight_and_fence_it_after(
    pg: PostgresStorage,
) -> None:
    """While a step holds the run row (FOR SHARE), the queue claim skips the run (SKIP LOCKED)
    and a claim of that run waits; after the step commits, the takeover fences the writer."""
    from surefoot.storage.sql.schema import STEP_SQL, step_params

    j, old = _claimed(pg)
    _STEP_SQL, _step_params = j.d.sql(STEP_SQL.format(share_lock=j.d.share_lock)), step_params
    args = {"now": 11.0, "lease_until": 20.0, "workflows": [("wf", "1")], "limit": 1}
    taken: list[Any] = []
    with pg.db.pool.connection() as conn:
        with conn.transaction():
            assert conn.execute(_STEP_SQL, _step_params(_step("r", old, "1"))).rowcount == 1
            assert j.claim("w2", **args) == []
            t = threading.Thread(target=lambda: taken.extend(j.claim("w2", **args, run_id="r")))
            t.start()
            t.join(0.3)
            assert taken == [] and t.is_alive()
        t.join(10)
    assert taken == [("r", old + 1)]
    assert [s.pos for s in j.steps("r")] == ["1"]
    assert j.commit([_step("r", old, "2")]) == [False]


def test_a_signal_sent_while_the_run_goes_to_sleep_is_not_lost(pg: PostgresStorage) -> None:
    """A signal committed after the sleep statement began but before it updated the run row
    still wakes the run (READ COMMITTED: the sleep's look for a waiting signal must not use
    a snapshot from before the signal, nor the signal's wake-up see the run still running).

    Another transaction holds the run row (FOR SHARE) so the sleep blocks mid-statement,
    the signal is sent meanwhile, then the holder lets go. Before the fix the run was left
    sleeping with no wake time and its signal queued (2 of 200 agent runs in
    bench_postgres.py with 4 workers)."""
    j, epoch = _claimed(pg)
    sleep = RunWrite("r", epoch, "sleeping", 4.0, "w1", waiting_for="approve")
    done: list[Any] = []
    with pg.db.pool.connection() as conn:
        with conn.transaction():
            conn.execute("SELECT 1 FROM durable_runs WHERE run_id = 'r' FOR SHARE")
            sleeper = threading.Thread(target=lambda: done.append(j.commit([sleep])))
            sleeper.start()
            sleeper.join(0.3)  # the sleep's UPDATE now waits for the row
            signaller = threading.Thread(
                target=lambda: done.append(
                    j.signal("r", "approve", '{"ok": true}', now=5.0, signal_id="s1")
                )
            )
            signaller.start()
            signaller.join(0.3)
        sleeper.join(10)
        signaller.join(10)
    assert sorted(map(str, done)) == ["True", "[True]"]
    row = j.get_run("r")
    assert row is not None and row.status == "sleeping" and row.wake_at is not None
    got = j.claim("w2", now=6.0, lease_until=20.0, workflows=[("wf", "1")], limit=1)
    assert got == [("r", epoch + 1)]


def test_a_signal_does_not_wait_for_a_heartbeat_holding_the_run(pg: PostgresStorage) -> None:
    """A signal's lock on the run row (FOR KEY SHARE) does not conflict with the lock a
    heartbeat or a claim holds (FOR NO KEY UPDATE): sending it never waits on them, so a
    child's end that signals its parent cannot deadlock with the parent's heartbeat."""
    j, _ = _claimed(pg)
    sent: list[bool] = []
    with pg.db.pool.connection() as conn, conn.transaction():
        conn.execute("SELECT 1 FROM durable_runs WHERE run_id = 'r' FOR NO KEY UPDATE")
        t = threading.Thread(
            target=lambda: sent.append(j.signal("r", "go", "1", now=5.0, signal_id="s"))
        )
        t.start()
        t.join(10)
        assert sent == [True]  # done while the row is still held


def test_new_runs_and_signals_wake_a_waiting_worker(pg: PostgresStorage) -> None:
    """waking.wait_for_work returns on timeout, and returns True when a pending run is created or a
    signal wakes a sleeping run."""
    j = pg.journal()
    try:
        assert j.waking.wait_for_work(0.05) is False
        j.create_run(RunRow("a", "wf", "1", "h", "[]", "journal_keys", "pending", 1.0, 1.0))
        assert j.waking.wait_for_work(5.0) is True
        j.create_run(RunRow("b", "wf", "1", "h", "[]", "journal_keys", "pending", 1.0, 1.0))
        ((_, e),) = j.claim("w", now=2.0, lease_until=9.0, workflows=[], limit=1, run_id="b")
        j.waking.wait_for_work(0.05)  # drain
        sleep = RunWrite("b", e, "sleeping", 3.0, "w", waiting_for="go")
        assert j.commit([sleep]) == [True]
        assert j.waking.wait_for_work(0.05) is False
        assert j.signal("b", "go", "1", now=4.0, signal_id=None)
        assert j.waking.wait_for_work(5.0) is True
    finally:
        j.close()
