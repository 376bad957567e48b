"""Differential tests: memory, PostgreSQL and Redis answer every StateStore and StreamLog
operation exactly as the SQLite reference does, over seeded random operation sequences, and
the servers keep their guarantees with several processes writing at once."""

from __future__ import annotations

import multiprocessing as mp
import random
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from surefoot import storage
from surefoot.errors import ConfigError, ConflictError, DuplicateMessageError

pytestmark = pytest.mark.services

Op = tuple[Any, ...]


def _isolated(url: str) -> str:
    tag = f"sf_t_{uuid.uuid4().hex[:12]}"
    return f"{url}?schema={tag}" if url.startswith("postgresql") else f"{url}?prefix={tag}"


def _cleanup(st: Any) -> None:
    if hasattr(st.db, "drop_schema"):
        st.db.drop_schema()
    else:
        st.db.delete_prefix()
    st.close()


@pytest.fixture(params=["postgres", "redis"])
def backend_url(request: pytest.FixtureRequest) -> str:
    """An isolated URL (own schema or key prefix) on each server backend."""
    base = request.getfixturevalue("pg_url" if request.param == "postgres" else "redis_url")
    return _isolated(str(base))


@pytest.fixture
def opened(backend_url: str) -> Iterator[Any]:
    """The opened backend, cleaned up afterwards."""
    st = storage.open(backend_url)
    yield st
    _cleanup(st)


@pytest.fixture(params=["memory", "postgres", "redis"])
def candidate(request: pytest.FixtureRequest) -> Iterator[Any]:
    """Each backend compared with the SQLite reference: memory and both servers (isolated)."""
    if request.param == "memory":
        st = storage.open("memory://")
        yield st
        st.close()
        return
    base = request.getfixturevalue("pg_url" if request.param == "postgres" else "redis_url")
    st = storage.open(_isolated(str(base)))
    yield st
    _cleanup(st)


def _outcome(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except (ConfigError, ConflictError, DuplicateMessageError) as exc:
        return (type(exc).__name__, str(exc), getattr(exc, "version", None))


def _state_ops(seed: int, n: int = 200) -> list[Op]:
    rng = random.Random(seed)
    ops: list[Op] = []
    lease = 0  # the lease key's version: it is only ever written blind, so this is exact
    for i in range(n):
        key = f"k{rng.randrange(6)}"
        r = rng.random()
        if r < 0.05:
            lease += 1  # take the lease over: fences on the previous version now fail
            ops.append(("write", "lease", f'"holder{i}"', f"a{i % 3}", "t", None, None))
        elif r < 0.7:
            expect = rng.choice([None, None, 0, 1, 2, 3, rng.randrange(8)])
            held = rng.choice([lease, lease, max(0, lease - 1), lease + 1])
            fence = rng.choice([None, None, ("lease", held), ("nolease", rng.randrange(2))])
            trust = rng.choice(["t", "u"])
            ops.append(("write", key, f'"v{i}"', f"a{i % 3}", trust, expect, fence))
        elif r < 0.85:
            ops.append(("read", rng.choice([key, "lease"])))
        else:
            ops.append((rng.choice(["snapshot", "revision"]),))
    return ops


def _apply_state(st: Any, op: Op, now: float) -> Any:
    if op[0] == "write":
        _, key, value, author, trust, expect, fence = op
        return _outcome(
            lambda: st.write(
                key, value, author=author, trust=trust, expect=expect, now=now, fence=fence
            )
        )
    if op[0] == "read":
        return st.read(op[1])
    return getattr(st, op[0])()


def _stream_ops(seed: int, n: int = 250) -> list[Op]:
    rng = random.Random(seed)
    ops: list[Op] = []
    for _ in range(n):
        r = rng.random()
        c = rng.choice(["c1", "c2"])
        if r < 0.35:
            mid = f"m{rng.randrange(40)}"
            payload = rng.choice(['"a"', '"b"']) if rng.random() < 0.2 else f'"{mid}"'
            ops.append(("append", mid, payload, rng.choice([None, None, rng.randrange(30)])))
        elif r < 0.55:
            ops.append(("claim", c, rng.randrange(1, 5), rng.choice([2.0, 5.0]), rng.choice("wx")))
        elif r < 0.64:
            ops.append(("ack", c, rng.randrange(1, 30)))
        elif r < 0.68:
            ops.append(("ack_many", c, [rng.randrange(1, 30) for _ in range(rng.randrange(4))]))
        elif r < 0.76:
            ops.append(("nack", c, rng.randrange(1, 30), rng.choice([0.0, 4.0])))
        elif r < 0.83:
            ops.append(("reject", c, rng.randrange(1, 30), rng.choice(["bad", "poison"])))
        elif r < 0.88:
            some = [rng.randrange(1, 30) for _ in range(rng.randrange(1, 3))]
            ops.append(("redrive", c, rng.choice([None, some, some + some])))
        else:
            query = rng.choice(["dead_letters", "position", "pending", "last_seq", "range"])
            ops.append((query, c, rng.randrange(-1, 30), rng.choice([-1, 0, 1, 5, 100])))
    return ops


def _apply_stream(s: Any, op: Op, now: float) -> Any:
    name = op[0]
    if name == "append":
        return _outcome(lambda: s.append(op[1], op[2], now=now, expect_last_seq=op[3]))
    if name == "claim":
        return s.claim(
            op[1], limit=op[2], now=now, visibility_timeout=op[3], max_attempts=3, worker=op[4]
        )
    if name == "ack":
        return s.ack(op[1], op[2])
    if name == "ack_many":
        return s.ack_many(op[1], op[2])
    if name == "nack":
        return s.nack(op[1], op[2], now=now, delay=op[3])
    if name == "reject":
        return s.reject(op[1], op[2], reason=op[3], now=now)
    if name == "redrive":
        return s.redrive(op[1], op[2], now=now)
    if name == "last_seq":
        return s.last_seq()
    if name == "range":
        return _outcome(lambda: s.range(op[2], op[3]))
    return getattr(s, name)(op[1])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_statestore_matches_sqlite(candidate: Any, seed: int) -> None:
    """Every write, conflict, fence refusal, read, snapshot and revision equals SQLite's."""
    ref = storage.open("sqlite://").statestore("team")
    st = candidate.statestore("team")
    rng = random.Random(seed)
    now = 1_764_500_000.123456
    for op in _state_ops(seed):
        now += rng.choice([0.0, 0.25, 1.5])
        assert _apply_state(st, op, now) == _apply_state(ref, op, now), op
    assert st.snapshot() == ref.snapshot()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_stream_matches_sqlite(candidate: Any, seed: int) -> None:
    """Appends (dedup, payload mismatch, expect_last_seq), claims, redelivery, acks (one and
    batched), nacks, dead letters with reasons and history, redrives and ranges (including
    refused negative ones) all equal SQLite's."""
    ref = storage.open("sqlite://").stream("log")
    s = candidate.stream("log")
    rng = random.Random(seed)
    now = 1_764_500_000.5
    for op in _stream_ops(seed):
        now += rng.choice([0.0, 0.5, 1.25, 3.0])
        assert _apply_stream(s, op, now) == _apply_stream(ref, op, now), op
    for c in ("c1", "c2"):
        assert s.dead_letters(c) == ref.dead_letters(c)


def _key_ops(seed: int, n: int = 200) -> list[Op]:
    rng = random.Random(seed)
    ops: list[Op] = []
    for i in range(n):
        key, owner = f"k{rng.randrange(5)}", rng.choice(["p1", "p2"])
        r = rng.random()
        if r < 0.4:
            fp = rng.choice(["f1", "f1", "f2"])
            ops.append(("claim", key, fp, owner, rng.choice([0.5, 2.0, 10.0])))
        elif r < 0.6:
            ops.append(("complete", key, owner, f'"r{i}"', rng.choice([None, 1.0, 5.0])))
        elif r < 0.7:
            ops.append(("release", key, owner))
        elif r < 0.8:
            ops.append(("delete", key))
        elif r < 0.9:
            ops.append(("purge",))
        else:
            ops.append(("get", key))
    return ops


def _apply_keys(ks: Any, op: Op, now: float) -> Any:
    name = op[0]
    if name == "claim":
        return ks.claim(op[1], op[2], op[3], now, now + op[4])
    if name == "complete":
        return ks.complete(op[1], op[2], op[3], None if op[4] is None else now + op[4])
    if name == "purge":
        return ks.purge(now)
    return getattr(ks, name)(*op[1:])


@pytest.mark.parametrize("seed", [0, 1])
def test_keystore_matches_sqlite(pg_url: str, seed: int) -> None:
    """PostgreSQL claims, take-overs of expired and abandoned keys, completes, releases and
    purges equal SQLite's (Redis does not offer a KeyStore)."""
    st = storage.open(_isolated(pg_url))
    try:
        ref = storage.open("sqlite://").keystore()
        ks = st.keystore()
        rng = random.Random(seed)
        now = 1_764_500_000.25
        for op in _key_ops(seed):
            now += rng.choice([0.0, 0.5, 1.5, 4.0])
            assert _apply_keys(ks, op, now) == _apply_keys(ref, op, now), op
    finally:
        _cleanup(st)


def _claim_one(url: str, worker: int) -> bool:
    """Try to claim the shared key; True if this process won it."""
    st = storage.open(url)
    won, _ = st.keystore().claim("charge-42", "fp", f"p{worker}", 100.0, 200.0)
    st.close()
    return bool(won)


def test_one_of_many_processes_wins_a_key(pg_url: str) -> None:
    """Six processes claiming one idempotency key at once: exactly one wins."""
    url = _isolated(pg_url)
    st = storage.open(url)
    st.keystore()  # migrate first, so the race is on the claim itself
    try:
        with mp.get_context("spawn").Pool(6) as pool:
            wins = pool.starmap(_claim_one, [(url, w) for w in range(6)])
        assert sum(wins) == 1
    finally:
        _cleanup(st)


def test_namespaces_and_streams_do_not_meet(opened: Any) -> None:
    """Two namespaces (and two streams) in one store keep separate keys, revisions, seqs."""
    a, b = opened.statestore("a"), opened.statestore("b")
    a.write("k", '"1"', author="x", trust="t", expect=None, now=1.0)
    assert b.read("k") is None and b.revision() == 0 and a.revision() == 1
    s1, s2 = opened.stream("one"), opened.stream("two")
    s1.append("m", '"p"', now=1.0)
    assert s2.last_seq() == 0 and s2.append("m", '"q"', now=1.0).seq == 1


def _increment(url: str, worker: int, n: int) -> int:
    """Add ``n`` to a shared counter with optimistic retries; returns the conflicts met."""
    st = storage.open(url)
    store = st.statestore("team")
    conflicts = 0
    for _ in range(n):
        while True:
            cur = store.read("counter")
            version = cur.version if cur else 0
            value = int(cur.value) if cur else 0
            try:
                store.write(
                    "counter", str(value + 1), author=f"w{worker}", trust="t", expect=version, now=0
                )
                break
            except ConflictError:
                conflicts += 1
    st.close()
    return conflicts


def _append_many(url: str, worker: int, n: int) -> None:
    """Append ``n`` messages of this worker, each twice (the retry must be deduplicated)."""
    st = storage.open(url)
    log = st.stream("log")
    for i in range(n):
        for _ in range(2):
            log.append(f"w{worker}-{i}", f'"{worker}:{i}"', now=float(i))
    st.close()


def test_concurrent_processes_lose_no_update_and_no_message(backend_url: str) -> None:
    """Four processes incrementing one key with version checks and appending to one stream
    lose no increment, write one revision per success, and leave seqs 1..N with no gap."""
    workers, n = 4, 25
    ctx = mp.get_context("spawn")
    with ctx.Pool(workers) as pool:
        pool.starmap(_increment, [(backend_url, w, n) for w in range(workers)])
        pool.starmap(_append_many, [(backend_url, w, n) for w in range(workers)])
    st = storage.open(backend_url)
    try:
        rec = st.statestore("team").read("counter")
        assert rec is not None and rec.value == str(workers * n)
        assert rec.version == workers * n == st.statestore("team").revision()
        log = st.stream("log")
        records = log.range(0, 1000)
        assert [r.seq for r in records] == list(range(1, workers * n + 1))
        assert len({r.message_id for r in records}) == workers * n
    finally:
        _cleanup(st)


def test_real_agent_processes_lose_nothing_on_the_server(opened: Any, backend_url: str) -> None:
    """The statebus real-agents experiment (agent processes sharing a Store and a Stream)
    loses no finding on PostgreSQL and Redis, and dedups the retried appends."""
    from surefoot_lab import context, get

    with context(quick=True, db=backend_url) as ctx:
        f = get("statebus.real-agents").run(ctx).facts
    for mode in ("store", "stream"):
        assert f[mode]["lost"] == 0 and f[mode]["kept"] == f[mode]["produced"] > 0
        assert f[mode]["model_calls"] == f[mode]["produced"] + f[mode]["retries"]
    assert f["stream"]["dedup_hits"] == 3
