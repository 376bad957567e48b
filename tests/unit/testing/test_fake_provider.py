"""FakeProvider with the real SDKs (SDK retries off): every scripted fault reaches the SDK as
a provider would send it, and the server counts what it received."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from typing import Any

import anthropic
import openai
import pytest

from surefoot.errors import ConfigError
from surefoot.resilience import classify
from surefoot.testing import (
    DropBeforeReply,
    DropMidReply,
    FakeProvider,
    Reply,
    Status,
    StreamError,
    insufficient_quota,
    overloaded,
    parse_fault,
    rate_limited,
)

MSGS = [{"role": "user", "content": "hello there"}]


@pytest.fixture
def fp() -> Any:
    """A fresh fake provider on a free loopback port."""
    with FakeProvider() as p:
        yield p


@pytest.fixture
def oai(fp: FakeProvider) -> Any:
    """The real OpenAI SDK pointed at the fake, with its own retries off."""
    c = openai.OpenAI(base_url=fp.openai_url, api_key="sk-test-key", max_retries=0, timeout=5)
    yield c
    c.close()


@pytest.fixture
def ant(fp: FakeProvider) -> Any:
    """The real Anthropic SDK pointed at the fake, with its own retries off."""
    c = anthropic.Anthropic(base_url=fp.anthropic_url, api_key="ak-test", max_retries=0, timeout=5)
    yield c
    c.close()


def chat(c: Any, **kw: Any) -> Any:
    return c.chat.completions.create(model="gpt-test", messages=MSGS, **kw)


def message(c: Any, **kw: Any) -> Any:
    return c.messages.create(model="claude-test", max_tokens=64, messages=MSGS, **kw)


def test_binds_loopback_on_a_free_port_and_answers_both_formats(
    fp: FakeProvider, oai: Any, ant: Any
) -> None:
    """The server listens on 127.0.0.1 only and answers chat completions and messages."""
    assert fp._server is not None and fp._server.server_address[0] == "127.0.0.1"
    r = chat(oai)
    m = message(ant)
    assert r.choices[0].message.content == m.content[0].text  # same text for same messages
    assert r.usage.prompt_tokens == m.usage.input_tokens > 0
    assert [x.api for x in fp.received] == ["openai", "anthropic"]
    assert fp.count() == 2 and fp.completed == 2 and fp.answered == [1, 2]


def test_keeps_no_api_key_from_requests(fp: FakeProvider, oai: Any, ant: Any) -> None:
    """Authorization and x-api-key headers are dropped from what the server records."""
    chat(oai)
    message(ant)
    recorded = json.dumps([r.headers for r in fp.received])
    assert "sk-test-key" not in recorded and "ak-test" not in recorded
    assert fp.received[0].retry_count == 0  # the SDK's own retry counter header is read


def test_retry_after_and_retry_after_ms_reach_the_sdk_error(fp: FakeProvider, oai: Any) -> None:
    """A scripted 429 carries Retry-After / retry-after-ms, and the classifier reads them."""
    fp.script(rate_limited(retry_after=2), rate_limited(ms=150))
    waits = []
    for _ in range(2):
        with pytest.raises(openai.RateLimitError) as info:
            chat(oai)
        waits.append(classify(info.value).after)
    assert waits == [2.0, 0.15]
    assert fp.count(fault="429") == 2


def test_insufficient_quota_is_a_429_that_is_not_retryable(fp: FakeProvider, oai: Any) -> None:
    """insufficient_quota arrives as openai.RateLimitError and classifies as permanent."""
    fp.script(insufficient_quota())
    with pytest.raises(openai.RateLimitError) as info:
        chat(oai)
    assert info.value.code == "insufficient_quota"
    assert not classify(info.value).retry
    assert fp.count(fault="429:insufficient_quota") == 1


def test_overloaded_529_and_x_should_retry(fp: FakeProvider, ant: Any) -> None:
    """529 overloaded is transient; x-should-retry overrides the status either way."""
    fp.script(overloaded(), Status(503, should_retry=False), Status(400, should_retry=True))
    decisions = []
    for _ in range(3):
        with pytest.raises(anthropic.APIStatusError) as info:
            message(ant)
        decisions.append((info.value.status_code, classify(info.value).retry))
    assert decisions == [(529, True), (503, False), (400, True)]


def test_slow_reply_times_out_at_the_client(fp: FakeProvider, oai: Any) -> None:
    """A reply slower than the client's timeout is an APITimeoutError (retryable)."""
    fp.script(Reply(delay=2.0))
    with pytest.raises(openai.APITimeoutError) as info:
        chat(oai, timeout=0.2)
    assert classify(info.value).retry
    assert fp.count() == 1 and fp.completed == 0


def test_connection_dropped_before_and_during_a_reply(fp: FakeProvider, oai: Any) -> None:
    """Dropped before the reply or half-way through: APIConnectionError both times."""
    fp.script(DropBeforeReply(), DropMidReply())
    for _ in range(2):
        with pytest.raises(openai.APIConnectionError) as info:
            chat(oai)
        assert classify(info.value).retry
    assert [r.fault for r in fp.received] == ["drop-before", "drop-during"]
    assert fp.completed == 0 and fp.billed == 1  # the cut reply was produced, so paid


def test_openai_stream_errors_after_some_tokens(fp: FakeProvider, oai: Any) -> None:
    """A 200 stream sends 3 pieces, then an error event the SDK raises as APIError."""
    fp.script(StreamError(after=3, error_type="server_error"))
    got = []
    with pytest.raises(openai.APIError) as info:
        for chunk in chat(oai, stream=True):
            if chunk.choices and chunk.choices[0].delta.content:
                got.append(chunk.choices[0].delta.content)
    assert len(got) == 3
    assert info.value.body["type"] == "server_error"  # type: ignore[index]


def test_openai_stream_cut_mid_reply(fp: FakeProvider, oai: Any) -> None:
    """A stream whose connection drops after 2 pieces fails as APIConnectionError."""
    fp.script(DropMidReply(after=2))
    got = []
    with pytest.raises(openai.APIConnectionError):
        for chunk in chat(oai, stream=True):
            if chunk.choices and chunk.choices[0].delta.content:
                got.append(chunk.choices[0].delta.content)
    assert len(got) == 2


def test_anthropic_overloaded_error_event_inside_a_200_stream(fp: FakeProvider, ant: Any) -> None:
    """Anthropic's overloaded_error SSE event after 2 pieces reaches the SDK with status 200."""
    fp.script(StreamError(after=2))
    got = []
    with (
        pytest.raises(anthropic.APIStatusError) as info,
        ant.messages.stream(model="claude-test", max_tokens=64, messages=MSGS) as s,
    ):
        got.extend(s.text_stream)
    assert len(got) == 2
    assert info.value.status_code == 200
    assert info.value.body["error"]["type"] == "overloaded_error"  # type: ignore[index]


def test_full_streams_in_both_formats(fp: FakeProvider, oai: Any, ant: Any) -> None:
    """Unfaulted streams carry the whole text, the finish reason and the usage."""
    text = "".join(
        c.choices[0].delta.content or ""
        for c in chat(oai, stream=True, stream_options={"include_usage": True})
        if c.choices
    )
    with ant.messages.stream(model="claude-test", max_tokens=64, messages=MSGS) as s:
        final = s.get_final_message()
    assert text == final.content[0].text == fp.text_for("openai", MSGS)
    assert final.usage.output_tokens > 0 and fp.completed == 2


def test_script_is_consumed_in_order_then_replies_are_normal(fp: FakeProvider, oai: Any) -> None:
    """Faults apply to the next requests in order; after them, normal replies."""
    fp.script([Status(500), Reply(text="scripted")])
    with pytest.raises(openai.InternalServerError):
        chat(oai)
    assert chat(oai).choices[0].message.content == "scripted"
    assert chat(oai).choices[0].message.content == fp.text_for("openai", MSGS)
    assert fp.pending() == 0 and fp.count() == 3


def test_models_endpoint_reports_the_model(fp: FakeProvider) -> None:
    """GET /v1/models names the configured model."""
    with urllib.request.urlopen(fp.openai_url + "/models", timeout=5) as r:
        assert json.load(r)["data"][0]["id"] == "fake-provider-model"


def test_parse_fault_reads_the_cli_specs() -> None:
    """Each --fault spelling gives the fault it names; a bad one says what is allowed."""
    assert parse_fault("429:retry-after=2") == Status(429, retry_after=2.0)
    assert parse_fault("503:x-should-retry=false") == Status(503, should_retry=False)
    assert parse_fault("429:retry-after-ms=150") == Status(429, retry_after_ms=150.0)
    assert parse_fault("quota") == insufficient_quota()
    assert parse_fault("overloaded") == overloaded()
    assert parse_fault("slow=1.5") == Reply(delay=1.5)
    assert parse_fault("drop-before") == DropBeforeReply()
    assert parse_fault("drop-during=3") == DropMidReply(3)
    assert parse_fault("stream-error=1:api_error") == StreamError(1, "api_error")
    with pytest.raises(ConfigError, match="unknown fault 'teapot'"):
        parse_fault("teapot")


def test_cli_serves_scripted_faults_until_stopped() -> None:
    """`surefoot fake-provider` prints its URL, serves the faults, and stops by pid."""
    with subprocess.Popen(
        [sys.executable, "-m", "surefoot", "fake-provider", "--port", "0", "--fault", "503"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        _drive_cli(proc)


def _drive_cli(proc: subprocess.Popen[str]) -> None:
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        url = line.split()[-1]
        assert url.startswith("http://127.0.0.1:")
        c = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=5)
        with pytest.raises(openai.InternalServerError):
            chat(c)
        assert chat(c).choices[0].message.content
        c.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert proc.stderr is not None
    assert "received 2 requests, answered 1 in full" in proc.stderr.read()
