"""``ServerClock``: wall time read from a server, carried by the monotonic clock; and which
clock a lease holder gets (``server_clock_for``): a FakeClock stays a FakeClock."""

from __future__ import annotations

import time

import pytest

from surefoot.clock import FakeClock, ServerClock, SystemClock, server_clock_for
from surefoot.errors import ConfigError

AHEAD = 1_000.0  # the server's clock, as read, is this far from this process's


def test_now_follows_the_servers_clock_not_this_process_s() -> None:
    reads: list[float] = []

    def read() -> float:
        reads.append(1)
        return time.time() + AHEAD

    clock = ServerClock(read)
    first, second = clock.now(), clock.now()
    assert abs(first - time.time() - AHEAD) < 5 and second >= first
    assert len(reads) == 1 and clock.reads == 1  # one read, then the monotonic clock


def test_it_reads_again_only_after_resync_seconds() -> None:
    reads: list[float] = []
    clock = ServerClock(lambda: reads.append(1) or time.time(), resync=0)
    for _ in range(3):
        clock.now()
    assert len(reads) == 3  # resync=0: every call reads
    lazy = ServerClock(lambda: reads.append(1) or time.time(), resync=3600)
    for _ in range(100):
        lazy.now()
    assert lazy.reads == 1


def test_a_failed_read_falls_back_to_the_last_reading_or_local_time() -> None:
    answers: list[float | Exception] = [OSError("down")]

    def read() -> float:
        got = answers.pop(0) if answers else OSError("down")
        if isinstance(got, Exception):
            raise got
        return got

    clock = ServerClock(read, resync=3600)
    assert abs(clock.now() - time.time()) < 5  # never answered: this process's clock
    answers.append(time.time() + AHEAD)  # before a first reading, every call tries again
    assert abs(clock.now() - time.time() - AHEAD) < 5
    clock.resync = 0  # due again; the server is down: the last reading
    assert abs(clock.now() - time.time() - AHEAD) < 5
    assert clock.reads == 1


def test_resync_must_be_a_duration() -> None:
    with pytest.raises(ConfigError):
        ServerClock(time.time, resync=-1)


class _WithServer:
    def __init__(self) -> None:
        self.clock = ServerClock(time.time)

    def server_clock(self) -> ServerClock:
        return self.clock


def test_server_clock_for_keeps_a_fake_clock_and_upgrades_the_real_one() -> None:
    fake, st = FakeClock(), _WithServer()
    assert server_clock_for(fake, st) is fake  # tests keep driving time
    assert server_clock_for(None, st) is st.clock
    assert server_clock_for(SystemClock(), st) is st.clock
    assert isinstance(server_clock_for(None, object()), SystemClock)  # SQLite, memory
    mine = SystemClock()
    assert server_clock_for(mine, object()) is mine

    class Shifted(SystemClock):  # docs/durable.md: a clock shifted in every process
        def now(self) -> float:  # type: ignore[override]
            return time.time() + 30

    shifted = Shifted()
    assert server_clock_for(shifted, st) is shifted  # a deliberate clock is kept
