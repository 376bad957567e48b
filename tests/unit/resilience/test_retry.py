"""retry_call / aretry_call / @retry: attempts, waits, deadlines, timeouts and history."""

from __future__ import annotations

import asyncio
import random
import warnings

import pytest
from hypothesis import given
from hypothesis import strategies as st

from surefoot import ConfigError, FakeClock
from surefoot.errors import TimeoutError_
from surefoot.resilience import (
    Backoff,
    ProviderError,
    RetryBudget,
    RetryEvent,
    RetryPolicy,
    aretry_call,
    attempts_of,
    decide,
    faults,
    retry,
    retry_call,
)

NOJ = Backoff(0.5, 8, "none")


def flaky(errors: list[BaseException], result: str = "ok") -> faults.FaultyCall[str]:
    """A service failing with each error in turn, then returning result."""
    return faults.wrap(lambda: result, faults.Script(list(errors)))


def test_success_needs_one_call_and_no_clock() -> None:
    """A first-try success calls once and never sleeps."""
    clock = FakeClock()
    svc = flaky([])
    assert retry_call(svc, clock=clock) == "ok"
    assert svc.calls == 1 and clock.sleeps == []


def test_retries_with_the_backoff_waits() -> None:
    """Two 503s then success: three calls, waits 0.5 and 1 on the clock."""
    clock = FakeClock()
    svc = flaky([ProviderError(503), ProviderError(503)])
    out = retry_call(svc, policy=RetryPolicy(max_attempts=4, backoff=NOJ), clock=clock)
    assert out == "ok" and svc.calls == 3 and clock.sleeps == [0.5, 1.0]


def test_gives_up_and_reraises_the_last_error_unchanged() -> None:
    """After max_attempts the last error itself is raised, with the history attached."""
    clock = FakeClock()
    errs = [ProviderError(503), ProviderError(502), ProviderError(500)]
    svc = flaky(errs)
    with pytest.raises(ProviderError) as info:
        retry_call(svc, policy=RetryPolicy(max_attempts=3, backoff=NOJ), clock=clock)
    assert info.value.status_code == 500
    hist = attempts_of(info.value)
    assert [a.number for a in hist] == [1, 2, 3]
    assert [a.wait for a in hist] == [0.5, 1.0, None]
    assert "attempts exhausted" in hist[-1].reason
    assert any("gave up after 3 attempts" in n for n in info.value.__notes__)


def test_permanent_errors_are_not_retried() -> None:
    """A 401 is raised after one call."""
    svc = flaky([ProviderError(401)])
    with pytest.raises(ProviderError):
        retry_call(svc, policy=RetryPolicy(max_attempts=5), clock=FakeClock())
    assert svc.calls == 1


def test_zero_wait_never_calls_sleep() -> None:
    """With a zero backoff the clock records no sleeps at all."""
    clock = FakeClock()
    svc = flaky([ProviderError(503)] * 2)
    retry_call(svc, policy=RetryPolicy(max_attempts=3, backoff=Backoff(0, 0, "none")), clock=clock)
    assert svc.calls == 3 and clock.sleeps == []


def test_retry_after_is_obeyed_exactly_without_jitter() -> None:
    """A 429 with Retry-After: 2 waits exactly 2 s, not the backoff, with jitter turned off."""
    clock = FakeClock()
    svc = flaky([ProviderError(429, {"retry-after": "2"})])
    retry_call(svc, policy=RetryPolicy(backoff=NOJ, retry_after_jitter=0), clock=clock)
    assert clock.sleeps == [2.0]


def test_long_retry_after_fails_at_once() -> None:
    """A Retry-After above max_retry_after, or beyond the deadline, fails without sleeping."""
    for policy in (RetryPolicy(max_retry_after=30), RetryPolicy(deadline=5)):
        clock = FakeClock()
        svc = flaky([ProviderError(429, {"retry-after": "60"})])
        with pytest.raises(ProviderError) as info:
            retry_call(svc, policy=policy, clock=clock)
        assert svc.calls == 1 and clock.sleeps == []
        assert "60 s" in attempts_of(info.value)[0].reason


def test_on_retry_sees_every_decision() -> None:
    """The hook gets one event per failed attempt, the last one a give-up."""
    events: list[RetryEvent] = []
    svc = flaky([ProviderError(503)] * 5)
    with pytest.raises(ProviderError):
        retry_call(
            svc,
            policy=RetryPolicy(max_attempts=3, backoff=NOJ),
            clock=FakeClock(),
            on_retry=events.append,
        )
    assert [(e.attempt, e.retry) for e in events] == [(1, True), (2, True), (3, False)]


def test_retry_on_types_and_callables() -> None:
    """retry_on as types retries only those; as a callable decides per error."""
    svc = faults.wrap(lambda: "ok", faults.Script([KeyError("k"), None]))
    assert retry_call(svc, policy=RetryPolicy(retry_on=KeyError, backoff=NOJ), clock=FakeClock())
    svc2 = faults.wrap(lambda: "ok", faults.Script([KeyError("k")]))
    with pytest.raises(KeyError):
        retry_call(svc2, policy=RetryPolicy(retry_on=lambda e: False), clock=FakeClock())
    assert svc2.calls == 1


def test_slow_then_fast_succeeds_on_attempt_two() -> None:
    """A 5 s call cut at a 1 s timeout fails with TimeoutError_; the fast retry succeeds."""
    clock = FakeClock()
    svc = faults.wrap(lambda: "ok", faults.Slow([5.0, 0.2]), clock=clock)
    policy = RetryPolicy(max_attempts=3, backoff=NOJ, timeout_per_attempt=1.0)
    events: list[RetryEvent] = []
    assert retry_call(svc, policy=policy, clock=clock, on_retry=events.append) == "ok"
    assert svc.calls == 2 and svc.effects == 1
    assert isinstance(events[0].error, TimeoutError_)
    assert clock.elapsed == pytest.approx(1.0 + 0.5 + 0.2)


@given(
    durations=st.lists(st.floats(0, 20), min_size=1, max_size=8),
    deadline=st.floats(0.5, 30),
    timeout=st.one_of(st.none(), st.floats(0.1, 10)),
    attempts=st.integers(1, 8),
    seed=st.integers(0, 1000),
)
def test_total_simulated_time_never_exceeds_the_deadline(
    durations: list[float], deadline: float, timeout: float | None, attempts: int, seed: int
) -> None:
    """Whatever the call durations, waits and timeouts, elapsed time stays within the deadline."""
    clock = FakeClock()
    inj = faults.chain(faults.Slow(durations), faults.FailFraction(0.5, 503, seed=seed))
    svc = faults.wrap(lambda: "ok", inj, clock=clock)
    with warnings.catch_warnings():  # timeout >= deadline is allowed here; it only warns
        warnings.simplefilter("ignore")
        policy = RetryPolicy(
            max_attempts=attempts,
            backoff=Backoff(0.5, 8, "full"),
            deadline=deadline,
            timeout_per_attempt=timeout,
        )
    try:
        retry_call(svc, policy=policy, clock=clock, rng=random.Random(seed))
    except (ProviderError, TimeoutError_):
        pass
    # FakeClock keeps epoch time (~1.7e9 s), whose float resolution is ~2.4e-7 s
    assert clock.elapsed <= deadline + 1e-6
    assert svc.calls <= attempts


def test_budget_stops_retries_during_an_outage() -> None:
    """With an empty budget the call gives up after one attempt and says why."""
    budget = RetryBudget(0.1, initial=1)
    policy = RetryPolicy(max_attempts=3, backoff=Backoff(0, 0, "none"), budget=budget)
    svc = faults.wrap(lambda: "ok", faults.Outage(1, 1000))
    for _ in range(10):
        with pytest.raises(ProviderError):
            retry_call(svc, policy=policy, clock=FakeClock())
    # 10 requests earn 1 token, plus 1 initial: at most 2 retries, not 20
    assert budget.retries == 2 and svc.calls == 12
    assert budget.refused == 10  # every request ends on a refused retry


def test_async_driver_and_decorator() -> None:
    """aretry_call and @retry on async functions retry the same way."""
    clock = FakeClock()
    calls = {"n": 0}

    @retry(max_attempts=3, backoff=NOJ, clock=clock)
    async def work(x: int) -> int:
        calls["n"] += 1
        if calls["n"] < 3:
            raise ProviderError(503)
        return x * 2

    assert asyncio.run(work(21)) == 42
    assert calls["n"] == 3 and clock.sleeps == [0.5, 1.0]

    async def never() -> None:
        raise ProviderError(500)

    with pytest.raises(ProviderError):
        asyncio.run(aretry_call(never, policy=RetryPolicy(2, backoff=NOJ), clock=clock))


def test_async_attempts_are_cancelled_at_the_timeout() -> None:
    """A real async call slower than timeout_per_attempt is cancelled with TimeoutError_."""
    calls = {"n": 0}

    async def slow_then_fast() -> str:
        calls["n"] += 1
        if calls["n"] == 1:
            await asyncio.sleep(5)
        return "ok"

    policy = RetryPolicy(max_attempts=2, backoff=Backoff(0, 0, "none"), timeout_per_attempt=0.05)
    assert asyncio.run(aretry_call(slow_then_fast, policy=policy)) == "ok"
    assert calls["n"] == 2


def test_sync_decorator_keeps_the_function() -> None:
    """@retry keeps the name and retries sync functions."""
    clock = FakeClock()
    n = {"c": 0}

    @retry(RetryPolicy(backoff=NOJ), clock=clock)
    def f() -> str:
        """doc"""
        n["c"] += 1
        if n["c"] == 1:
            raise ConnectionResetError()
        return "ok"

    assert f() == "ok" and f.__name__ == "f" and clock.sleeps == [0.5]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_attempts": 0}, "max_attempts must be an int >= 1"),
        ({"deadline": 0}, "deadline must be > 0"),
        ({"deadline": -1}, "deadline must be > 0"),
        ({"backoff": 3}, "backoff must be a Backoff"),
        ({"retry_on": 3}, "retry_on must be"),
    ],
)
def test_bad_policy_parameters(kwargs: dict[str, object], match: str) -> None:
    """Invalid policies raise ConfigError naming the value."""
    with pytest.raises(ConfigError, match=match):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]


def test_decide_is_one_pure_function_of_its_inputs() -> None:
    """decide() gives the same step for the same inputs and follows the rules in order."""
    p = RetryPolicy(max_attempts=3, backoff=Backoff(1, 8, "full"), deadline=10)
    e = ProviderError(503)
    a = decide(p, 1, e, 0.0, None, random.Random(5))
    b = decide(p, 1, e, 0.0, None, random.Random(5))
    assert a == b and a.retry and 0 <= a.wait <= 1
    assert not decide(p, 3, e, 0.0, None, random.Random(5)).retry  # attempts exhausted
    assert not decide(p, 1, ProviderError(401), 0.0, None, random.Random(5)).retry
    late = decide(p, 1, ProviderError(429, {"retry-after": "5"}), 6.0, None, random.Random(5))
    assert not late.retry and "deadline" in late.reason  # 5 s does not fit in the 4 s left
    ok = decide(p, 1, ProviderError(429, {"retry-after": "3"}), 6.0, None, random.Random(5))
    assert ok.retry and 3.0 <= ok.wait <= 3.3  # the server's wait, jittered above it


def test_a_timeout_as_long_as_the_deadline_warns_at_the_callers_line() -> None:
    """timeout_per_attempt >= deadline still runs but warns, pointing at the caller."""
    with pytest.warns(UserWarning, match="not shorter than deadline") as rec:
        RetryPolicy(deadline=10, timeout_per_attempt=10)
    assert rec[0].filename == __file__


def test_a_cancelled_caller_is_not_retried_and_leaves_no_task() -> None:
    """Cancelling aretry_call mid-attempt or mid-wait propagates at once: no retry, no task."""
    policy = RetryPolicy(max_attempts=5, backoff=Backoff(30, 30, "none"), timeout_per_attempt=10)

    async def scenario(fail_first: bool) -> tuple[int, int]:
        calls = {"n": 0}
        entered = asyncio.Event()

        async def fn() -> str:
            calls["n"] += 1
            entered.set()
            if fail_first:
                raise ProviderError(503)  # then aretry_call waits 30 s before attempt 2
            await asyncio.sleep(3600)
            return "late"

        task = asyncio.create_task(aretry_call(fn, policy=policy))
        await entered.wait()
        for _ in range(3):
            await asyncio.sleep(0)  # let it reach the attempt's await or the backoff sleep
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0)
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        return calls["n"], len(others)

    assert asyncio.run(scenario(fail_first=False)) == (1, 0)
    assert asyncio.run(scenario(fail_first=True)) == (1, 0)


def test_an_attempt_that_raises_timeouterror_itself_is_not_mistaken_for_the_limit() -> None:
    """A TimeoutError raised by the callee before the limit stays a plain TimeoutError."""
    seen: list[type[BaseException]] = []

    async def fn() -> str:
        raise TimeoutError("socket read timed out")

    policy = RetryPolicy(max_attempts=2, backoff=Backoff(0, 0, "none"), timeout_per_attempt=5)
    with pytest.raises(TimeoutError) as info:
        asyncio.run(aretry_call(fn, policy=policy, on_retry=lambda e: seen.append(type(e.error))))
    assert type(info.value) is TimeoutError and seen == [TimeoutError, TimeoutError]


def test_instant_retries_waits_on_a_fake_clock_and_restores_the_default() -> None:
    """instant_retries: retries without a clock record their waits and never really sleep."""
    from surefoot.clock import default_clock
    from surefoot.testing import instant_retries

    policy = RetryPolicy(max_attempts=3, backoff=Backoff(600, 600, "none"))

    @retry(policy)
    def decorated_before(svc: faults.FaultyCall[str]) -> str:
        return svc()

    before = default_clock()
    with instant_retries() as clock:
        svc = faults.wrap(lambda: "ok", faults.Script([503, 503]))
        assert decorated_before(svc) == "ok" and svc.calls == 3
        asvc = faults.wrap(lambda: "ok", faults.Script([503]))

        async def acall() -> str:
            return asvc()

        assert asyncio.run(aretry_call(acall, policy=policy)) == "ok" and asvc.calls == 2
    assert clock.sleeps == [600, 600, 600]  # ten minutes each, spent in no real time
    assert default_clock() is before


@pytest.mark.parametrize("ratio", [0.1, 0.2, 0.05, 0.01, 1 / 3])
def test_budget_earns_a_whole_token_after_one_over_ratio_requests(ratio: float) -> None:
    """ratio 0.1 and 10 requests give exactly one retry (float sums like 0.999… count as 1)."""
    budget = RetryBudget(ratio, initial=0)
    n = round(1 / ratio)
    for _ in range(n - 1):
        budget.record_request()
    assert not budget.try_retry()  # one request short of a token
    budget.record_request()
    assert budget.try_retry() and budget.retries == 1 and budget.refused == 1


def test_budget_accounting_holds_under_threads() -> None:
    """8 threads in an outage: retries <= initial + ratio x requests; the fake sees them all."""
    import threading

    budget = RetryBudget(0.1, initial=5)
    policy = RetryPolicy(max_attempts=3, backoff=Backoff(0, 0, "none"), budget=budget)
    svc = faults.wrap(lambda: "ok", faults.Outage(1, 10**9))
    per_thread = 250

    def worker() -> None:
        for _ in range(per_thread):
            with pytest.raises(ProviderError):
                retry_call(svc, policy=policy, clock=FakeClock())

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert budget.requests == 8 * per_thread
    assert budget.retries <= 5 + 0.1 * budget.requests
    assert budget.retries == 5 + 200  # every token earned was spent: 2,000 requests x 0.1
    assert svc.calls == budget.requests + budget.retries  # counted inside the fake
