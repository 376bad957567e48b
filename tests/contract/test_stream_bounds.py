"""Streams that stay bounded, on every backend: retention by length and age, the dedup
window of trimmed ids, consumers that hold retention back, stats, listing, and blocking
fetches woken by another thread or process (issue 14 §4 and the stream half of §2).

Every test runs on memory, SQLite, PostgreSQL and Redis; the server backends skip when the
server is absent (and fail under ``SUREFOOT_REQUIRE_SERVICES=1``).
"""

from __future__ import annotations

import math
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _backends import BACKENDS, backend_url

from surefoot import storage
from surefoot.clock import FakeClock
from surefoot.errors import ConfigError, DuplicateMessageError, ValueTooLargeError
from surefoot.statebus import Stream, streams
from surefoot.storage.streams import Retention


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return backend_url(request.param, tmp_path, request, "bounds")


@pytest.fixture
def st(url: str) -> Iterator[Any]:
    s = storage.open(url)
    try:
        yield s
    finally:
        s.close()


def _name() -> str:
    return f"s-{uuid.uuid4().hex[:10]}"


def _claim(log: Any, consumer: str, now: float, limit: int = 10) -> list[int]:
    got = log.claim(consumer, limit=limit, now=now, visibility_timeout=10.0, max_attempts=3)
    return [c.record.seq for c in got]


def test_length_retention_keeps_the_newest_messages(st: Any) -> None:
    """max_messages=3: after 6 appends seqs 4..6 are kept, numbering goes on, read skips."""
    log = st.stream(_name())
    r = Retention(max_messages=3)
    for i in range(6):
        log.append(f"m{i}", str(i), now=float(i), retention=r)
    assert [x.seq for x in log.range(0, 100)] == [4, 5, 6]
    stats = log.stats()
    assert (stats.messages, stats.first_seq, stats.last_seq, stats.trimmed_ids) == (3, 4, 6, 3)
    assert log.append("m9", "9", now=7.0, retention=r).seq == 7


def test_age_retention_keeps_young_messages_and_always_the_last(st: Any) -> None:
    """max_age=10: a trim at t=25 keeps what was appended at t >= 15; the last always stays."""
    log = st.stream(_name())
    for i, t in enumerate([0.0, 10.0, 15.0, 20.0]):
        log.append(f"m{i}", str(i), now=t)
    assert log.trim(Retention(max_age=10.0), now=25.0) == 2
    assert [x.seq for x in log.range()] == [3, 4]
    assert log.trim(Retention(max_age=10.0), now=1000.0) == 1
    assert [x.seq for x in log.range()] == [4]
    assert log.append("m9", "9", now=1000.0).seq == 5  # no seq is ever reused


def test_age_retention_finds_the_first_young_message_past_many_old_ones(st: Any) -> None:
    """250 messages one second apart, max_age=50 at t=249: the 51 of t >= 199 stay (the
    Redis script looks for the first young one page by page)."""
    log = st.stream(_name())
    for i in range(250):
        log.append(f"m{i}", "1", now=float(i))
    assert log.trim(Retention(max_age=50.0), now=249.0) == 199
    kept = log.range(0, 1000)
    assert (len(kept), kept[0].seq, kept[0].appended_at) == (51, 200, 199.0)


def test_trimmed_ids_deduplicate_for_their_window_then_are_forgotten(st: Any) -> None:
    """A retry of a trimmed message is a duplicate (its seq, its time) within the window;
    another payload under that id is an error; past the window the id is new again."""
    log = st.stream(_name())
    r = Retention(max_messages=1, dedup_window=100.0)
    log.append("a", '"pa"', now=0.0, retention=r)
    log.append("b", '"pb"', now=1.0, retention=r)  # trims a
    again = log.append("a", '"pa"', now=50.0, retention=r)
    assert (again.seq, again.appended_at, again.duplicate) == (1, 0.0, True)
    with pytest.raises(DuplicateMessageError):
        log.append("a", '"other"', now=50.0, retention=r)
    assert log.last_seq() == 2 and log.stats().trimmed_ids == 1
    fresh = log.append("a", '"pa"', now=200.0, retention=r)  # window over: forgotten
    assert (fresh.seq, fresh.duplicate) == (3, False)
    assert log.stats().trimmed_ids == 0  # b (appended at 1.0) is past its window too


def test_an_old_trimmed_id_is_not_kept_at_all(st: Any) -> None:
    """A message already older than the dedup window when trimmed leaves no id behind."""
    log = st.stream(_name())
    log.append("a", "1", now=0.0)
    log.append("b", "2", now=0.0)
    assert log.trim(Retention(max_messages=1, dedup_window=10.0), now=100.0) == 1
    assert log.stats().trimmed_ids == 0
    assert log.append("a", "1", now=100.0).seq == 3


def test_retention_never_drops_what_a_registered_consumer_has_not_settled(st: Any) -> None:
    """Undelivered, pending and dead messages of a registered consumer survive any trim;
    acking lets the trim go on; removing the consumer releases the rest."""
    log = st.stream(_name())
    log.register("c")
    r = Retention(max_messages=2)
    for i in range(5):
        log.append(f"m{i}", str(i), now=0.0, retention=r)
    assert log.stats().messages == 5  # nothing handed out yet: all kept
    assert _claim(log, "c", 0.0, limit=3) == [1, 2, 3]
    assert log.ack_many("c", [1, 3]) == 2
    assert log.trim(r, now=0.0) == 1  # 1 went; 2 is pending
    assert [x.seq for x in log.range()] == [2, 3, 4, 5]
    assert log.reject("c", 2, reason="poison", now=1.0)
    assert log.trim(r, now=1.0) == 0  # a dead letter keeps the whole message
    (dead,) = log.dead_letters("c")
    assert dead.record.payload == "1"
    assert log.remove_consumer("c") and not log.remove_consumer("c")
    assert log.trim(r, now=1.0) == 2
    assert [x.seq for x in log.range()] == [4, 5]


def test_a_consumer_registered_after_a_trim_starts_at_the_first_kept_message(st: Any) -> None:
    """register puts the position before the first kept message; claims go on from there."""
    log = st.stream(_name())
    r = Retention(max_messages=2)
    for i in range(4):
        log.append(f"m{i}", str(i), now=0.0, retention=r)
    log.register("late")
    log.register("late")  # again: no change
    assert log.position("late") == 2
    assert _claim(log, "late", 0.0) == [3, 4]


def test_stats_count_pending_dead_and_lag_per_consumer(st: Any) -> None:
    """stats and next_visible read each consumer's position, pending, dead letters, lag."""
    log = st.stream(_name())
    for i in range(5):
        log.append(f"m{i}", str(i), now=0.0)
    log.register("idle")
    assert _claim(log, "busy", 0.0, limit=3) == [1, 2, 3]
    log.reject("busy", 1, reason="bad", now=0.0)
    log.ack("busy", 2)
    s = log.stats()
    by = {c.name: c for c in s.consumers}
    assert (by["busy"].position, by["busy"].pending, by["busy"].dead, by["busy"].lag) == (
        3,
        1,
        1,
        2,
    )
    assert (by["idle"].position, by["idle"].pending, by["idle"].lag) == (0, 0, 5)
    assert log.next_visible("busy") == 10.0 and log.next_visible("idle") is None


def test_streams_lists_names_with_counts(url: str) -> None:
    """streams() names every stream of the storage, sorted, with its kept message count."""
    st = storage.open(url)
    try:
        a, b = st.stream("alpha"), st.stream("beta")
        for i in range(3):
            a.append(f"m{i}", "1", now=0.0)
        b.register("c")  # a stream with a consumer and no message is listed too
        assert st.streams() == {"alpha": 3, "beta": 0}
        assert streams(st) == {"alpha": 3, "beta": 0}
    finally:
        st.close()


def test_wait_wakes_when_another_thread_appends(st: Any) -> None:
    """wait returns True once the last seq passes the one given, False at its timeout."""
    log = st.stream(_name())
    assert log.wait(0, 0.05) is False
    ready = threading.Event()

    def produce() -> None:
        ready.wait(10)
        other = storage.open(st.url) if not st.url.startswith("memory") else st
        other.stream(log.name).append("m", "1", now=0.0)

    t = threading.Thread(target=produce)
    t.start()
    ready.set()
    woke = log.wait(0, 20.0)
    t.join()
    assert woke is True and log.wait(0, 0.0) is True and log.wait(1, 0.01) is False


class _Counted:
    """Counts a log's claims and waits (and what each wait returned)."""

    def __init__(self, s: Stream) -> None:
        self.claims = 0
        self.waits: list[bool] = []
        self.blocked = threading.Event()
        log = s.log
        claim, wait = log.claim, log.wait

        def counted_claim(*a: Any, **k: Any) -> Any:
            self.claims += 1
            return claim(*a, **k)

        def counted_wait(after: int, timeout: float) -> bool:
            self.blocked.set()
            out = wait(after, timeout)
            self.waits.append(out)
            return out

        log.claim = counted_claim  # type: ignore[method-assign]
        log.wait = counted_wait  # type: ignore[method-assign]


def test_a_blocked_fetch_is_woken_by_a_producer_thread(url: str) -> None:
    """fetch(block=30) waits without polling claims and returns the message a producer
    thread appends: 2 claims (before and after the wait), one wait, woken (True)."""
    s = Stream(url, _name())
    c = s.consumer("c")
    counted = _Counted(s)
    got: list[Any] = []
    t = threading.Thread(target=lambda: got.extend(c.fetch(5, block=30.0)))
    t.start()
    assert counted.blocked.wait(10)
    producer = Stream(url, s.name) if not url.startswith("memory") else s
    producer.append({"n": 1}, message_id="m1")
    t.join(30)
    assert [m.message_id for m in got] == ["m1"]
    assert counted.claims == 2 and counted.waits == [True]
    s.close()


def test_block_ends_with_an_empty_result_at_its_limit(url: str) -> None:
    """Nothing appended: fetch(block=0.2) makes one claim, one wait that times out (False),
    one last claim, and returns []; block=0 claims once and never waits."""
    s = Stream(url, _name())
    c = s.consumer("c")
    counted = _Counted(s)
    assert c.fetch(5, block=0.2) == []
    assert counted.claims == 2 and counted.waits == [False]
    assert c.fetch(5) == [] and counted.claims == 3 and counted.waits == [False]
    s.close()


_PRODUCER = textwrap.dedent(
    """
    import sys, time
    from surefoot.statebus import Stream
    url, name, flag = sys.argv[1], sys.argv[2], sys.argv[3]
    import pathlib
    while not pathlib.Path(flag).exists():
        time.sleep(0.01)
    Stream(url, name).append({"from": "process"}, message_id="p1")
    """
)


@pytest.mark.parametrize("kind", [b for b in BACKENDS if b != "memory"])
def test_a_blocked_fetch_is_woken_by_a_producer_process(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Another OS process appends: the blocked fetch wakes (one wait, True) and delivers it."""
    url = backend_url(kind, tmp_path, request, "proc")
    s = Stream(url, _name())
    c = s.consumer("c")
    counted = _Counted(s)
    flag = tmp_path / "go"
    proc = subprocess.Popen([sys.executable, "-c", _PRODUCER, url, s.name, str(flag)])
    try:
        got: list[Any] = []
        t = threading.Thread(target=lambda: got.extend(c.fetch(5, block=60.0)))
        t.start()
        assert counted.blocked.wait(10)
        flag.write_text("go")
        t.join(60)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert [m.payload for m in got] == [{"from": "process"}]
    assert counted.claims == 2 and counted.waits == [True]
    s.close()


def test_a_blocked_fetch_wakes_for_a_redelivery_coming_due(url: str) -> None:
    """A crashed worker's message comes due after its visibility timeout: a blocked fetch by
    another worker wakes for it (no append needed) and gets it, attempt 2."""
    s = Stream(url, _name())
    c = s.consumer("c", visibility_timeout=0.3)
    s.append("job", message_id="j1")
    assert len(c.fetch(1, worker="crashed")) == 1  # never acked
    (again,) = c.fetch(1, worker="survivor", block=30.0)
    assert (again.message_id, again.attempt) == ("j1", 2)
    assert c.ack(again) and c.pending == 0
    s.close()


def test_a_crashed_consumers_messages_go_to_another_worker(url: str) -> None:
    """Worker A fetches 3 and dies; after the visibility timeout worker B gets all three
    (attempt 2) and nothing else; the history names both workers."""
    clock = FakeClock()
    s = Stream(url, _name(), clock=clock)
    c = s.consumer("jobs", visibility_timeout=30.0)
    for i in range(4):
        s.append(i, message_id=f"j{i}")
    assert [m.seq for m in c.fetch(3, worker="A")] == [1, 2, 3]
    (fourth,) = c.fetch(10, worker="B")
    assert fourth.seq == 4 and c.ack(fourth)
    clock.advance(31)
    got = c.fetch(10, worker="B")
    assert [(m.seq, m.attempt) for m in got] == [(1, 2), (2, 2), (3, 2)]
    assert c.ack_many(got) == 3 and c.pending == 0
    s.close()


def test_stream_retention_trims_on_append_and_reports_stats(url: str) -> None:
    """Stream(max_messages=…) trims on append; stats and Consumer.lag/stats read the counts."""
    s = Stream(url, _name(), max_messages=3)
    c = s.consumer("c")
    for i in range(5):
        s.append(i, message_id=f"m{i}")
    assert c.lag == 5 and s.stats().messages == 5  # c has not had them yet
    got = c.fetch(5)
    c.ack_many(got)
    assert s.trim() == 2 and [e.seq for e in s.read()] == [3, 4, 5]
    assert (c.stats().position, c.stats().pending, c.lag) == (5, 0, 0)
    assert s.append(9, message_id="m9").seq == 6 and s.stats().messages == 3
    assert s.append(0, message_id="m0").duplicate  # trimmed, still in its dedup window
    s.close()


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"max_messages": 0}, "max_messages must be an integer >= 1 or None, got 0"),
        ({"max_messages": 2.5}, "got 2.5"),
        ({"max_age": -1.0}, "max_age must be a finite number of seconds > 0, got -1.0"),
        ({"max_age": math.nan}, "max_age must be a finite number of seconds > 0, got nan"),
        ({"dedup_window": math.inf}, "dedup_window must be a finite number of seconds"),
        ({"max_message_bytes": 0}, "max_message_bytes must be an integer >= 1 or None, got 0"),
    ],
)
def test_bad_limits_are_refused_naming_the_value(kwargs: dict[str, Any], needle: str) -> None:
    """A bad retention or size limit is a ConfigError naming the option and its value."""
    with pytest.raises(ConfigError, match=needle.replace(".", r"\.").replace("(", r"\(")):
        Stream("memory://", "s", **kwargs)


@pytest.mark.parametrize(
    ("block", "limit", "needle"),
    [
        (math.nan, 1, "fetch block must be a finite number of seconds >= 0, got nan"),
        (-1.0, 1, "fetch block must be a finite number of seconds >= 0, got -1.0"),
        (math.inf, 1, "got inf"),
        (0.0, 0, "fetch limit must be an integer >= 1, got 0"),
        (0.0, -3, "got -3"),
    ],
)
def test_bad_fetch_arguments_are_refused_naming_the_value(
    block: float, limit: int, needle: str
) -> None:
    """block=NaN, a negative block or limit: a ConfigError naming the value, nothing claimed."""
    s = Stream("memory://", "s")
    s.append(1, message_id="m")
    c = s.consumer("c")
    with pytest.raises(ConfigError, match=needle.replace(".", r"\.")):
        c.fetch(limit, block=block)
    assert c.pending == 0 and c.position == 0


def test_a_message_over_max_message_bytes_is_refused_naming_it(url: str) -> None:
    """max_message_bytes: a larger message is a ValueTooLargeError naming it, its size and
    the limit; nothing is appended."""
    s = Stream(url, _name(), max_message_bytes=100)
    s.append("x" * 50, message_id="small")
    with pytest.raises(ValueTooLargeError) as ei:
        s.append("y" * 200, message_id="big")
    assert str(ei.value).startswith(
        f"message 'big' of stream {s.name!r} is 202 bytes of JSON, over the stream's "
        "max_message_bytes=100; nothing was appended."
    )
    assert (ei.value.size, ei.value.limit) == (202, 100)
    assert s.last_seq == 1
    s.close()


@pytest.mark.parametrize("kind", BACKENDS)
def test_racing_appends_and_trims_never_lose_an_unacked_message(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Two producer threads append 40 each to a stream of max_messages=3 while a consumer
    fetches and acks: every message reaches the consumer exactly once, in order, and the
    stream ends within its limit."""
    url = backend_url(kind, tmp_path, request, "race")
    name = _name()
    s = Stream(url, name, max_messages=3)
    c = s.consumer("c", visibility_timeout=60.0)
    done = threading.Event()

    def produce(who: str) -> None:
        p = Stream(url, name, max_messages=3) if kind != "memory" else s
        for i in range(40):
            p.append({"who": who, "i": i}, message_id=f"{who}-{i}")

    threads = [threading.Thread(target=produce, args=(w,)) for w in ("a", "b")]
    for t in threads:
        t.start()
    seen: list[int] = []
    ids: list[str] = []

    def consume() -> None:
        while not (done.is_set() and c.lag == 0 and c.pending == 0):
            got = c.fetch(7, block=0.05)
            seen.extend(m.seq for m in got)
            ids.extend(m.message_id for m in got)
            c.ack_many(got)

    consumer = threading.Thread(target=consume)
    consumer.start()
    for t in threads:
        t.join(120)
    done.set()
    consumer.join(120)
    assert seen == list(range(1, 81))
    assert sorted(ids) == sorted(f"{w}-{i}" for w in "ab" for i in range(40))
    s.trim()
    assert s.stats().messages == 3
    s.close()


_BOUNDED_PRODUCER = textwrap.dedent(
    """
    import sys
    from surefoot.statebus import Stream
    url, name = sys.argv[1], sys.argv[2]
    s = Stream(url, name, max_messages=5)
    i = 0
    while True:
        s.append({"i": i}, message_id=f"m{i}")
        print(i, flush=True)
        i += 1
    """
)


@pytest.mark.parametrize("kind", [b for b in BACKENDS if b != "memory"])
def test_a_killed_bounded_producer_leaves_every_unacked_message(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A producer appending with max_messages=5 is SIGKILLed mid-append: a registered
    consumer that had acked only the first messages still gets every other one, with no gap
    and no duplicate, and the trim went no further than its acks allowed."""
    url = backend_url(kind, tmp_path, request, "kill")
    name = _name()
    s = Stream(url, name, max_messages=5)
    c = s.consumer("c")
    proc = subprocess.Popen(
        [sys.executable, "-c", _BOUNDED_PRODUCER, url, name], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        for _ in range(10):
            proc.stdout.readline()
        first = c.fetch(3)
        c.ack_many(first)  # 3 settled: the producer's trims may drop them, nothing more
        for _ in range(20):
            proc.stdout.readline()
        time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        if proc.stdout is not None:
            proc.stdout.close()
    # The server may still commit the append the producer sent as it was killed: read
    # until a drained fetch and the last seq agree twice, so that late message is counted.
    rest: list[int] = []
    last = -1
    while True:
        got = c.fetch(50)
        if got:
            rest += [m.seq for m in got]
            c.ack_many(got)
            continue
        seen, last = last, s.last_seq
        if last == seen:
            break
    assert last >= 30
    assert [m.seq for m in first] + rest == list(range(1, last + 1))
    assert s.stats().first_seq <= 4
    s.close()
