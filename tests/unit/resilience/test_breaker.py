"""CircuitBreaker: transitions, probes, rate window, slow calls, no lock during the call."""

from __future__ import annotations

import asyncio
import sys
import threading

import pytest

from surefoot import ConfigError, FakeClock
from surefoot.errors import CircuitOpenError
from surefoot.resilience import CircuitBreaker, ProviderError


def fail() -> None:
    raise ProviderError(503)


def ok() -> str:
    return "ok"


def test_opens_after_consecutive_failures_and_refuses_calls() -> None:
    """Three failures open it; the next call is refused without running."""
    clock = FakeClock()
    b = CircuitBreaker("svc", failure_threshold=3, reset_timeout=10, clock=clock)
    for _ in range(3):
        with pytest.raises(ProviderError):
            b.call(fail)
    assert b.state == "open"
    ran = []
    with pytest.raises(CircuitOpenError) as info:
        b.call(lambda: ran.append(1))
    assert ran == [] and info.value.retry_after == 10
    assert b.stats().rejected == 1 and b.stats().opened == 1


def test_a_success_resets_the_consecutive_count() -> None:
    """Failures separated by a success do not open it."""
    b = CircuitBreaker(failure_threshold=2, clock=FakeClock())
    for _ in range(5):
        with pytest.raises(ProviderError):
            b.call(fail)
        b.call(ok)
    assert b.state == "closed"


def test_half_open_probes_close_or_reopen() -> None:
    """After the timeout, the probes decide: all succeed closes, a failure reopens."""
    clock = FakeClock()
    b = CircuitBreaker(failure_threshold=1, reset_timeout=5, half_open_probes=2, clock=clock)
    with pytest.raises(ProviderError):
        b.call(fail)
    clock.advance(5)
    assert b.state == "half_open"
    b.call(ok)
    assert b.state == "half_open"
    b.call(ok)
    assert b.state == "closed"
    with pytest.raises(ProviderError):
        b.call(fail)
    clock.advance(5)
    with pytest.raises(ProviderError):
        b.call(fail)
    assert b.state == "open"
    assert [t[2] for t in b.transitions] == [
        "open",
        "half_open",
        "closed",
        "open",
        "half_open",
        "open",
    ]


def test_half_open_lets_only_the_probes_through_concurrently() -> None:
    """While one probe runs, a second concurrent call is refused."""
    clock = FakeClock()
    b = CircuitBreaker(failure_threshold=1, reset_timeout=1, half_open_probes=1, clock=clock)
    with pytest.raises(ProviderError):
        b.call(fail)
    clock.advance(1)
    inside = threading.Event()
    release = threading.Event()

    def probe() -> str:
        inside.set()
        release.wait(5)
        return "ok"

    t = threading.Thread(target=b.call, args=(probe,))
    t.start()
    assert inside.wait(5)
    with pytest.raises(CircuitOpenError):
        b.call(ok)
    release.set()
    t.join(5)
    assert b.state == "closed"


def test_no_lock_is_held_during_the_call() -> None:
    """Two calls run inside the breaker at the same time."""
    b = CircuitBreaker()
    barrier = threading.Barrier(2, timeout=5)
    results: list[str] = []

    def both_inside() -> str:
        barrier.wait()  # deadlocks (BrokenBarrierError) if calls were serialised
        return "ok"

    threads = [
        threading.Thread(target=lambda: results.append(b.call(both_inside))) for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert results == ["ok", "ok"]


def test_failure_rate_over_the_window() -> None:
    """Half the last 10 calls failing opens a rate-based breaker though never 3 in a row."""
    b = CircuitBreaker(
        failure_threshold=100, failure_rate=0.5, window=10, min_calls=10, clock=FakeClock()
    )
    for i in range(9):
        if i % 2:
            with pytest.raises(ProviderError):
                b.call(fail)
        else:
            b.call(ok)
    assert b.state == "closed"
    with pytest.raises(ProviderError):
        b.call(fail)
    assert b.state == "open"


def test_slow_calls_count_as_failures() -> None:
    """A success slower than slow_call_threshold counts as a failure."""
    clock = FakeClock()
    b = CircuitBreaker(failure_threshold=2, slow_call_threshold=1.0, clock=clock)

    def slow() -> str:
        clock.advance(2)
        return "late"

    assert b.call(slow) == "late"
    assert b.call(slow) == "late"
    assert b.state == "open" and b.stats().failures == 2


def test_ignored_errors_count_as_neither() -> None:
    """A 400 (caller's bug) neither opens nor closes the breaker."""
    b = CircuitBreaker(failure_threshold=1, clock=FakeClock())
    with pytest.raises(ProviderError):
        b.call(lambda: (_ for _ in ()).throw(ProviderError(400)))
    assert b.state == "closed" and b.stats().ignored == 1


def test_async_and_decorator() -> None:
    """acall and the decorator form record outcomes like call."""
    b = CircuitBreaker(failure_threshold=1, clock=FakeClock())

    @b
    async def bad() -> None:
        raise ProviderError(500)

    with pytest.raises(ProviderError):
        asyncio.run(bad())
    assert b.state == "open"
    with pytest.raises(CircuitOpenError):
        asyncio.run(bad())


def test_bad_parameters() -> None:
    """Invalid thresholds raise ConfigError."""
    with pytest.raises(ConfigError, match="failure_threshold"):
        CircuitBreaker(failure_threshold=0)
    with pytest.raises(ConfigError, match="min_calls"):
        CircuitBreaker(window=5, min_calls=6)


def test_state_change_hook_may_read_the_breaker() -> None:
    """on_state_change runs outside the lock: a hook reading state/stats does not deadlock."""
    seen: list[tuple[str, str, str, int]] = []
    clock = FakeClock()
    b: CircuitBreaker

    def hook(old: str, new: str) -> None:
        seen.append((old, new, b.state, b.stats().opened))

    b = CircuitBreaker(failure_threshold=1, reset_timeout=1, clock=clock, on_state_change=hook)

    def cycle() -> None:
        with pytest.raises(ProviderError):
            b.call(fail)  # closed -> open
        clock.advance(1)
        b.call(ok)  # open -> half_open -> closed
        b.force_open()
        b.reset()

    t = threading.Thread(target=cycle, daemon=True)
    t.start()
    t.join(5)
    assert not t.is_alive(), "the hook deadlocked on the breaker's lock"
    assert seen == [
        ("closed", "open", "open", 1),
        ("open", "half_open", "half_open", 1),
        ("half_open", "closed", "closed", 1),
        ("closed", "open", "open", 2),
        ("open", "closed", "closed", 2),
    ]


def _storm(b: CircuitBreaker, n_threads: int) -> tuple[int, int]:
    """n_threads call ``b`` at once; admitted calls hold their slot until all have tried."""
    start = threading.Barrier(n_threads, timeout=5)
    release = threading.Event()
    admitted: list[int] = []
    refused: list[int] = []
    lock = threading.Lock()

    def probe(i: int) -> str:
        with lock:
            admitted.append(i)
        release.wait(5)  # hold the probe slot until every thread has tried
        return "ok"

    def worker(i: int) -> None:
        start.wait()
        try:
            b.call(probe, i)
        except CircuitOpenError:
            with lock:
                refused.append(i)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for _ in range(500):
        if len(admitted) + len(refused) >= n_threads:
            break
        threading.Event().wait(0.01)
    release.set()
    for t in threads:
        t.join(5)
    return len(admitted), len(refused)


def test_half_open_admits_exactly_the_probes_under_a_thread_storm() -> None:
    """16 threads racing into a half-open breaker: exactly half_open_probes get through."""
    probes, n_threads = 3, 16
    clock = FakeClock()
    b = CircuitBreaker(failure_threshold=1, reset_timeout=1, half_open_probes=probes, clock=clock)
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible to expose races
    try:
        for round_ in range(5):
            with pytest.raises(ProviderError):
                b.call(fail)
            assert b.state == "open"
            clock.advance(1)
            admitted, refused = _storm(b, n_threads)
            assert admitted == probes, f"round {round_}: {admitted} probes admitted"
            assert refused == n_threads - probes
            assert b.state == "closed"
    finally:
        sys.setswitchinterval(old)
