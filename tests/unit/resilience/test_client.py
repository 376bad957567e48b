"""Fallback and ResilientClient: counts taken inside the fake services."""

from __future__ import annotations

import asyncio

import pytest

from surefoot import FakeClock
from surefoot.resilience import (
    Backoff,
    CircuitBreaker,
    Fallback,
    ProviderError,
    ResilientClient,
    RetryBudget,
    RetryPolicy,
    faults,
)

ZERO = Backoff(0, 0, "none")


def test_fallback_moves_on_and_notes_earlier_errors() -> None:
    """A failing primary falls back; if all fail the last error carries notes of the others."""
    a = faults.wrap(lambda: "a", faults.Script([503]))
    b = faults.wrap(lambda: "b")
    fb = Fallback(a, b)
    assert fb() == "b" and fb() == "a"
    assert fb.served == [1, 1]
    bad = Fallback(
        faults.wrap(lambda: 1, faults.Script([500])), faults.wrap(lambda: 2, faults.Script([502]))
    )
    with pytest.raises(ProviderError) as info:
        bad()
    assert info.value.status_code == 502 and "backend 0 failed first" in info.value.__notes__[0]


def test_fallback_only_on_chosen_errors() -> None:
    """With on=(ConnectionError,) a ProviderError is raised, not fallen back from."""
    fb = Fallback(faults.wrap(lambda: 1, faults.Script([500])), lambda: 2, on=(ConnectionError,))
    with pytest.raises(ProviderError):
        fb()


def test_breaker_cuts_primary_calls_during_an_outage() -> None:
    """During requests 11..110 the breaker keeps most of them off the primary."""

    def run(with_breaker: bool) -> tuple[int, int, int]:
        clock = FakeClock()
        holder: list[ResilientClient[str]] = []
        down = faults.Outage(11, 110, counter=lambda: holder[0].requests)
        primary = faults.wrap(lambda: "p", down, clock=clock)
        backup = faults.wrap(lambda: "b", clock=clock)
        breaker = (
            CircuitBreaker(failure_threshold=3, reset_timeout=5, clock=clock)
            if with_breaker
            else None
        )
        client = ResilientClient(
            primary, backup, policy=RetryPolicy(3, backoff=ZERO), breaker=breaker, clock=clock
        )
        holder.append(client)
        for _ in range(200):
            client.call()
            clock.advance(0.1)
        return primary.calls, backup.calls, client.failed

    p_no, b_no, f_no = run(False)
    p_br, b_br, f_br = run(True)
    assert f_no == 0 and f_br == 0
    assert b_no == 100 and p_no == 100 * 3 + 100  # every outage request tried 3 times
    # 100 healthy requests reach the primary either way; in the outage the breaker lets
    # through only the 3 calls that trip it and a probe every reset_timeout
    assert p_br - 100 < 10
    assert b_br >= 100


def test_client_passes_the_attempt_timeout_through_the_breaker() -> None:
    """A slow primary is cut at timeout_per_attempt even behind the breaker."""
    clock = FakeClock()
    primary = faults.wrap(lambda: "p", faults.Slow([9.0, 0.1]), clock=clock)
    client = ResilientClient(
        primary,
        policy=RetryPolicy(2, backoff=ZERO, timeout_per_attempt=1.0),
        breaker=CircuitBreaker(clock=clock),
        clock=clock,
    )
    assert client.call() == "p"
    assert primary.calls == 2 and clock.elapsed == pytest.approx(1.1)


def test_budget_limits_retries_across_requests() -> None:
    """A shared budget keeps retries near its ratio of requests during an outage."""
    clock = FakeClock()
    primary = faults.wrap(lambda: "p", faults.Outage(1, 10_000), clock=clock)
    budget = RetryBudget(0.1, initial=0, max_tokens=10)
    client = ResilientClient(
        primary, lambda: "b", policy=RetryPolicy(3, backoff=ZERO, budget=budget)
    )
    for _ in range(100):
        assert client.call() == "b"
    assert primary.calls == 100 + budget.retries and budget.retries <= 10


def test_async_client() -> None:
    """acall retries the async primary and falls back to the async backup."""
    calls = {"p": 0}

    async def primary() -> str:
        calls["p"] += 1
        raise ProviderError(503)

    async def backup() -> str:
        return "b"

    client = ResilientClient(primary, backup, policy=RetryPolicy(2, backoff=ZERO))
    assert asyncio.run(client.acall()) == "b"
    assert calls["p"] == 2 and client.backup_ok == 1


def test_unhashable_callables_still_get_their_timeout() -> None:
    """A callable instance without __hash__ that takes timeout= still receives it."""

    class Service:
        __hash__ = None  # type: ignore[assignment]

        def __init__(self) -> None:
            self.seen: list[float | None] = []

        def __call__(self, timeout: float | None = None) -> str:
            self.seen.append(timeout)
            return "ok"

    svc = Service()
    client = ResilientClient(svc, policy=RetryPolicy(1, timeout_per_attempt=2.0))
    assert client.call() == "ok" and svc.seen == [2.0]


def test_async_fallback_counts_and_notes_like_the_sync_one() -> None:
    """Fallback.acall serves, counts failures and notes earlier errors as __call__ does."""
    plan = {"a": [ProviderError(503), None], "b": [ProviderError(502), None]}

    def backend(name: str):  # type: ignore[no-untyped-def]
        async def call() -> str:
            err = plan[name].pop(0) if plan[name] else None
            if err is not None:
                raise err
            return name

        return call

    fb = Fallback(backend("a"), backend("b"))
    with pytest.raises(ProviderError) as info:
        asyncio.run(fb.acall())  # both fail once: the last error, noting the first
    assert info.value.status_code == 502 and "backend 0 failed first" in info.value.__notes__[0]
    assert asyncio.run(fb.acall()) == "a"
    assert fb.served == [1, 0] and fb.failed == 1


def test_a_failing_backup_notes_the_primary_error_sync_and_async() -> None:
    """When the backup fails too, both drivers raise its error noting the primary's."""

    def primary() -> str:
        raise ProviderError(503)

    def backup() -> str:
        raise ProviderError(500)

    async def aprimary() -> str:
        raise ProviderError(503)

    async def abackup() -> str:
        raise ProviderError(500)

    client = ResilientClient(primary, backup, policy=RetryPolicy(1, backoff=ZERO))
    with pytest.raises(ProviderError) as info:
        client.call()
    aclient = ResilientClient(aprimary, abackup, policy=RetryPolicy(1, backoff=ZERO))
    with pytest.raises(ProviderError) as ainfo:
        asyncio.run(aclient.acall())
    for c, got in ((client, info.value), (aclient, ainfo.value)):
        assert got.status_code == 500
        assert any("the primary failed first: ProviderError" in n for n in got.__notes__)
        assert (c.requests, c.primary_ok, c.backup_ok, c.failed) == (1, 0, 0, 1)
