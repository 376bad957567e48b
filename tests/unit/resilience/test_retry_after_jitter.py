"""Retry-After is obeyed with bounded jitter above it: never sooner, never past the deadline."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from surefoot import FakeClock
from surefoot.resilience import ProviderError, RetryPolicy, decide, faults, retry_call


def rate_limited(after: str) -> faults.FaultyCall[str]:
    """A service answering 429 with Retry-After once, then ok."""
    return faults.wrap(lambda: "ok", faults.Script([ProviderError(429, {"retry-after": after})]))


def test_clients_limited_at_once_do_not_come_back_at_once() -> None:
    """Fifty clients told 'Retry-After: 2' wait 2..2.2 s each, and not all the same time."""
    waits = []
    for seed in range(50):
        clock = FakeClock()
        assert retry_call(rate_limited("2"), clock=clock, rng=random.Random(seed)) == "ok"
        waits.extend(clock.sleeps)
    assert len(waits) == 50
    assert all(2.0 <= w <= 2.2 for w in waits)
    assert len(set(waits)) > 40  # spread out, not one instant


def test_jitter_zero_obeys_the_server_exactly() -> None:
    """retry_after_jitter=0 waits exactly what the server asked."""
    clock = FakeClock()
    retry_call(rate_limited("3"), policy=RetryPolicy(retry_after_jitter=0), clock=clock)
    assert clock.sleeps == [3.0]


@given(
    after=st.floats(0.001, 50),
    jitter=st.floats(0, 1),
    seed=st.integers(0, 2**32),
)
def test_the_wait_is_between_the_servers_and_the_bound(
    after: float, jitter: float, seed: int
) -> None:
    """The wait is never below Retry-After and at most Retry-After x (1 + jitter)."""
    p = RetryPolicy(retry_after_jitter=jitter)
    err = ProviderError(429, {"retry-after-ms": str(after * 1000)})
    step = decide(p, 1, err, 0.0, None, random.Random(seed))
    server = after  # what parse_retry_after reads back
    assert step.retry
    assert server * (1 - 1e-12) <= step.wait <= server * (1 + jitter) * (1 + 1e-12)


@given(after=st.floats(0.1, 9.9), elapsed=st.floats(0, 9.8), seed=st.integers(0, 2**32))
def test_jitter_never_pushes_a_wait_past_the_deadline(
    after: float, elapsed: float, seed: int
) -> None:
    """Under a deadline a Retry-After that fits is kept, jittered, and ends before the deadline."""
    p = RetryPolicy(deadline=10, retry_after_jitter=1.0)
    err = ProviderError(429, {"retry-after-ms": str(after * 1000)})
    step = decide(p, 1, err, elapsed, None, random.Random(seed))
    left = 10 - elapsed
    if after >= left:
        assert not step.retry and "deadline" in step.reason  # fails at once, as before
    else:
        assert step.retry and after <= step.wait < left
        assert step.wait <= after + (left - after) / 2 + 1e-9  # time is left for the attempt
