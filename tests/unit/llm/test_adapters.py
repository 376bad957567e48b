"""The OpenAI and Anthropic adapters over the real SDKs, against FakeProvider: surefoot's
policy is the only retry loop, and every attempt is counted at the server."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import anthropic
import openai
import pydantic
import pytest

from surefoot import FakeClock
from surefoot.errors import CircuitOpenError, InvalidReplyError
from surefoot.llm import ChatClient, ChatCompletion, Price, PriceTable, RateLimiter
from surefoot.resilience import (
    Backoff,
    CircuitBreaker,
    RetryBudget,
    RetryPolicy,
    attempts_of,
    classify,
)
from surefoot.testing import (
    DropBeforeReply,
    DropMidReply,
    FakeProvider,
    Reply,
    Status,
    StreamError,
    insufficient_quota,
    overloaded,
    rate_limited,
)

MSGS = [{"role": "user", "content": "hello there"}]

Make = Callable[..., ChatClient]
SDK_ERRORS = (openai.APIError, anthropic.APIError)


def test_reply_has_fakellm_shape(make: Make, fp: FakeProvider) -> None:
    """create() returns a ChatCompletion with text, usage and model, like FakeLLM."""
    r = make().create(messages=MSGS)
    assert isinstance(r, ChatCompletion)
    assert r.text == fp.text_for(fp.received[0].api, MSGS)
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens > 0
    assert r.choices[0].finish_reason == "stop"


def test_sdk_client_is_built_without_retries(make: Make, fp: FakeProvider) -> None:
    """With max_attempts=1 a 500 is sent once: the SDK adds no attempt of its own."""
    fp.script(Status(500))
    c = make(policy=RetryPolicy(max_attempts=1))
    with pytest.raises(SDK_ERRORS):
        c.create(messages=MSGS)
    assert fp.count() == 1
    assert c._sync().max_retries == 0  # type: ignore[attr-defined]


def test_retry_after_is_obeyed_on_the_clock(make: Make, fp: FakeProvider, clock: FakeClock) -> None:
    """429 with Retry-After: 2, then retry-after-ms: 150: waits 2 s and 0.15 s, plus jitter.

    The jitter is bounded above the server's wait (10 % by default), never below it.
    """
    fp.script(rate_limited(retry_after=2), rate_limited(ms=150))
    assert make().create(messages=MSGS).text
    (first, second) = clock.sleeps
    assert 2.0 <= first <= 2.2 and 0.15 <= second <= 0.165
    assert fp.count() == 3


def test_insufficient_quota_is_not_retried(make: Make, fp: FakeProvider) -> None:
    """A quota 429 fails at once with the SDK's RateLimitError, unchanged."""
    fp.script(insufficient_quota())
    with pytest.raises(SDK_ERRORS) as info:
        make().create(messages=MSGS)
    assert type(info.value).__name__ == "RateLimitError"
    assert fp.count() == 1


def test_overloaded_and_server_errors_are_retried_on_backoff(
    make: Make, fp: FakeProvider, clock: FakeClock
) -> None:
    """529 then 503: two retries, after the backoff's 0.5 s and 1 s."""
    fp.script(overloaded(), Status(503))
    assert make().create(messages=MSGS).text
    assert clock.sleeps == [0.5, 1.0]
    assert fp.count() == 3


def test_x_should_retry_overrides_the_status(make: Make, fp: FakeProvider) -> None:
    """x-should-retry: false stops a 503; true retries a 400."""
    fp.script(Status(503, should_retry=False))
    with pytest.raises(SDK_ERRORS):
        make().create(messages=MSGS)
    assert fp.count() == 1
    fp.script(Status(400, should_retry=True))
    assert make().create(messages=MSGS).text
    assert fp.count() == 3


def test_slow_reply_times_out_and_is_retried(make: Make, fp: FakeProvider) -> None:
    """A reply slower than timeout= fails that attempt; the retry gets the answer."""
    fp.script(Reply(delay=3.0))
    c = make()
    assert c.create(messages=MSGS, timeout=0.3).text
    assert fp.count() == 2 and fp.completed == 1


def test_policy_timeout_per_attempt_reaches_the_sdk(make: Make, fp: FakeProvider) -> None:
    """timeout_per_attempt is passed to the SDK call as its timeout."""
    fp.script(Reply(delay=3.0))
    policy = RetryPolicy(
        max_attempts=2, backoff=Backoff(0.01, 0.01, "none"), timeout_per_attempt=0.3
    )
    assert make(policy=policy, clock=None).create(messages=MSGS).text
    assert fp.count() == 2


def test_dropped_connections_are_retried(make: Make, fp: FakeProvider) -> None:
    """Dropped before and during a reply: retried, the third attempt answers."""
    fp.script(DropBeforeReply(), DropMidReply())
    assert make().create(messages=MSGS).text
    assert [r.fault for r in fp.received] == ["drop-before", "drop-during", "ok"]


def test_gives_up_with_the_last_error_and_history(make: Make, fp: FakeProvider) -> None:
    """After max_attempts 503s the SDK's error is raised unchanged, history attached."""
    fp.script([Status(503)] * 3)
    with pytest.raises(SDK_ERRORS) as info:
        make().create(messages=MSGS)
    assert getattr(info.value, "status_code", None) == 503
    assert len(attempts_of(info.value)) == 3
    assert fp.count() == 3


def test_empty_reply_is_retried(make: Make, fp: FakeProvider) -> None:
    """An empty reply counts as a failed attempt and is retried."""
    fp.script(Reply(text=""), Reply(text="   "))
    c = make()
    assert c.create(messages=MSGS).text == fp.text_for(fp.received[0].api, MSGS)
    assert fp.count() == 3
    assert c.meter.totals.failed_attempts == 2


def test_schema_failures_are_retried_and_parsed(make: Make, fp: FakeProvider) -> None:
    """A reply failing the JSON schema is retried; the valid one is parsed."""
    schema = {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}
    fp.script(Reply(text="sure! here it is"), Reply(text='{"n": "7"}'), Reply(text='{"n": 7}'))
    r = make().create(messages=MSGS, schema=schema)
    assert r.parsed == {"n": 7}
    assert fp.count() == 3


def test_last_invalid_reply_is_attached_when_attempts_run_out(make: Make, fp: FakeProvider) -> None:
    """Three invalid replies: InvalidReplyError carries the last one and the history."""
    fp.script(Reply(text="one"), Reply(text="two"), Reply(text="three"))
    with pytest.raises(InvalidReplyError) as info:
        make().create(messages=MSGS, schema={"type": "object"})
    err = info.value
    assert err.text == "three" and err.reply is not None and err.reply.text == "three"
    assert "not JSON" in err.reason
    assert len(attempts_of(err)) == 3 and fp.count() == 3


def test_pydantic_model_check(make: Make, fp: FakeProvider) -> None:
    """A pydantic model as schema: a wrong reply is retried, the right one parsed."""

    class Answer(pydantic.BaseModel):
        city: str
        population: int

    fp.script(
        Reply(text='{"city": "Oslo"}'),
        Reply(text='```json\n{"city": "Oslo", "population": 709000}\n```'),
    )
    r = make().create(messages=MSGS, schema=Answer)
    assert r.parsed == Answer(city="Oslo", population=709000)
    assert fp.count() == 2


def test_invalid_replies_spend_the_same_budget(make: Make, fp: FakeProvider) -> None:
    """An empty retry budget stops invalid-reply retries too."""
    budget = RetryBudget(ratio=0.01, initial=0)
    fp.script(Reply(text=""))
    with pytest.raises(InvalidReplyError):
        make(policy=RetryPolicy(max_attempts=5, budget=budget)).create(messages=MSGS)
    assert fp.count() == 1


def test_breaker_opens_and_stops_requests(make: Make, fp: FakeProvider, clock: FakeClock) -> None:
    """After 2 failures the breaker opens: the next call is refused without a request."""
    breaker = CircuitBreaker(failure_threshold=2, reset_timeout=30, clock=clock)
    c = make(policy=RetryPolicy(max_attempts=1), breaker=breaker)
    fp.script(Status(500), Status(500))
    for _ in range(2):
        with pytest.raises(SDK_ERRORS):
            c.create(messages=MSGS)
    with pytest.raises(CircuitOpenError):
        c.create(messages=MSGS)
    assert fp.count() == 2


def test_rate_limit_headers_make_the_next_call_wait(
    make: Make, fp: FakeProvider, clock: FakeClock
) -> None:
    """remaining-requests 0 with a 2 s reset: the next call waits 2 s before sending."""
    limiter = RateLimiter(clock=clock)
    fp.script(
        Reply(
            headers={
                "x-ratelimit-limit-requests": "60",
                "x-ratelimit-remaining-requests": "0",
                "x-ratelimit-reset-requests": "2s",
            }
        )
    )
    c = make(limiter=limiter)
    c.create(messages=MSGS)
    c.create(messages=MSGS)
    assert limiter.requests_per_minute == 60
    assert clock.sleeps == [2.0]
    assert fp.count() == 2


def test_cost_and_totals_per_client(make: Make, fp: FakeProvider) -> None:
    """Each attempt is priced (cached input cheaper); the meter totals calls and attempts."""
    prices = PriceTable({"openai-": Price(1.0, 4.0, 0.5), "anthropic-": Price(1.0, 4.0, 0.5)})
    fp.script(Status(500), Reply(text="a b c d", cached_tokens=2))
    c = make(prices=prices)
    r = c.create(messages=MSGS)
    u = r.usage
    assert u.cached_tokens == 2
    want = ((u.prompt_tokens - 2) * 1.0 + 2 * 0.5 + u.completion_tokens * 4.0) / 1e6
    assert r.cost == pytest.approx(want)
    t = c.meter.totals
    assert (t.calls, t.attempts, t.failed_attempts) == (1, 2, 1)
    assert t.cost == pytest.approx(want) and t.prompt_tokens == u.prompt_tokens


def test_stream_yields_text_and_the_whole_reply(make: Make, fp: FakeProvider) -> None:
    """stream() yields the pieces; .reply has the whole text and usage."""
    s = make().stream(messages=MSGS)
    pieces = list(s)
    assert len(pieces) > 1 and s.reply is not None
    assert "".join(pieces) == s.reply.text == fp.text_for(fp.received[0].api, MSGS)
    assert s.reply.usage.completion_tokens > 0


def test_stream_error_before_content_is_retried(make: Make, fp: FakeProvider) -> None:
    """overloaded_error before any text, and a status error: both retried."""
    fp.script(StreamError(after=0), Status(529))
    s = make().stream(messages=MSGS)
    assert s.read().text
    assert fp.count() == 3


def test_stream_error_after_content_is_not_retried(make: Make, fp: FakeProvider) -> None:
    """overloaded_error after 2 pieces: raised as it came, partial text kept, no retry."""
    fp.script(StreamError(after=2))
    s = make().stream(messages=MSGS)
    got = []
    with pytest.raises(SDK_ERRORS) as info:
        for piece in s:
            got.append(piece)
    assert len(got) == 2
    assert info.value.surefoot_partial == "".join(got)  # type: ignore[union-attr]
    assert any("not retried" in n for n in info.value.__notes__)
    assert fp.count() == 1


def test_stream_cut_mid_reply_is_not_retried(make: Make, fp: FakeProvider) -> None:
    """A connection dropped after 2 pieces: the error surfaces, partial text kept."""
    fp.script(DropMidReply(after=2))
    s = make().stream(messages=MSGS)
    with pytest.raises(Exception) as info:  # openai wraps it in APIConnectionError; anthropic not
        s.read()
    assert classify(info.value).retry  # transient, yet not retried: text was handed out
    assert s.text.count(" ") == 2
    assert fp.count() == 1


def test_async_create_and_stream(make: Make, fp: FakeProvider, clock: FakeClock) -> None:
    """acreate retries a 429 on the clock; astream retries a pre-content error."""
    c = make()

    async def main() -> tuple[str, str]:
        fp.script(rate_limited(retry_after=1))
        r = await c.acreate(messages=MSGS)
        fp.script(StreamError(after=0))
        s = await c.astream(messages=MSGS)
        whole = await s.read()
        await c.aclose()  # type: ignore[attr-defined]
        return r.text, whole.text

    a, b = asyncio.run(main())
    assert a == b and len(clock.sleeps) == 2
    assert 1.0 <= clock.sleeps[0] <= 1.1 and clock.sleeps[1] == 0.5
    assert fp.count() == 4


def test_async_stream_error_after_content(make: Make, fp: FakeProvider) -> None:
    """astream: an error after content is raised, not retried."""
    c = make()

    async def main() -> list[str]:
        fp.script(StreamError(after=1))
        s = await c.astream(messages=MSGS)
        got = []
        with pytest.raises(SDK_ERRORS):
            async for piece in s:
                got.append(piece)
        await c.aclose()  # type: ignore[attr-defined]
        return got

    assert len(asyncio.run(main())) == 1
    assert fp.count() == 1


def test_concurrent_threads_share_one_client(make: Make, fp: FakeProvider) -> None:
    """Eight threads through one client: eight requests, eight calls on the meter."""
    from concurrent.futures import ThreadPoolExecutor

    c = make()
    with ThreadPoolExecutor(8) as pool:
        texts = list(
            pool.map(
                lambda i: c.create(messages=[{"role": "user", "content": f"q{i}"}]).text, range(8)
            )
        )
    assert all(texts) and fp.count() == 8 and c.meter.totals.calls == 8


def test_idempotency_key_is_sent_as_a_header(make: Make, fp: FakeProvider) -> None:
    """idempotency_key reaches the server as Idempotency-Key, on every attempt."""
    fp.script(Status(500))
    make().create(messages=MSGS, idempotency_key="run-1:step-3")
    assert [r.idempotency_key for r in fp.received] == ["run-1:step-3"] * 2


def test_system_messages_reach_the_provider(make: Make, fp: FakeProvider) -> None:
    """A system message is sent (Anthropic: as the system parameter)."""
    make().create(messages=[{"role": "system", "content": "be brief"}, *MSGS])
    r = fp.received[0]
    sent = (
        r.messages
        if r.api == "openai"
        else [{"role": "system", "content": "be brief"}, *r.messages]
    )
    assert sent[0] == {"role": "system", "content": "be brief"}
    assert [m["role"] for m in r.messages][-1] == "user"


def test_rate_limit_headers_on_a_429_count_too(
    make: Make, fp: FakeProvider, clock: FakeClock
) -> None:
    """A 429 whose headers say 0 requests left for 3 s holds the retry until the reset."""
    limiter = RateLimiter(clock=clock)
    hint = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "3s"}
    fp.script(Status(429, extra_headers=hint))
    assert make(limiter=limiter).create(messages=MSGS).text
    assert clock.sleeps[0] == 0.5  # the backoff (no Retry-After) ...
    assert sum(clock.sleeps) == pytest.approx(3.0)  # ... then the limiter waits out the reset
    assert fp.count() == 2


def test_async_calls_survive_a_new_event_loop(make: Make, fp: FakeProvider) -> None:
    """acreate works across separate asyncio.run calls (one SDK client per loop)."""
    c = make()

    async def once() -> str:
        text = (await c.acreate(messages=MSGS)).text
        await c.aclose()  # type: ignore[attr-defined]  # this loop's SDK client
        return text

    texts = [asyncio.run(once()) for _ in range(3)]
    assert all(texts) and fp.count() == 3


def test_invalid_replies_do_not_trip_the_breaker(
    make: Make, fp: FakeProvider, clock: FakeClock
) -> None:
    """The provider answered, so an invalid reply is not a breaker failure."""
    breaker = CircuitBreaker(failure_threshold=1, reset_timeout=30, clock=clock)
    fp.script(Reply(text=""), Reply(text=""))
    assert make(breaker=breaker).create(messages=MSGS).text
    assert breaker.state == "closed" and fp.count() == 3


def _unclosed_after(fn: Callable[[], None]) -> list[str]:
    """The ResourceWarnings raised while ``fn`` runs and the garbage collector runs after."""
    import gc
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        fn()
        gc.collect()
    return [str(w.message) for w in seen if issubclass(w.category, ResourceWarning)]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_an_async_client_nobody_closed_is_closed_as_its_loop_ends(
    provider: str, fp: FakeProvider
) -> None:
    """``asyncio.run`` of an ``acreate`` with no ``aclose``: the loop's SDK client is closed
    as the loop shuts down, so no connection of it is left to the garbage collector (an
    "unclosed transport" ResourceWarning wherever the program is then)."""
    from surefoot.llm import connect

    url = fp.openai_url if provider == "openai" else fp.anthropic_url

    def use() -> None:
        c = connect(provider, "m", api_key="k", base_url=url)

        async def once() -> str:
            return (await c.acreate(messages=MSGS)).text

        assert asyncio.run(once())
        assert asyncio.run(once())  # a second loop, a second client: closed too
        c.close()

    assert _unclosed_after(use) == []
    assert fp.count() == 2


def test_an_async_client_of_a_durable_step_is_closed_with_the_app(
    fp: FakeProvider, tmp_path: Path
) -> None:
    """A durable async step calls the model on the app's loop; closing the app closes that
    loop's SDK client (the loop shuts its async generators down, as asyncio.run does)."""
    from surefoot.durable import App
    from surefoot.llm import connect

    def use() -> None:
        c = connect("openai", "m", api_key="k", base_url=fp.openai_url)
        app = App(f"sqlite:///{tmp_path / 'r.db'}", poll=0.01)

        @app.step
        async def ask() -> str:
            return (await c.acreate(messages=MSGS)).text

        @app.workflow
        async def flow() -> str:
            return await ask()

        assert app.start(flow, run_id="r").result(timeout=10)
        app.close()
        c.close()

    assert _unclosed_after(use) == []
    assert fp.count() == 1
