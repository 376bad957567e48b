"""Stream and Consumer: decoded payloads, dedup, redelivery on the clock, dead letters."""

from __future__ import annotations

from pathlib import Path

import pytest

from surefoot.clock import FakeClock
from surefoot.errors import ConfigError, ConflictError, DuplicateMessageError
from surefoot.statebus import Stream


@pytest.fixture(params=["memory", "sqlite"])
def stream(request: pytest.FixtureRequest, tmp_path: Path) -> Stream:
    """A stream with a fake clock on each embedded backend."""
    url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 's.db'}"
    return Stream(url, "findings", clock=FakeClock())


def test_append_and_read_decode_payloads(stream: Stream) -> None:
    """Payloads round-trip through the codec; a retry returns the original entry."""
    e = stream.append({"finding": "x", "n": 1}, message_id="a-1")
    again = stream.append({"finding": "x", "n": 1}, message_id="a-1")
    assert e.seq == again.seq == 1 and again.duplicate and not e.duplicate
    assert [m.payload for m in stream.read()] == [{"finding": "x", "n": 1}]
    with pytest.raises(DuplicateMessageError, match="a-1"):
        stream.append({"finding": "y"}, message_id="a-1")
    with pytest.raises(ConflictError):
        stream.append({"finding": "z"}, message_id="a-2", expect_last_seq=0)
    assert stream.last_seq == 1


@pytest.mark.parametrize("bad", ["m\x00", "\udc80"])
def test_ids_and_names_every_backend_cannot_store_are_refused(stream: Stream, bad: str) -> None:
    """A NUL or a lone surrogate in a message id, consumer or stream name is a ConfigError."""
    with pytest.raises(ConfigError, match=r"NUL|surrogate"):
        stream.append(1, message_id=bad)
    with pytest.raises(ConfigError, match=r"NUL|surrogate"):
        stream.consumer(bad)
    with pytest.raises(ConfigError, match=r"NUL|surrogate"):
        Stream("memory://", bad)
    assert stream.last_seq == 0


def test_consumer_redelivers_on_the_clock_then_dead_letters(stream: Stream) -> None:
    """Unacked messages come back after the visibility timeout, then go to dead letters."""
    clock = stream.clock
    assert isinstance(clock, FakeClock)
    stream.append("job", message_id="j1")
    c = stream.consumer("w", visibility_timeout=5.0, max_attempts=2)
    assert [m.attempt for m in c.fetch()] == [1]
    assert c.fetch() == []
    clock.advance(5.0)
    assert [m.attempt for m in c.fetch()] == [2]
    clock.advance(5.0)
    assert c.fetch() == []
    (d,) = c.dead_letters()
    assert (d.message_id, d.payload, d.reason, d.attempts) == ("j1", "job", "max_attempts", 2)
    assert c.redrive() == 1
    (m,) = c.fetch()
    assert c.ack(m) and c.pending == 0 and c.position == 1


def test_bad_arguments_are_config_errors(stream: Stream) -> None:
    """Empty ids, bad expect_last_seq and bad consumer settings are refused."""
    with pytest.raises(ConfigError):
        stream.append(1, message_id="")
    with pytest.raises(ConfigError):
        stream.append(1, message_id="x", expect_last_seq=-1)
    with pytest.raises(ConfigError):
        stream.consumer("w", visibility_timeout=0)
    with pytest.raises(ConfigError):
        stream.consumer("w", max_attempts=0)
    with pytest.raises(ConfigError):
        Stream("memory://", "")


def test_ack_many_acks_a_fetched_batch_in_one_commit(tmp_path: Path) -> None:
    """A batch of fetched messages is acked with one commit on SQLite, not one per message."""
    stream = Stream(f"sqlite:///{tmp_path / 'b.db'}", "jobs", clock=FakeClock())
    for i in range(5):
        stream.append(i, message_id=f"j{i}")
    c = stream.consumer("w", visibility_timeout=5.0, max_attempts=3)
    batch = c.fetch(limit=5)
    db = stream.log.db  # type: ignore[attr-defined]
    before = db.commits
    assert c.ack_many(batch) == 5 and c.pending == 0
    assert db.commits - before == 1
    assert c.ack_many([m.seq for m in batch]) == 0
