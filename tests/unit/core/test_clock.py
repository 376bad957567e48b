"""FakeClock and SystemClock."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from surefoot import ConfigError, FakeClock, SystemClock
from surefoot.clock import Clock, seconds


def test_fake_clock_records_sleeps_and_advances() -> None:
    """Every sleep is recorded in order and moves now() forward by exactly that much."""
    c = FakeClock(start=100.0)
    c.sleep(0.5)
    c.sleep(2)
    asyncio.run(c.asleep(1.5))
    assert c.sleeps == [0.5, 2, 1.5]
    assert c.now() == 104.0
    assert c.elapsed == 4.0


def test_advance_does_not_record_a_sleep() -> None:
    """advance() is time spent working, not waiting."""
    c = FakeClock()
    c.advance(timedelta(seconds=3))
    assert c.sleeps == []
    assert c.monotonic() == 3.0


def test_negative_sleep_is_a_config_error() -> None:
    """A negative wait is a bug in the caller; it names the value."""
    with pytest.raises(ConfigError, match="-1"):
        FakeClock().sleep(-1)


def test_both_clocks_satisfy_the_protocol() -> None:
    """SystemClock and FakeClock are Clocks."""
    assert isinstance(SystemClock(), Clock)
    assert isinstance(FakeClock(), Clock)


@pytest.mark.parametrize("bad", [-0.1, "3", None, float("nan"), True])
def test_seconds_rejects_bad_durations(bad: object) -> None:
    """Durations must be non-negative numbers or timedeltas."""
    with pytest.raises(ConfigError):
        seconds(bad)  # type: ignore[arg-type]


def test_seconds_accepts_timedelta() -> None:
    """A timedelta becomes float seconds."""
    assert seconds(timedelta(minutes=1)) == 60.0
