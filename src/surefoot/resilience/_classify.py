"""Retry or not: a table-driven classifier for statuses, network errors and SDK exceptions.

Exceptions of httpx, openai and anthropic are recognised by their class names, their
``status_code``/``status``/``response`` attributes and their headers, never by importing those
packages. The rules are data (:class:`Classifier`); extend them with :meth:`Classifier.extend`.
"""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..errors import CircuitOpenError, ConfigError, IdempotencyInProgressError, TimeoutError_

__all__ = [
    "DEFAULT_CLASSIFIER",
    "Classifier",
    "Decision",
    "classify",
    "classify_stream_error",
    "is_retryable",
    "parse_retry_after",
]


class Decision(NamedTuple):
    """Whether to retry, and why.

    Attributes:
        retry: True if another attempt may succeed.
        reason: one line saying why.
        after: seconds the server asked us to wait (``Retry-After``), if it said.
        status: the HTTP status seen, if any.
    """

    retry: bool
    reason: str
    after: float | None = None
    status: int | None = None

    def __bool__(self) -> bool:
        return self.retry


_NOT_FOUND = (
    "404 is permanent by status: the URL or resource does not exist. Even for a tool endpoint "
    "you just deployed, retrying within seconds hides a wrong route or an unfinished rollout; "
    "fix the route or wait for the deploy to finish, then call again"
)

STATUS_RULES: dict[int, tuple[bool, str]] = {
    400: (False, "400 bad request: the same request will fail the same way; fix it"),
    401: (False, "401 unauthorized: the credentials are wrong; retrying cannot fix them"),
    403: (False, "403 forbidden: no permission; retrying cannot grant it"),
    404: (False, _NOT_FOUND),
    408: (True, "408 request timeout: the server gave up waiting; a new attempt may succeed"),
    409: (False, "409 conflict: retry only an idempotency key still in progress"),
    413: (False, "413 payload too large: shrink the request or fall back to a bigger model"),
    422: (False, "422 unprocessable: the request is invalid; the same request fails again"),
    425: (True, "425 too early: the server asks for a replay later"),
    429: (True, "429 rate limited: wait (honouring Retry-After) and retry"),
    500: (True, "500 internal server error: usually transient"),
    502: (True, "502 bad gateway: a proxy lost the upstream; transient"),
    503: (True, "503 unavailable: overloaded or restarting; transient"),
    504: (True, "504 gateway timeout: transient"),
    529: (True, "529 overloaded (Anthropic): transient, back off"),
}

BODY_RULES: tuple[tuple[int | None, str, bool, str], ...] = (
    (
        429,
        "insufficient_quota",
        False,
        "429 insufficient_quota: the account is out of credit; retrying cannot succeed",
    ),
    (None, "context_length_exceeded", False, "context too long: fall back to a bigger model"),
    (None, "overloaded_error", True, "provider overloaded: transient, back off"),
)

# class name (anywhere in the MRO) -> (retry, reason); first match in MRO order wins
NAME_RULES: dict[str, tuple[bool, str]] = {
    # surefoot's own
    "CircuitOpenError": (False, "the circuit is open: fall back instead of retrying"),
    "IdempotencyInProgressError": (True, "the key's action is still running elsewhere; retry"),
    # openai / anthropic
    "APITimeoutError": (True, "request timed out (SDK): retry; the server may have done it"),
    "APIConnectionError": (True, "could not reach the provider (SDK): transient"),
    "RateLimitError": (True, "rate limited (SDK): wait and retry"),
    "InternalServerError": (True, "provider internal error (SDK): transient"),
    "AuthenticationError": (False, "authentication failed (SDK): fix the key"),
    "PermissionDeniedError": (False, "permission denied (SDK)"),
    "BadRequestError": (False, "bad request (SDK): fix the request"),
    "NotFoundError": (False, _NOT_FOUND),
    "UnprocessableEntityError": (False, "unprocessable request (SDK)"),
    # httpx
    "ConnectTimeout": (True, "connect timeout: nothing was sent; safe to retry"),
    "ReadTimeout": (True, "read timeout: retry; the server may have done the work"),
    "WriteTimeout": (True, "write timeout: transient"),
    "PoolTimeout": (True, "connection pool timeout: transient"),
    "ConnectError": (True, "connection failed: transient"),
    "RemoteProtocolError": (True, "the server closed the connection mid-reply: transient"),
    "ReadError": (True, "network read error: transient"),
    "WriteError": (True, "network write error: transient"),
    "NetworkError": (True, "network error: transient"),
    "TimeoutException": (True, "timeout: transient"),
    # builtins and the socket module
    "gaierror": (True, "DNS lookup failed: often transient"),
    "ConnectionResetError": (True, "connection reset: transient"),
    "ConnectionRefusedError": (True, "connection refused: the server may be restarting"),
    "ConnectionAbortedError": (True, "connection aborted: transient"),
    "BrokenPipeError": (True, "broken pipe: transient"),
    "ConnectionError": (True, "connection error: transient"),
    "TimeoutError": (True, "timed out: a new attempt may be faster"),
}


_RULE_SHAPE = "a (retry: bool, reason: str) pair, like (True, '409 conflict: retry')"


def _rule(table: str, key: Any, value: Any) -> tuple[bool, str]:
    """Check one ``(retry, reason)`` rule of a table; the error names the table and key."""
    if (
        not isinstance(value, tuple | list)
        or len(value) != 2
        or not isinstance(value[0], bool)
        or not isinstance(value[1], str)
    ):
        raise ConfigError(
            f"Classifier {table} rule for {key!r} must be {_RULE_SHAPE}, got {value!r}"
        )
    return (value[0], value[1])


def _status_table(rules: Any) -> dict[int, tuple[bool, str]]:
    if not isinstance(rules, Mapping):
        raise ConfigError(
            f"Classifier status rules must be a mapping of int -> rule, got {rules!r}"
        )
    out: dict[int, tuple[bool, str]] = {}
    for k, v in rules.items():
        if isinstance(k, bool) or not isinstance(k, int) or not 100 <= k <= 599:
            hint = (
                f"; write {int(k)} instead of {k!r}" if isinstance(k, str) and k.isdigit() else ""
            )
            raise ConfigError(
                f"Classifier status rule keys must be HTTP status ints 100..599, got {k!r}{hint}"
            )
        out[k] = _rule("status", k, v)
    return out


def _names_table(rules: Any) -> dict[str, tuple[bool, str]]:
    if not isinstance(rules, Mapping):
        raise ConfigError(f"Classifier names rules must be a mapping of str -> rule, got {rules!r}")
    out: dict[str, tuple[bool, str]] = {}
    for k, v in rules.items():
        if not isinstance(k, str) or not k.isidentifier():
            fix = f"; use its name {k.__name__!r}" if isinstance(k, type) else ""
            raise ConfigError(
                f"Classifier names rule keys must be exception class names (str), got {k!r}"
                f"{fix} (or put the type itself in types=)"
            )
        out[k] = _rule("names", k, v)
    return out


def _body_table(rules: Any) -> tuple[tuple[int | None, str, bool, str], ...]:
    out = []
    for r in rules:
        ok = isinstance(r, tuple | list) and len(r) == 4
        if ok:
            st, needle, retry, reason = r
            ok = (
                (st is None or (isinstance(st, int) and not isinstance(st, bool)))
                and isinstance(needle, str)
                and needle != ""
                and isinstance(retry, bool)
                and isinstance(reason, str)
            )
        if not ok:
            raise ConfigError(
                "Classifier body rules must be (status int or None, non-empty substring, "
                f"retry: bool, reason: str), got {r!r}"
            )
        out.append((r[0], r[1].lower(), r[2], r[3]))
    return tuple(out)


def _types_table(rules: Any) -> tuple[tuple[type[BaseException], bool, str], ...]:
    out = []
    for r in rules:
        ok = isinstance(r, tuple | list) and len(r) == 3
        if ok:
            tp, retry, reason = r
            ok = (
                isinstance(tp, type)
                and issubclass(tp, BaseException)
                and isinstance(retry, bool)
                and isinstance(reason, str)
            )
        if not ok:
            raise ConfigError(
                "Classifier types rules must be (exception type, retry: bool, reason: str), "
                f"got {r!r}"
            )
        out.append((r[0], r[1], r[2]))
    return tuple(out)


def _lower(headers: Any) -> dict[str, str]:
    try:
        return {str(k).lower(): str(v) for k, v in headers.items()}
    except Exception:  # not a mapping: no headers
        return {}


def parse_retry_after(
    headers: Mapping[str, str] | Any, *, now: float | None = None
) -> float | None:
    """Seconds a server asked to wait, from ``retry-after-ms`` or ``Retry-After``.

    ``retry-after-ms`` (float milliseconds) wins; then ``Retry-After`` as delta-seconds, then
    as an HTTP-date (relative to ``now``, wall-clock seconds; ``time.time()`` by default).
    Names are matched case-insensitively. A date in the past gives 0.

    Returns:
        The seconds, or None when no valid hint is present.
    """
    h = headers if isinstance(headers, dict) else _lower(headers)
    if h and not all(k.islower() for k in h):
        h = _lower(h)
    ms = h.get("retry-after-ms")
    if ms is not None:
        try:
            v = float(ms) / 1000.0
            if v >= 0 and v == v and v != float("inf"):
                return v
        except ValueError:
            pass
    ra = h.get("retry-after")
    if ra is None:
        return None
    ra = ra.strip()
    try:
        v = float(ra)
        return v if v >= 0 and v == v and v != float("inf") else None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(ra)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    base = time.time() if now is None else now
    return max(0.0, when.timestamp() - base)


def _status_of(x: Any) -> int | None:
    for name in ("status_code", "status"):
        v = getattr(x, name, None)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    resp = getattr(x, "response", None)
    if resp is not None:
        v = getattr(resp, "status_code", None) or getattr(resp, "status", None)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return None


def headers_of(x: Any) -> dict[str, str]:
    h = getattr(x, "headers", None)
    if h is None:
        resp = getattr(x, "response", None)
        h = getattr(resp, "headers", None) if resp is not None else None
    return _lower(h) if h is not None else {}


def _body_of(x: Any) -> str:
    parts = []
    body = getattr(x, "body", None)
    if body is not None:
        parts.append(str(body))
    if isinstance(x, BaseException):
        parts.append(str(x))
    return " ".join(parts)


@dataclass(frozen=True, slots=True)
class Classifier:
    """The rules that decide retry-or-not. Immutable; :meth:`extend` returns a new one.

    Args:
        status: HTTP status -> (retry, reason).
        body: (status or None, substring, retry, reason): checked first, on the body/message.
        names: exception class name (matched along the MRO) -> (retry, reason).
        types: (exception type, retry, reason) pairs, checked before ``names``.
    """

    status: Mapping[int, tuple[bool, str]] = field(default_factory=lambda: dict(STATUS_RULES))
    body: tuple[tuple[int | None, str, bool, str], ...] = BODY_RULES
    names: Mapping[str, tuple[bool, str]] = field(default_factory=lambda: dict(NAME_RULES))
    types: tuple[tuple[type[BaseException], bool, str], ...] = ()

    def __post_init__(self) -> None:
        """Check every rule when it is given: a wrong key or value is an error now, not later."""
        set_ = object.__setattr__
        set_(self, "status", _status_table(self.status))
        set_(self, "body", _body_table(self.body))
        set_(self, "names", _names_table(self.names))
        set_(self, "types", _types_table(self.types))

    def extend(
        self,
        *,
        status: Mapping[int, tuple[bool, str]] | None = None,
        body: Iterable[tuple[int | None, str, bool, str]] = (),
        names: Mapping[str, tuple[bool, str]] | None = None,
        types: Iterable[tuple[type[BaseException], bool, str]] = (),
    ) -> Classifier:
        """A copy with more rules; new rules win over the old ones.

        Raises:
            ConfigError: a rule of the wrong shape (a status given as ``"409"``, a verdict
                that is not a bool, a reason that is not a str), naming the rule.
        """
        return Classifier(
            status={**self.status, **_status_table(status or {})},
            body=(*_body_table(body), *self.body),
            names={**self.names, **_names_table(names or {})},
            types=(*_types_table(types), *self.types),
        )

    def for_status(
        self, status: int, headers: Mapping[str, str] | None = None, body: str = ""
    ) -> Decision:
        """Classify an HTTP status with its headers and body text."""
        h = headers or {}
        after = parse_retry_after(h) if h else None
        low = body.lower()
        decision: Decision | None = None
        if low:
            for st, needle, retry, reason in self.body:
                if (st is None or st == status) and needle in low:
                    decision = Decision(retry, reason, after, status)
                    break
        if decision is None:
            rule = self.status.get(status)
            if rule is not None:
                decision = Decision(rule[0], rule[1], after, status)
            elif status >= 500:
                decision = Decision(
                    True, f"{status} server error: usually transient", after, status
                )
            elif status >= 400:
                decision = Decision(
                    False, f"{status} client error: the same request fails again", after, status
                )
            else:
                decision = Decision(False, f"{status} is not an error status", after, status)
        override = h.get("x-should-retry")
        if override is not None and override.strip().lower() in ("true", "false"):
            want = override.strip().lower() == "true"
            decision = Decision(
                want, f"x-should-retry: {override.strip()} (server override)", after, status
            )
        if decision.retry and after is not None and status == 429:
            decision = Decision(
                True,
                f"429 rate limited: Retry-After asks for {after:g} s, then retry",
                after,
                status,
            )
        return decision

    def __call__(self, x: BaseException | int | Any) -> Decision:
        return self.classify(x)

    def classify(self, x: BaseException | int | Any) -> Decision:
        """Classify a status code, an exception or a response-like object."""
        if isinstance(x, int) and not isinstance(x, bool):
            return self.for_status(x)
        status = _status_of(x)
        if status is not None:
            return self.for_status(status, headers_of(x), _body_of(x))
        if not isinstance(x, BaseException):
            raise TypeError(
                f"classify() takes an HTTP status, an exception or a response, got {x!r}"
            )
        for tp, retry, reason in self.types:
            if isinstance(x, tp):
                return Decision(retry, reason, getattr(x, "retry_after", None))
        for klass in type(x).__mro__:
            rule = self.names.get(klass.__name__)
            if rule is not None:
                after = getattr(x, "retry_after", None)
                if isinstance(x, CircuitOpenError | IdempotencyInProgressError | TimeoutError_):
                    after = None  # their own hints are for fallbacks, not for the retry loop
                return Decision(rule[0], rule[1], after if isinstance(after, int | float) else None)
        return Decision(
            False, f"{type(x).__name__} is not a known transient error; not retried (a bug?)"
        )


DEFAULT_CLASSIFIER = Classifier()


def classify(x: BaseException | int | Any, classifier: Classifier | None = None) -> Decision:
    """Decide whether ``x`` (a status, an exception, a response) is worth retrying, and why.

    Args:
        x: an HTTP status code, an exception (surefoot's, httpx's, openai's, anthropic's,
            builtin network errors), or a response-like object with ``status_code``/``headers``.
        classifier: the rules (``DEFAULT_CLASSIFIER`` by default).

    Returns:
        A :class:`Decision` (truthy when retryable) with a one-line reason and the server's
        ``Retry-After`` in seconds when it gave one.
    """
    return (classifier or DEFAULT_CLASSIFIER).classify(x)


def is_retryable(x: BaseException | int | Any, classifier: Classifier | None = None) -> bool:
    """True if another attempt at ``x`` (a status, an exception, a response) may succeed."""
    return (classifier or DEFAULT_CLASSIFIER).classify(x).retry


RetryOn = (
    Classifier
    | Callable[[BaseException], Any]
    | tuple[type[BaseException], ...]
    | type[BaseException]
)


# error types sent as an SSE ``event: error`` inside a 200 stream (Anthropic's names, and
# OpenAI's ``server_error``), with the HTTP status each stands for
STREAM_ERROR_TYPES: dict[str, tuple[bool, str]] = {
    "overloaded_error": (True, "overloaded_error (Anthropic's 529) inside the stream: back off"),
    "api_error": (True, "api_error (a 500) inside the stream: transient"),
    "server_error": (True, "server_error (a 500) inside the stream: transient"),
    "rate_limit_error": (True, "rate_limit_error (a 429) inside the stream: wait and retry"),
    "timeout_error": (True, "timeout_error inside the stream: transient"),
    "invalid_request_error": (False, "invalid_request_error (a 400) inside the stream"),
    "authentication_error": (False, "authentication_error (a 401) inside the stream"),
    "permission_error": (False, "permission_error (a 403) inside the stream"),
    "not_found_error": (False, "not_found_error (a 404) inside the stream"),
    "request_too_large": (False, "request_too_large (a 413) inside the stream"),
}


def _stream_error_type(event: Any) -> str | None:
    """The error type named by an SSE error event, its JSON text, or an SDK exception."""
    if isinstance(event, BaseException):
        body = getattr(event, "body", None)
        found = _stream_error_type(body) if body is not None else None
        return found or _stream_error_type(str(event))
    if isinstance(event, str | bytes):
        text = event.decode("utf-8", "replace") if isinstance(event, bytes) else event
        try:
            return _stream_error_type(json.loads(text))
        except ValueError:
            low = text.lower()
            return next((t for t in STREAM_ERROR_TYPES if t in low), None)
    if isinstance(event, Mapping):
        inner = event.get("error", event)
        if isinstance(inner, Mapping):
            for k in ("type", "code"):
                v = inner.get(k)
                if isinstance(v, str) and v != "error":
                    return v
        elif isinstance(inner, str):
            return inner
    return None


def classify_stream_error(event: Any, *, content_seen: bool) -> Decision:
    """Classify an error delivered *inside* a streaming (SSE) reply that started with 200.

    Providers report overload mid-stream as an ``event: error`` whose data is like
    ``{"type": "error", "error": {"type": "overloaded_error", ...}}``; the HTTP status was
    200, so status-based retries (the SDKs') never see it. Before any content arrived such
    an event is as transient as the status it stands for (``overloaded_error`` = 529); after
    content was yielded, retrying the request would repeat that content, so the decision is
    not to retry (surface the error, or resume from what arrived).

    Args:
        event: the parsed event data (a mapping), its JSON text, or the exception an SDK
            raised for it (its ``body`` or message is read).
        content_seen: True if any content chunk was already yielded to the caller.

    Returns:
        A :class:`Decision` with a one-line reason (``status`` is None: none was sent).
    """
    kind = _stream_error_type(event)
    rule = STREAM_ERROR_TYPES.get(kind or "")
    if rule is None:
        retry, reason = False, f"stream error {kind!r} is not a known transient error"
    else:
        retry, reason = rule
    if retry and content_seen:
        return Decision(
            False,
            f"{reason}, but content was already yielded: a retry would repeat it; surface "
            "the error or resume from what arrived",
        )
    return Decision(retry, reason if rule is None or not retry else f"{reason} (pre-content)")
