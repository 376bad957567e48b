"""Traces of retries and breakers: one span per attempt, decisions and state changes as events."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from surefoot import FakeClock, RetryPolicy, retry, retry_call, telemetry
from surefoot.resilience import CircuitBreaker, ProviderError


def flaky(fails: int) -> Any:
    calls = {"n": 0}

    def call() -> str:
        calls["n"] += 1
        if calls["n"] <= fails:
            raise ProviderError(503)
        return "ok"

    return call


def test_one_span_per_attempt_with_the_decision_on_each_failure(spans: Any) -> None:
    """Two failures then a success: three attempt spans; the failed two carry a retry event."""
    fn = flaky(2)
    assert retry_call(fn, policy=RetryPolicy(max_attempts=3), clock=FakeClock()) == "ok"
    got = spans.get_finished_spans()
    assert [s.name for s in got] == ["surefoot.attempt"] * 3
    assert [s.attributes["surefoot.attempt"] for s in got] == [1, 2, 3]
    assert all(s.attributes["surefoot.function"].endswith("call") for s in got)
    assert [s.status.status_code.name for s in got] == ["ERROR", "ERROR", "UNSET"]
    for s in got[:2]:
        decision = next(e for e in s.events if e.name == "surefoot.retry.decision")
        assert decision.attributes["surefoot.retry.retry"] is True
        assert decision.attributes["surefoot.retry.reason_code"] == "retryable"
        assert decision.attributes["error.type"] == "ProviderError"
        assert any(e.name == "exception" for e in s.events)
    assert not got[2].events


def test_give_up_is_an_event_with_its_reason(spans: Any) -> None:
    """A non-retryable error: one span whose decision says retry=False, not_retryable."""

    def bad() -> None:
        raise ProviderError(400)

    with pytest.raises(ProviderError):
        retry_call(bad, clock=FakeClock())
    (s,) = spans.get_finished_spans()
    (decision,) = [e for e in s.events if e.name == "surefoot.retry.decision"]
    assert decision.attributes["surefoot.retry.retry"] is False
    assert decision.attributes["surefoot.retry.reason_code"] == "not_retryable"
    assert decision.attributes["surefoot.retry.reason"].startswith("not retryable")


def test_exhausted_attempts_are_counted_by_reason(spans: Any) -> None:
    """Three 503s with three attempts: two retries and one give-up (attempts_exhausted)."""
    with pytest.raises(ProviderError):
        retry_call(flaky(5), policy=RetryPolicy(max_attempts=3), clock=FakeClock())
    fam = next(f for f in telemetry.collect() if f.name == "surefoot_retry_decisions_total")
    assert fam.value(decision="retry", reason="retryable", error_type="ProviderError") == 2
    assert (
        fam.value(decision="give_up", reason="attempts_exhausted", error_type="ProviderError") == 1
    )
    assert len(spans.get_finished_spans()) == 3


def test_decorated_plain_policy_is_traced_on_the_first_attempt(spans: Any) -> None:
    """@retry on a plain policy makes a span even when the first attempt succeeds."""
    clock = FakeClock()

    @retry(clock=clock)
    def fine() -> int:
        return 1

    assert fine() == 1
    (s,) = spans.get_finished_spans()
    assert s.attributes["surefoot.attempt"] == 1


def test_async_attempts_are_spans_too(spans: Any) -> None:
    """aretry_call: one span per attempt, nested under the caller's span."""
    from surefoot.resilience import aretry_call

    calls = {"n": 0}

    async def call() -> str:
        calls["n"] += 1
        if calls["n"] == 1:
            raise ProviderError(503)
        return "ok"

    async def main() -> str:
        with telemetry.TRACING.tracer.start_as_current_span("caller"):
            return await aretry_call(call, clock=FakeClock())

    assert asyncio.run(main()) == "ok"
    got = {s.name: s for s in spans.get_finished_spans()}
    attempts = [s for s in spans.get_finished_spans() if s.name == "surefoot.attempt"]
    assert len(attempts) == 2
    assert all(s.parent.span_id == got["caller"].context.span_id for s in attempts)


def test_breaker_state_changes_are_events_on_the_current_span(spans: Any) -> None:
    """The span current when a breaker opens gets a surefoot.breaker.state_change event."""
    b = CircuitBreaker("llm", failure_threshold=1, clock=FakeClock())
    with (
        telemetry.TRACING.tracer.start_as_current_span("agent-turn"),
        pytest.raises(ProviderError),
    ):
        b.call(flaky(1))
    (turn,) = spans.get_finished_spans()
    (ev,) = [e for e in turn.events if e.name == "surefoot.breaker.state_change"]
    assert dict(ev.attributes) == {
        "surefoot.breaker.name": "llm",
        "surefoot.breaker.from": "closed",
        "surefoot.breaker.to": "open",
    }


def test_no_spans_until_instrumented() -> None:
    """Without instrument() nothing is traced and the tracer switch stays off."""
    assert telemetry.TRACING.tracer is None
    assert retry_call(flaky(1), clock=FakeClock()) == "ok"


def test_a_runs_trace_id_is_derived_from_its_id() -> None:
    """trace_id_of is stable per run id, differs between ids and is never 0."""
    a, b = telemetry.trace_id_of("order-42"), telemetry.trace_id_of("order-43")
    assert a == telemetry.trace_id_of("order-42") and a != b and a > 0 and a < 2**128
