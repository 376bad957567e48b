"""What the fake provider does with one request: a normal reply, or a fault on cue."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..errors import ConfigError

__all__ = [
    "DropBeforeReply",
    "DropMidReply",
    "Fault",
    "Reply",
    "Status",
    "StreamError",
    "insufficient_quota",
    "overloaded",
    "parse_fault",
    "rate_limited",
]


@dataclass(frozen=True, slots=True)
class Reply:
    """Answer normally, after ``delay`` seconds, with this text and extra headers.

    Args:
        text: the reply (None: the provider's responder or its default text).
        delay: seconds to wait before answering (a slow reply; a client timeout shorter
            than this sees a read timeout).
        headers: extra response headers (``x-ratelimit-*`` for instance).
        cached_tokens: reported as cached prompt tokens in the usage.
    """

    text: str | None = None
    delay: float = 0.0
    headers: Mapping[str, str] = field(default_factory=dict)
    cached_tokens: int = 0


@dataclass(frozen=True, slots=True)
class Status:
    """Answer with an HTTP error status and a provider-shaped error body.

    Args:
        status: the HTTP status (429, 500, 503, 529, 400, …).
        retry_after: seconds sent as ``Retry-After``. retry_after_ms: sent as
            ``retry-after-ms``. should_retry: sent as ``x-should-retry: true|false``.
        error_type: the error's ``type`` in the body (default from the status).
        code: OpenAI's ``code`` field (``insufficient_quota`` for instance).
        message: the error message.
        delay: seconds to wait before answering.
        extra_headers: more response headers (``x-ratelimit-*`` on a 429, for instance).
    """

    status: int
    retry_after: float | None = None
    retry_after_ms: float | None = None
    should_retry: bool | None = None
    error_type: str | None = None
    code: str | None = None
    message: str | None = None
    delay: float = 0.0
    extra_headers: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 400 <= self.status <= 599:
            raise ConfigError(f"Status needs an HTTP error status 400-599, got {self.status!r}")

    def headers(self) -> dict[str, str]:
        """The hint headers this fault sends."""
        h: dict[str, str] = dict(self.extra_headers)
        if self.retry_after is not None:
            h["retry-after"] = f"{self.retry_after:g}"
        if self.retry_after_ms is not None:
            h["retry-after-ms"] = f"{self.retry_after_ms:g}"
        if self.should_retry is not None:
            h["x-should-retry"] = "true" if self.should_retry else "false"
        return h

    def kind(self) -> str:
        """The error type named in the body."""
        if self.error_type:
            return self.error_type
        return _TYPE_OF_STATUS.get(self.status, "api_error" if self.status >= 500 else "error")


_TYPE_OF_STATUS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


@dataclass(frozen=True, slots=True)
class DropBeforeReply:
    """Read the request, then close the connection without sending a byte."""

    delay: float = 0.0


@dataclass(frozen=True, slots=True)
class DropMidReply:
    """Send the status line, headers and part of the reply, then close the connection.

    A streaming request gets ``after`` content chunks first; a plain one gets half its body.
    The reply counts as *sent*: the model did the work (the tokens were paid for).
    """

    after: int = 2


@dataclass(frozen=True, slots=True)
class StreamError:
    """A 200 stream that sends ``after`` content chunks, then an SSE error event.

    ``error_type`` is Anthropic's name (``overloaded_error``, ``api_error``, …); the OpenAI
    format sends it as ``{"error": {"type": …}}``. A non-streaming request gets the status
    the error type stands for (529 for ``overloaded_error``).
    """

    after: int = 2
    error_type: str = "overloaded_error"

    def status(self) -> int:
        """The HTTP status a non-streaming request gets instead."""
        return {v: k for k, v in _TYPE_OF_STATUS.items()}.get(self.error_type, 500)


Fault = Reply | Status | DropBeforeReply | DropMidReply | StreamError


def rate_limited(retry_after: float | None = 1.0, *, ms: float | None = None) -> Status:
    """A 429 ``rate_limit_error`` with ``Retry-After`` (seconds) or ``retry-after-ms``."""
    return Status(429, retry_after=retry_after if ms is None else None, retry_after_ms=ms)


def insufficient_quota() -> Status:
    """OpenAI's 429 ``insufficient_quota``: out of credit; retrying cannot succeed."""
    return Status(
        429,
        error_type="insufficient_quota",
        code="insufficient_quota",
        message="You exceeded your current quota, please check your plan and billing details.",
    )


def overloaded() -> Status:
    """Anthropic's 529 ``overloaded_error``."""
    return Status(529, error_type="overloaded_error", message="Overloaded")


def _amount(spec: str, name: str, value: str, *, whole: bool = False) -> float:
    """A finite number >= 0 from a fault spec (a wait or a chunk count), else a ConfigError."""
    try:
        out = int(value) if whole else float(value)
    except ValueError:
        out = math.nan
    if not math.isfinite(out) or out < 0:
        kind = "a whole number >= 0" if whole else "a number of seconds >= 0"
        raise ConfigError(
            f"fault {spec!r}: {name} must be {kind}, got {value!r} (to send a malformed "
            "header on purpose, use Status(extra_headers={...}) from Python)"
        )
    return out


def parse_fault(spec: str) -> Fault:
    """A fault from a short text, as the ``surefoot fake-provider --fault`` option takes it.

    ``ok``, ``slow=SECONDS``, ``STATUS`` (``503``), ``STATUS:retry-after=2``,
    ``STATUS:retry-after-ms=150``, ``STATUS:x-should-retry=false``, ``quota``,
    ``overloaded``, ``drop-before``, ``drop-during[=CHUNKS]``,
    ``stream-error[=CHUNKS[:TYPE]]``.

    Raises:
        ConfigError: the text is none of these (the message lists them), or a wait or
        count in it is negative or not a number.
    """
    text = spec.strip().lower()
    head, _, tail = text.partition("=")
    try:
        if text == "ok":
            return Reply()
        if head == "slow":
            return Reply(delay=_amount(spec, "slow", tail))
        if text == "quota":
            return insufficient_quota()
        if text == "overloaded":
            return overloaded()
        if text == "drop-before":
            return DropBeforeReply()
        if head == "drop-during":
            return DropMidReply(int(_amount(spec, "drop-during", tail, whole=True)) if tail else 2)
        if head == "stream-error":
            n, _, kind = tail.partition(":")
            count = int(_amount(spec, "stream-error", n, whole=True)) if n else 2
            return StreamError(count, kind or "overloaded_error")
        status, _, opts = text.partition(":")
        if status.isdigit():
            kw: dict[str, float | bool] = {}
            for opt in filter(None, opts.split(",")):
                name, _, value = opt.partition("=")
                if name == "retry-after":
                    kw["retry_after"] = _amount(spec, name, value)
                elif name == "retry-after-ms":
                    kw["retry_after_ms"] = _amount(spec, name, value)
                elif name == "x-should-retry" and value in ("true", "false"):
                    kw["should_retry"] = value == "true"
                else:
                    raise ValueError(opt)
            return Status(int(status), **kw)  # type: ignore[arg-type]
    except ConfigError:
        raise
    except ValueError:
        pass
    raise ConfigError(
        f"unknown fault {spec!r}; use ok, slow=SECONDS, STATUS[:retry-after=S|retry-after-ms=MS|"
        "x-should-retry=true|false], quota, overloaded, drop-before, drop-during[=N], "
        "stream-error[=N[:TYPE]]"
    )
