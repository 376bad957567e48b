"""StreamLog contract: one suite for every backend.

Every test runs against memory, SQLite, PostgreSQL and Redis (``BACKENDS``); the server
backends come from the service fixtures, which skip when the server is absent (and fail
under ``SUREFOOT_REQUIRE_SERVICES=1``).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _backends import BACKENDS, backend_url

from surefoot import storage
from surefoot.errors import (
    ConfigError,
    ConflictError,
    DuplicateMessageError,
    StoreUnavailableError,
)
from surefoot.storage.streams import StreamLog


def _url(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    return backend_url(kind, tmp_path, request, "stream")


@pytest.fixture(params=BACKENDS)
def log(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A stream no other test uses, on each backend."""
    st = storage.open(_url(request.param, tmp_path, request))
    try:
        yield st.stream(f"s-{uuid.uuid4().hex[:10]}")
    finally:
        st.close()


def _claim(log: Any, now: float, limit: int = 10, max_attempts: int = 3) -> list[Any]:
    return log.claim("c", limit=limit, now=now, visibility_timeout=10.0, max_attempts=max_attempts)


def test_is_a_stream(log: Any) -> None:
    """The backend implements the protocol."""
    assert isinstance(log, StreamLog)


def test_append_numbers_messages_in_order(log: Any) -> None:
    """Appends get sequence numbers 1, 2, 3 and range returns them in order."""
    seqs = [log.append(f"m{i}", f'"{i}"', now=float(i)).seq for i in range(3)]
    assert seqs == [1, 2, 3] and log.last_seq() == 3
    assert [r.message_id for r in log.range(1, 10)] == ["m1", "m2"]


def test_range_limits_mean_the_same_everywhere(log: Any) -> None:
    """limit=0 returns nothing; a negative limit or position is a ConfigError naming it."""
    for i in range(3):
        log.append(f"m{i}", str(i), now=0.0)
    assert log.range(0, 0) == []
    assert [r.seq for r in log.range(2, 100)] == [3]
    with pytest.raises(ConfigError, match="limit=-1"):
        log.range(0, -1)
    with pytest.raises(ConfigError, match="after=-5"):
        log.range(-5, 10)


def test_expect_last_seq_conflict_says_the_same_everywhere(log: Any) -> None:
    """A failed conditional append names the stream, both sequence numbers and the fix."""
    log.append("a", "1", now=0.0)
    with pytest.raises(ConflictError) as ei:
        log.append("b", "2", now=0.0, expect_last_seq=3)
    got = (ei.value.kind, ei.value.key, ei.value.expected, ei.value.version)
    assert got == ("stream", log.name, 3, 1)
    assert str(ei.value) == (
        f"stream {log.name!r} ends at sequence 1, not 3 (expect_last_seq): read the messages "
        "after 3, redo your append on them, and append again with expect_last_seq=1; nothing "
        "was appended"
    )


def test_ack_many_settles_a_batch_in_one_call(log: Any) -> None:
    """ack_many acks every pending seq given, skips unknown or settled ones, returns the count."""
    for i in range(4):
        log.append(f"m{i}", str(i), now=0.0)
    _claim(log, 0.0, limit=3)
    assert log.ack("c", 2)
    assert log.ack_many("c", [1, 2, 3, 4, 99]) == 2
    assert log.pending("c") == 0 and log.ack_many("c", []) == 0
    assert [c.record.seq for c in _claim(log, 100.0)] == [4]


def test_retried_append_is_deduplicated(log: Any) -> None:
    """The same id and payload returns the original record, marked duplicate, appending nothing."""
    first = log.append("m", '"p"', now=1.0)
    again = log.append("m", '"p"', now=2.0)
    assert (again.seq, again.appended_at, again.duplicate) == (first.seq, 1.0, True)
    assert log.last_seq() == 1


def test_same_id_other_payload_is_an_error(log: Any) -> None:
    """Reusing an id with another payload raises DuplicateMessageError naming the id."""
    log.append("m", '"p"', now=1.0)
    with pytest.raises(DuplicateMessageError) as ei:
        log.append("m", '"q"', now=2.0)
    assert ei.value.message_id == "m" and log.last_seq() == 1
    assert log.range()[0].payload == '"p"'


def test_expect_last_seq_makes_the_append_conditional(log: Any) -> None:
    """An append expecting another last sequence number is refused and appends nothing."""
    log.append("a", "1", now=1.0, expect_last_seq=0)
    with pytest.raises(ConflictError) as ei:
        log.append("b", "2", now=1.0, expect_last_seq=0)
    assert ei.value.version == 1 and log.last_seq() == 1
    assert log.append("b", "2", now=1.0, expect_last_seq=1).seq == 2


def test_consumer_gets_each_message_once_and_ack_removes_it(log: Any) -> None:
    """New messages go out once per consumer, move its position, and an ack settles them."""
    for i in range(3):
        log.append(f"m{i}", str(i), now=0.0)
    got = _claim(log, 0.0, limit=2)
    assert [(c.record.seq, c.attempt) for c in got] == [(1, 1), (2, 1)]
    assert log.position("c") == 2 and log.pending("c") == 2
    assert [c.record.seq for c in _claim(log, 0.0)] == [3]
    assert log.ack("c", 1) and not log.ack("c", 1)
    assert log.pending("c") == 2
    assert (
        log.claim("other", limit=10, now=0.0, visibility_timeout=1.0, max_attempts=1)[0].attempt
        == 1
    )


def test_unacked_message_is_redelivered_after_the_visibility_timeout(log: Any) -> None:
    """A message not acked reappears after the timeout with its attempt count raised."""
    log.append("m", "1", now=0.0)
    _claim(log, 0.0)
    assert _claim(log, 5.0) == []
    again = _claim(log, 10.0)
    assert [(c.record.message_id, c.attempt) for c in again] == [("m", 2)]


def test_max_attempts_moves_a_message_to_dead_letters_with_history(log: Any) -> None:
    """After max_attempts deliveries without an ack the message is a dead letter, not resent."""
    log.append("m", '"body"', now=0.0)
    for t in (0.0, 10.0, 20.0):
        assert len(_claim(log, t)) == 1
    assert _claim(log, 30.0) == []
    (dead,) = log.dead_letters("c")
    assert (dead.record.message_id, dead.record.payload) == ("m", '"body"')
    assert (dead.reason, dead.attempts) == ("max_attempts", 3)
    assert [h["attempt"] for h in dead.history] == [1, 2, 3]
    assert log.pending("c") == 0


def test_reject_and_redrive(log: Any) -> None:
    """reject dead-letters at once with its reason; redrive delivers it again."""
    log.append("m", "1", now=0.0)
    _claim(log, 0.0)
    assert log.reject("c", 1, reason="poison", now=1.0)
    assert [d.reason for d in log.dead_letters("c")] == ["poison"]
    assert log.redrive("c", None, now=2.0) == 1
    assert log.dead_letters("c") == []
    assert [(c.record.seq, c.attempt) for c in _claim(log, 2.0)] == [(1, 1)]


def test_redrive_counts_a_repeated_seq_once(log: Any) -> None:
    """redrive([1, 1]) puts the dead letter back once and returns 1; unknown seqs are skipped."""
    log.append("m", "1", now=0.0)
    _claim(log, 0.0)
    assert log.reject("c", 1, reason="poison", now=1.0)
    assert log.redrive("c", [1, 1, 7], now=2.0) == 1
    assert log.dead_letters("c") == [] and log.pending("c") == 1


def test_nack_redelivers_after_the_delay(log: Any) -> None:
    """A nack makes the message visible again after its delay."""
    log.append("m", "1", now=0.0)
    _claim(log, 0.0)
    assert log.nack("c", 1, now=1.0, delay=2.0)
    assert _claim(log, 2.0) == []
    assert [c.attempt for c in _claim(log, 3.0)] == [2]


_APPENDER = textwrap.dedent(
    """
    import sys
    from surefoot import storage
    url, who, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    log = storage.open(url).stream("shared")
    dups = 0
    for i in range(n):
        log.append(f"{who}-{i}", f'"{who} {i}"', now=0.0)
        dups += log.append(f"{who}-{i}", f'"{who} {i}"', now=0.0).duplicate  # a retry
    print(dups)
    """
)


def test_sqlite_processes_append_without_loss_or_duplicates(tmp_path: Path) -> None:
    """Three processes appending (and retrying each append) leave each id exactly once."""
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    storage.open(url).stream("shared")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _APPENDER, url, f"p{i}", "30"], stdout=subprocess.PIPE, text=True
        )
        for i in range(3)
    ]
    try:
        outs = [p.communicate(timeout=60)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert all(p.returncode == 0 for p in procs)
    assert [int(o) for o in outs] == [30, 30, 30]
    log = storage.open(url).stream("shared")
    recs = log.range(0, 1000)
    assert len(recs) == 90 and len({r.message_id for r in recs}) == 90
    assert [r.seq for r in recs] == list(range(1, 91))


def test_corrupt_sqlite_file_is_a_clear_error_for_a_stream(tmp_path: Path) -> None:
    """A stream on a file that is not SQLite fails naming the file and the fix; bytes kept."""
    bad = tmp_path / "log.db"
    bad.write_bytes(b"\x00garbage" * 300)
    with pytest.raises(StoreUnavailableError) as ei:
        storage.open(f"sqlite:///{bad}").stream("s")
    assert "log.db" in str(ei.value) and "another file" in str(ei.value)
    assert bad.read_bytes() == b"\x00garbage" * 300
