"""Classification: statuses, headers, network errors and SDK-shaped exceptions."""

from __future__ import annotations

import socket
from datetime import UTC, datetime
from email.utils import format_datetime

import pytest

from surefoot.errors import CircuitOpenError, TimeoutError_
from surefoot.resilience import (
    DEFAULT_CLASSIFIER,
    ProviderError,
    classify,
    classify_stream_error,
    is_retryable,
    parse_retry_after,
)


@pytest.mark.parametrize(
    ("status", "retry"),
    [
        (408, True),
        (429, True),
        (500, True),
        (502, True),
        (503, True),
        (504, True),
        (529, True),
        (400, False),
        (401, False),
        (403, False),
        (404, False),
        (422, False),
        (599, True),
        (418, False),
    ],
)
def test_status_table(status: int, retry: bool) -> None:
    """Transient statuses retry, client errors do not."""
    d = classify(status)
    assert d.retry is retry and d.reason and d.status == status


def test_404_reason_explains_the_deploy_trap() -> None:
    """A 404 is permanent by status even just after a deploy, and the reason says why."""
    d = classify(ProviderError(404, body="tool endpoint /v2/search not found"))
    assert not d.retry and "deploy" in d.reason


def test_insufficient_quota_429_is_not_retried() -> None:
    """A 429 whose body says insufficient_quota fails at once; a plain 429 retries."""
    body = {"error": {"code": "insufficient_quota", "message": "You exceeded your quota"}}
    assert not is_retryable(ProviderError(429, body=body))
    assert is_retryable(ProviderError(429))


def test_retry_after_is_carried_in_the_decision() -> None:
    """A 429 with Retry-After: 10 retries after 10 s."""
    d = classify(ProviderError(429, {"Retry-After": "10"}))
    assert d.retry and d.after == 10.0 and "10 s" in d.reason


def test_x_should_retry_overrides_the_status() -> None:
    """x-should-retry: false stops a 503; true makes a 400 retryable."""
    assert not is_retryable(ProviderError(503, {"x-should-retry": "false"}))
    assert is_retryable(ProviderError(400, {"X-Should-Retry": "true"}))


class _Resp:
    def __init__(self, status: int, headers: dict[str, str]) -> None:
        self.status_code = status
        self.headers = headers


class HTTPStatusError(Exception):
    """Shaped like httpx.HTTPStatusError: the status lives on .response."""

    def __init__(self, status: int, headers: dict[str, str]) -> None:
        super().__init__(f"status {status}")
        self.response = _Resp(status, headers)


class APIConnectionError(Exception):
    """Shaped like openai/anthropic APIConnectionError."""


class APITimeoutError(APIConnectionError):
    """Shaped like openai/anthropic APITimeoutError."""


class ReadTimeout(Exception):
    """Shaped like httpx.ReadTimeout (by name only)."""


def test_foreign_exceptions_are_recognised_without_importing_them() -> None:
    """httpx/openai/anthropic exceptions classify by attributes and class names."""
    d = classify(HTTPStatusError(503, {"retry-after-ms": "1500"}))
    assert d.retry and d.after == 1.5 and d.status == 503
    assert not is_retryable(HTTPStatusError(401, {}))
    assert is_retryable(APITimeoutError("timed out"))
    assert "timed out" in classify(APITimeoutError()).reason
    assert is_retryable(APIConnectionError())
    assert is_retryable(ReadTimeout())


def test_builtin_network_errors_and_bugs() -> None:
    """Connection resets, DNS failures and timeouts retry; a ValueError (a bug) does not."""
    assert is_retryable(ConnectionResetError())
    assert is_retryable(socket.gaierror())
    assert is_retryable(TimeoutError())
    assert is_retryable(TimeoutError_(2.0))
    assert not is_retryable(ValueError("bad"))
    assert not is_retryable(CircuitOpenError("x", 1.0))


def test_classifier_is_extensible() -> None:
    """extend() adds rules without changing the default table."""

    class QuotaError(Exception):
        pass

    c = DEFAULT_CLASSIFIER.extend(
        status={404: (True, "our deploys are eventually consistent")},
        types=[(QuotaError, False, "quota")],
    )
    assert c.classify(404).retry and not DEFAULT_CLASSIFIER.classify(404).retry
    assert c.classify(QuotaError()).reason == "quota"
    with pytest.raises(TypeError, match="classify"):
        classify("oops")


def test_parse_retry_after_forms() -> None:
    """Seconds, milliseconds (which win) and HTTP dates; garbage gives None."""
    assert parse_retry_after({"Retry-After": "7"}) == 7.0
    assert parse_retry_after({"retry-after": "7", "retry-after-ms": "250"}) == 0.25
    when = datetime(2026, 1, 1, 0, 0, 30, tzinfo=UTC)
    now = datetime(2026, 1, 1, 0, 0, 0, tzinfo=UTC).timestamp()
    assert parse_retry_after({"Retry-After": format_datetime(when, usegmt=True)}, now=now) == 30.0
    assert parse_retry_after({"Retry-After": format_datetime(when, usegmt=True)}, now=now + 99) == 0
    assert parse_retry_after({"Retry-After": "soon"}) is None
    assert parse_retry_after({"Retry-After": "-3"}) is None
    assert parse_retry_after({}) is None


OVERLOADED_EVENT = {
    "type": "error",
    "error": {"type": "overloaded_error", "message": "Overloaded"},
}


def test_pre_content_overloaded_stream_event_is_retried() -> None:
    """An SSE overloaded_error before any content retries; after content it does not."""
    before = classify_stream_error(OVERLOADED_EVENT, content_seen=False)
    after = classify_stream_error(OVERLOADED_EVENT, content_seen=True)
    assert before.retry and "overloaded_error" in before.reason
    assert not after.retry and "repeat" in after.reason
    text = '{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}'
    assert classify_stream_error(text, content_seen=False).retry
    assert classify_stream_error(text.encode(), content_seen=False).retry


def test_stream_error_types_follow_the_status_they_stand_for() -> None:
    """api_error/rate_limit_error retry; invalid_request_error and unknown types do not."""
    assert classify_stream_error({"error": {"type": "api_error"}}, content_seen=False).retry
    assert classify_stream_error({"error": {"code": "server_error"}}, content_seen=False).retry
    bad = {"type": "error", "error": {"type": "invalid_request_error"}}
    assert not classify_stream_error(bad, content_seen=False).retry
    odd = classify_stream_error({"error": {"type": "mystery"}}, content_seen=False)
    assert not odd.retry and "mystery" in odd.reason


def test_an_sdk_exception_for_a_200_stream_error_is_recognised() -> None:
    """The SDK's APIStatusError for an in-stream error (status 200) retries by its body."""

    class APIStatusError(Exception):
        def __init__(self) -> None:
            super().__init__("Overloaded")
            self.status_code = 200
            self.body = OVERLOADED_EVENT
            self.headers: dict[str, str] = {}

    err = APIStatusError()
    assert classify_stream_error(err, content_seen=False).retry
    assert classify(err).retry and is_retryable(err)
