"""A client-side rate limiter for requests and tokens per minute, corrected by server headers."""

from __future__ import annotations

import email.utils
import re
import threading
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ..clock import Clock, SystemClock
from ..errors import ConfigError

__all__ = ["RateLimiter", "parse_reset"]

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_reset(value: str, *, now: float) -> float | None:
    """Seconds until a rate-limit window resets, from a header value.

    OpenAI sends durations (``1s``, ``6m0s``, ``20ms``, ``0.5s``); Anthropic sends an
    RFC 3339 time (``2026-12-01T12:00:30Z``); plain numbers are seconds.

    Returns:
        Seconds from ``now`` (wall time), at least 0, or None if the value is not readable.
    """
    text = value.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    parts = _DURATION.findall(text)
    if parts and "".join(n + u for n, u in parts) == text:
        return sum(float(n) * _UNIT[u] for n, u in parts)
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
        return max(0.0, when.timestamp() - now)
    except ValueError:
        pass
    try:
        parsed = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, parsed.timestamp() - now) if parsed is not None else None


class _Bucket:
    """A token bucket that may go negative: a reservation past zero is a wait for the next."""

    __slots__ = ("blocked_until", "capacity", "level", "rate", "stamp")

    def __init__(self, per_minute: float | None, now: float) -> None:
        self.capacity = per_minute
        self.level = per_minute or 0.0
        self.rate = (per_minute or 0.0) / 60.0
        self.stamp = now
        self.blocked_until = 0.0

    def refill(self, now: float) -> None:
        if self.capacity is not None and now > self.stamp:
            self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now

    def wait_for(self, amount: float, now: float) -> float:
        wait = max(0.0, self.blocked_until - now)
        if self.capacity is not None and amount > self.level:
            wait = max(wait, (amount - self.level) / self.rate)
        return wait

    def set_limit(self, per_minute: float) -> None:
        if self.capacity is None:
            self.level = per_minute
        self.capacity = per_minute
        self.rate = per_minute / 60.0


class RateLimiter:
    """Requests and tokens per minute for one process, shared by its threads and tasks.

    Each request first reserves one request and its estimated tokens; when a bucket is
    short, the caller waits (on ``clock``, outside any lock) until the refill covers it,
    and the next callers queue behind it. After the reply, :meth:`settle` corrects the
    token estimate with the real usage, and :meth:`update` reads the provider's
    ``x-ratelimit-*`` (OpenAI) or ``anthropic-ratelimit-*`` headers: a ``limit`` header sets
    a limit you did not give, ``remaining`` lowers the bucket to what the server says is
    left, and ``remaining: 0`` with a ``reset`` time blocks until then.

    The buckets live in this process's memory: two processes with the same key each keep
    their own. The headers still bring each one the server's view after every reply.

    Args:
        requests_per_minute: None: no request limit until a header gives one.
        tokens_per_minute: None: no token limit until a header gives one.
        clock: where waits happen (``SystemClock`` by default; a ``FakeClock`` in tests).

    Attributes:
        waited: total seconds callers were asked to wait. waits: how many waits there were.
    """

    def __init__(
        self,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        *,
        clock: Clock | None = None,
    ) -> None:
        for name, v in (
            ("requests_per_minute", requests_per_minute),
            ("tokens_per_minute", tokens_per_minute),
        ):
            if v is not None and (not isinstance(v, int | float) or isinstance(v, bool) or v <= 0):
                raise ConfigError(f"{name} must be > 0 (or None for no limit), got {v!r}")
        self.clock: Clock = clock if clock is not None else SystemClock()
        now = self.clock.monotonic()
        self._requests = _Bucket(requests_per_minute, now)
        self._tokens = _Bucket(tokens_per_minute, now)
        self._lock = threading.Lock()
        self.waited = 0.0
        self.waits = 0

    @property
    def requests_per_minute(self) -> float | None:
        """The request limit in force (configured or learnt from headers)."""
        return self._requests.capacity

    @property
    def tokens_per_minute(self) -> float | None:
        """The token limit in force (configured or learnt from headers)."""
        return self._tokens.capacity

    def reserve(self, tokens: int = 0) -> float:
        """Take one request and ``tokens`` now; return the seconds to wait before sending."""
        if tokens < 0:
            raise ConfigError(f"tokens must be >= 0, got {tokens!r}")
        r, t = self._requests, self._tokens
        with self._lock:
            now = self.clock.monotonic()
            r.refill(now)
            t.refill(now)
            wait = max(r.wait_for(1, now), t.wait_for(tokens, now))
            if r.capacity is not None:
                r.level -= 1
            if t.capacity is not None:
                t.level -= tokens
            if wait > 0:
                self.waited += wait
                self.waits += 1
        return wait

    def acquire(self, tokens: int = 0) -> float:
        """Reserve and wait (sync). Returns the seconds waited."""
        wait = self.reserve(tokens)
        if wait > 0:
            self.clock.sleep(wait)
        return wait

    async def aacquire(self, tokens: int = 0) -> float:
        """Reserve and wait (async). Returns the seconds waited."""
        wait = self.reserve(tokens)
        if wait > 0:
            await self.clock.asleep(wait)
        return wait

    def settle(self, estimated: int, actual: int) -> None:
        """Give back (or take more of) the tokens a request reserved, once its usage is known."""
        with self._lock:
            if self._tokens.capacity is not None:
                self._tokens.level += estimated - actual

    def update(self, headers: Mapping[str, str] | Any) -> None:
        """Read a reply's rate-limit headers (OpenAI's and Anthropic's names)."""
        try:
            h = {str(k).lower(): str(v) for k, v in headers.items()}
        except AttributeError:
            return
        if not any(k.startswith(("x-ratelimit-", "anthropic-ratelimit-")) for k in h):
            return
        wall = self.clock.now()
        with self._lock:
            now = self.clock.monotonic()
            for bucket, kind in ((self._requests, "requests"), (self._tokens, "tokens")):
                limit = h.get(f"x-ratelimit-limit-{kind}") or h.get(
                    f"anthropic-ratelimit-{kind}-limit"
                )
                remaining = h.get(f"x-ratelimit-remaining-{kind}") or h.get(
                    f"anthropic-ratelimit-{kind}-remaining"
                )
                reset = h.get(f"x-ratelimit-reset-{kind}") or h.get(
                    f"anthropic-ratelimit-{kind}-reset"
                )
                bucket.refill(now)
                if limit is not None and _number(limit):
                    bucket.set_limit(float(limit))
                if remaining is not None and _number(remaining):
                    left = float(remaining)
                    if bucket.capacity is not None:
                        bucket.level = min(bucket.level, left)
                    if left <= 0 and reset is not None:
                        secs = parse_reset(reset, now=wall)
                        if secs is not None:
                            bucket.blocked_until = max(bucket.blocked_until, now + secs)

    def __repr__(self) -> str:
        return (
            f"RateLimiter(requests_per_minute={self.requests_per_minute}, "
            f"tokens_per_minute={self.tokens_per_minute}, waits={self.waits})"
        )


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
