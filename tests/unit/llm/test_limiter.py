"""RateLimiter: requests and tokens per minute on a clock, shared by threads and tasks,
corrected by the providers' rate-limit headers."""

from __future__ import annotations

import asyncio
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from surefoot import FakeClock
from surefoot.errors import ConfigError
from surefoot.llm import RateLimiter
from surefoot.llm._limiter import parse_reset


def test_requests_per_minute_queue_callers() -> None:
    """6 rpm: six calls pass at once, the next ones wait 10 s more each."""
    lim = RateLimiter(requests_per_minute=6, clock=FakeClock())
    assert [lim.reserve() for _ in range(9)] == [0, 0, 0, 0, 0, 0, 10, 20, 30]


def test_bucket_refills_with_time() -> None:
    """After the bucket empties, 10 s of time buys one more request at 6 rpm."""
    clock = FakeClock()
    lim = RateLimiter(requests_per_minute=6, clock=clock)
    for _ in range(6):
        lim.acquire()
    clock.advance(10)
    assert lim.acquire() == 0
    assert lim.acquire() == pytest.approx(10)
    assert clock.sleeps == [pytest.approx(10)]


def test_tokens_per_minute_and_settle() -> None:
    """600 tpm: a 500-token reservation passes, the next 500 waits; settle gives back."""
    lim = RateLimiter(tokens_per_minute=600, clock=FakeClock())
    assert lim.reserve(500) == 0
    lim.settle(500, 100)  # the call used 100 tokens, not 500
    assert lim.reserve(500) == 0
    assert lim.reserve(500) == pytest.approx((500 - 0) / 10)


def test_shared_by_threads_without_losing_a_reservation() -> None:
    """40 threads on 6 rpm: each gets a distinct place in the queue."""
    lim = RateLimiter(requests_per_minute=6, clock=FakeClock())
    waits: list[float] = []
    lock = threading.Lock()

    def go() -> None:
        w = lim.reserve()
        with lock:
            waits.append(w)

    threads = [threading.Thread(target=go) for _ in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(waits) == [0.0] * 6 + [10.0 * i for i in range(1, 35)]


def test_shared_by_tasks() -> None:
    """Async tasks wait on the clock in turn."""
    clock = FakeClock()
    lim = RateLimiter(requests_per_minute=60, clock=clock)

    async def main() -> list[float]:
        return list(await asyncio.gather(*(lim.aacquire() for _ in range(62))))

    waits = asyncio.run(main())
    # the 61st waits 1 s (virtual time moves on), then the 62nd waits 1 s more
    assert waits == [0.0] * 60 + [1.0, 1.0]
    assert clock.elapsed == pytest.approx(2.0) and lim.waits == 2


def test_openai_headers_set_the_limit_and_block_until_reset() -> None:
    """x-ratelimit-limit sets a limit; remaining 0 with reset 1m30s blocks for 90 s."""
    lim = RateLimiter(clock=FakeClock())
    assert lim.reserve() == 0  # nothing known yet: no wait
    lim.update(
        {
            "x-ratelimit-limit-requests": "100",
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": "1m30s",
            "x-ratelimit-limit-tokens": "1000",
            "x-ratelimit-remaining-tokens": "900",
        }
    )
    assert lim.requests_per_minute == 100 and lim.tokens_per_minute == 1000
    assert lim.reserve() == pytest.approx(90)


def test_anthropic_headers_with_an_rfc3339_reset() -> None:
    """anthropic-ratelimit-* headers: the reset time is read relative to the clock."""
    clock = FakeClock(start=1_700_000_000.0)  # 2023-11-14T22:13:20Z
    lim = RateLimiter(clock=clock)
    lim.update(
        {
            "anthropic-ratelimit-tokens-limit": "4000",
            "anthropic-ratelimit-tokens-remaining": "0",
            "anthropic-ratelimit-tokens-reset": "2023-11-14T22:13:50Z",
        }
    )
    assert lim.reserve(10) == pytest.approx(30)


def test_remaining_lowers_the_bucket() -> None:
    """remaining below the local level wins (another process spent some)."""
    lim = RateLimiter(requests_per_minute=60, clock=FakeClock())
    lim.update({"x-ratelimit-remaining-requests": "1"})
    assert lim.reserve() == 0
    assert lim.reserve() == pytest.approx(1.0)


def test_parse_reset_forms() -> None:
    """Durations, plain seconds and ISO times are read; garbage is None."""
    assert parse_reset("1s", now=0) == 1
    assert parse_reset("6m0s", now=0) == 360
    assert parse_reset("20ms", now=0) == pytest.approx(0.02)
    assert parse_reset("2.5", now=0) == 2.5
    assert parse_reset("soon", now=0) is None


def test_bad_limits_are_refused() -> None:
    """A zero or negative limit is a ConfigError naming the value."""
    with pytest.raises(ConfigError, match="requests_per_minute must be > 0"):
        RateLimiter(requests_per_minute=0)


@given(
    rpm=st.integers(min_value=1, max_value=30),
    gaps=st.lists(st.floats(min_value=0, max_value=20), min_size=1, max_size=80),
)
def test_no_window_starts_more_than_the_bucket_allows(rpm: int, gaps: list[float]) -> None:
    """Whatever the arrivals, any 60 s window holds at most 2 x rpm request starts."""
    clock = FakeClock()
    lim = RateLimiter(requests_per_minute=rpm, clock=clock)
    starts = []
    for gap in gaps:
        clock.advance(gap)
        starts.append(clock.monotonic() + lim.reserve())
    starts.sort()
    for i, s in enumerate(starts):
        inside = sum(1 for t in starts[i:] if t < s + 60 - 1e-9)
        assert inside <= 2 * rpm  # capacity rpm, plus rpm refilled during the window
