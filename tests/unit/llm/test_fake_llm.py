"""FakeLLM: deterministic, priced, counting, fault-injecting."""

from __future__ import annotations

import asyncio

import pytest

from surefoot import ConfigError, FakeClock
from surefoot.codec import dumps, loads
from surefoot.errors import TimeoutError_
from surefoot.llm import ChatCompletion, FakeLLM, ProviderError, ReplyLostError
from surefoot.resilience import faults

MSGS = [{"role": "user", "content": "why is the sky blue?"}]


def test_same_seed_same_messages_same_text() -> None:
    """Two fakes with one seed answer the same messages with the same text."""
    a = FakeLLM(seed=3).create(model="fake-1", messages=MSGS)
    b = FakeLLM(seed=3).create(model="fake-1", messages=MSGS)
    c = FakeLLM(seed=4).create(model="fake-1", messages=MSGS)
    assert a.choices[0].message.content == b.choices[0].message.content
    assert a.choices[0].message.content != c.choices[0].message.content


def test_usage_and_cost_are_counted_inside_the_fake() -> None:
    """Tokens and cost per reply add up to the fake's own totals."""
    llm = FakeLLM(seed=0, price_in=1e-6, price_out=2e-6)
    r1 = llm.create(model="m", messages=MSGS)
    r2 = llm.create(model="m", messages=[*MSGS, {"role": "user", "content": "and the sea?"}])
    assert llm.calls == 2
    assert llm.prompt_tokens == r1.usage.prompt_tokens + r2.usage.prompt_tokens
    assert llm.completion_tokens == r1.usage.completion_tokens + r2.usage.completion_tokens
    assert r1.usage.total_tokens == r1.usage.prompt_tokens + r1.usage.completion_tokens
    expected = r1.usage.prompt_tokens * 1e-6 + r1.usage.completion_tokens * 2e-6
    assert r1.cost == pytest.approx(expected)
    assert llm.cost == pytest.approx(r1.cost + r2.cost)


def test_responder_scripts_the_answer() -> None:
    """A responder callable decides the text."""
    llm = FakeLLM(responder=lambda msgs: f"{len(msgs)} messages")
    assert llm.create(model="m", messages=MSGS).choices[0].message.content == "1 messages"


def test_latency_is_spent_on_the_clock_not_as_a_sleep() -> None:
    """Latency advances the fake clock without recording a sleep."""
    clock = FakeClock()
    llm = FakeLLM(clock=clock, latency=0.25)
    llm.create(model="m", messages=MSGS)
    asyncio.run(llm.acreate(model="m", messages=MSGS))
    assert clock.elapsed == 0.5
    assert clock.sleeps == []


def test_injected_errors_are_raised_and_cost_nothing() -> None:
    """A scripted 429 with Retry-After is raised before any tokens are charged."""
    inj = faults.Script([ProviderError(429, {"Retry-After": "2"}), None])
    llm = FakeLLM(failures=inj)
    with pytest.raises(ProviderError) as info:
        llm.create(model="m", messages=MSGS)
    assert info.value.status_code == 429
    assert info.value.headers == {"retry-after": "2"}
    assert (llm.calls, llm.failed, llm.cost) == (1, 1, 0.0)
    llm.create(model="m", messages=MSGS)
    assert (llm.calls, llm.failed) == (2, 1)
    assert llm.cost > 0


def test_dropped_reply_charges_then_raises() -> None:
    """A lost reply still charges the tokens: the model did the work."""
    llm = FakeLLM(failures=faults.DropReply(first_per_key=True))
    with pytest.raises(ReplyLostError):
        llm.create(model="m", messages=MSGS, idempotency_key="k1")
    assert llm.cost > 0 and llm.completion_tokens > 0
    llm.create(model="m", messages=MSGS, idempotency_key="k1")
    assert llm.calls == 2 and llm.failed == 1


def test_timeout_cuts_a_slow_call_at_the_timeout() -> None:
    """A call slower than its timeout moves the clock by the timeout and raises TimeoutError_."""
    clock = FakeClock()
    llm = FakeLLM(clock=clock, latency=5.0)
    with pytest.raises(TimeoutError_):
        llm.create(model="m", messages=MSGS, timeout=2.0)
    assert clock.elapsed == 2.0
    with pytest.raises(TimeoutError_):
        asyncio.run(llm.acreate(model="m", messages=MSGS, timeout=1.0))
    assert clock.elapsed == 3.0
    assert llm.failed == 2 and llm.cost == 0.0


def test_fail_fraction_is_seeded() -> None:
    """The same seed fails the same requests."""

    def failures(seed: int) -> list[int]:
        llm = FakeLLM(failures=faults.FailFraction(0.3, 503, seed=seed))
        out = []
        for i in range(50):
            try:
                llm.create(model="m", messages=MSGS)
            except ProviderError:
                out.append(i)
        return out

    assert failures(1) == failures(1)
    assert failures(1) != failures(2)
    assert 5 <= len(failures(1)) <= 25


def test_reply_round_trips_through_the_codec() -> None:
    """A reply can be journalled: it encodes and decodes back to a ChatCompletion."""
    r = FakeLLM().create(model="m", messages=MSGS)
    back = loads(dumps(r))
    assert isinstance(back, ChatCompletion) and back == r


def test_bad_messages_are_a_clear_error() -> None:
    """Messages that are not role dicts raise ConfigError naming the value."""
    with pytest.raises(ConfigError, match="messages must be a list"):
        FakeLLM().create(model="m", messages="hi")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="latency"):
        FakeLLM(latency=-1)


def test_a_cut_call_times_out_before_its_injected_error() -> None:
    """A slow failing call cut at its timeout raises TimeoutError_, not the later error."""
    clock = FakeClock()
    inj = faults.Script([faults.Fault(error=ProviderError(503), delay=9.0)])
    llm = FakeLLM(clock=clock, failures=inj)
    with pytest.raises(TimeoutError_):
        llm.create(model="m", messages=MSGS, timeout=1.0)
    assert clock.elapsed == 1.0
