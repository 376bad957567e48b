"""A retry budget: retries capped at a fraction of requests, so an outage cannot multiply load."""

from __future__ import annotations

import threading

from ..errors import ConfigError
from ._checks import fraction, real

__all__ = ["RetryBudget"]

_WHOLE = 1.0 - 1e-9  # a token, allowing for the rounding of repeated float additions


class RetryBudget:
    """A token bucket shared by calls: each request adds ``ratio`` tokens, each retry takes one.

    Retries are allowed while at least one token is left, so over any stretch the retries
    are at most ``initial + ratio * requests``: with ``ratio=0.1`` an outage adds at most
    about 10 % more traffic instead of multiplying it by ``max_attempts`` (the gRPC and
    Finagle budgets work the same way). Thread-safe; share one per downstream service.

    Args:
        ratio: tokens earned per request (the long-run retry share), 0 < ratio <= 1.
        initial: tokens at the start (retries allowed before any request was counted).
        max_tokens: the bucket's size; tokens earned beyond it are lost.

    Attributes:
        requests: requests counted. retries: retries allowed. refused: retries refused.
    """

    __slots__ = (
        "_lock",
        "initial",
        "max_tokens",
        "ratio",
        "refused",
        "requests",
        "retries",
        "tokens",
    )

    def __init__(
        self, ratio: float = 0.1, *, initial: float = 10.0, max_tokens: float = 100.0
    ) -> None:
        ratio = fraction(ratio, "retry budget ratio", zero=False)
        initial = real(initial, "retry budget initial", "a number of tokens")
        max_tokens = real(max_tokens, "retry budget max_tokens", "a number of tokens")
        if initial < 0 or max_tokens < max(initial, 1):
            raise ConfigError(
                f"retry budget needs 0 <= initial <= max_tokens and max_tokens >= 1, got "
                f"initial={initial!r} max_tokens={max_tokens!r}"
            )
        self.ratio = float(ratio)
        self.initial = float(initial)
        self.max_tokens = float(max_tokens)
        self.tokens = float(initial)
        self.requests = 0
        self.retries = 0
        self.refused = 0
        self._lock = threading.Lock()

    def record_request(self) -> None:
        """Count one logical request (a first attempt); earns ``ratio`` tokens."""
        with self._lock:
            self.requests += 1
            t = self.tokens + self.ratio
            self.tokens = t if t < self.max_tokens else self.max_tokens

    def try_retry(self) -> bool:
        """Take a token for one retry; False (and counted as refused) when none is left."""
        with self._lock:
            if self.tokens >= _WHOLE:  # 10 x 0.1 sums to 0.999…: that is a whole token
                t = self.tokens - 1.0
                self.tokens = t if t > 0.0 else 0.0
                self.retries += 1
                return True
            self.refused += 1
            return False

    def __repr__(self) -> str:
        return (
            f"RetryBudget(ratio={self.ratio}, tokens={self.tokens:.2f}, requests={self.requests}, "
            f"retries={self.retries}, refused={self.refused})"
        )
