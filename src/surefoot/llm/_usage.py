"""Prices and running totals: what each call cost, and what a run or client spent."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import ConfigError
from ._fake import Usage

__all__ = ["Meter", "Price", "PriceTable", "Totals"]


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens: input, output, and cached input (default: the input price)."""

    input: float
    output: float
    cached_input: float | None = None

    def __post_init__(self) -> None:
        for name in ("input", "output", "cached_input"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int | float) or v < 0):
                raise ConfigError(f"Price.{name} must be >= 0 USD per million tokens, got {v!r}")

    def cost(self, usage: Usage) -> float:
        """USD for these tokens (cached input at ``cached_input``)."""
        cached = min(usage.cached_tokens, usage.prompt_tokens)
        cached_price = self.input if self.cached_input is None else self.cached_input
        fresh = usage.prompt_tokens - cached
        return (
            fresh * self.input + cached * cached_price + usage.completion_tokens * self.output
        ) / 1e6


class PriceTable:
    """Prices by model name: an exact name wins, then the longest matching prefix.

    surefoot ships no prices (they change); pass yours::

        PriceTable({"gpt-4o-mini": Price(0.15, 0.60, 0.075), "claude-": Price(3, 15, 0.3)})

    Args:
        prices: model name or prefix -> ``Price``.
        default: the price of a model not in the table (None: such calls cost 0 and are
            counted in ``Totals.unpriced_calls``).
    """

    def __init__(self, prices: Mapping[str, Price] | None = None, default: Price | None = None):
        table = dict(prices or {})
        for name, price in table.items():
            if not isinstance(price, Price):
                raise ConfigError(
                    f"price of {name!r} must be a Price(input, output), got {price!r}"
                )
        self.prices = table
        self.default = default

    def price_of(self, model: str) -> Price | None:
        """The price that applies to ``model`` (None: unpriced)."""
        hit = self.prices.get(model)
        if hit is not None:
            return hit
        best = max((k for k in self.prices if model.startswith(k)), key=len, default=None)
        return self.prices[best] if best is not None else self.default

    def __repr__(self) -> str:
        return f"PriceTable({len(self.prices)} models, default={self.default!r})"


@dataclass(frozen=True, slots=True)
class Totals:
    """What a meter counted.

    Attributes:
        calls: logical calls that returned a reply. attempts: requests sent (retries
        included). failed_attempts: attempts that raised or returned an invalid reply.
        prompt_tokens, completion_tokens, cached_tokens: summed over every attempt that
        got tokens back (invalid replies included: they were paid for). cost: USD.
        unpriced_calls: attempts whose model had no price.
    """

    calls: int = 0
    attempts: int = 0
    failed_attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost: float = 0.0
    unpriced_calls: int = 0


class Meter:
    """Thread-safe running totals of calls, attempts, tokens and cost.

    Each client has one (``client.meter``); pass the same ``Meter`` to several clients to
    total a run across them.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._t = Totals()

    def add_attempt(self, usage: Usage | None, cost: float, *, priced: bool, ok: bool) -> None:
        """Count one attempt (with its tokens when it got any)."""
        with self._lock:
            t = self._t
            u = usage or Usage(0, 0, 0)
            self._t = Totals(
                calls=t.calls,
                attempts=t.attempts + 1,
                failed_attempts=t.failed_attempts + (not ok),
                prompt_tokens=t.prompt_tokens + u.prompt_tokens,
                completion_tokens=t.completion_tokens + u.completion_tokens,
                cached_tokens=t.cached_tokens + u.cached_tokens,
                cost=t.cost + cost,
                unpriced_calls=t.unpriced_calls + (usage is not None and not priced),
            )

    def add_call(self) -> None:
        """Count one logical call that returned a reply."""
        with self._lock:
            t = self._t
            self._t = Totals(
                t.calls + 1,
                t.attempts,
                t.failed_attempts,
                t.prompt_tokens,
                t.completion_tokens,
                t.cached_tokens,
                t.cost,
                t.unpriced_calls,
            )

    @property
    def totals(self) -> Totals:
        """A snapshot of the totals."""
        with self._lock:
            return self._t

    def reset(self) -> Totals:
        """Start again from zero; returns the totals so far."""
        with self._lock:
            t, self._t = self._t, Totals()
            return t

    def __repr__(self) -> str:
        t = self.totals
        return f"Meter(calls={t.calls}, attempts={t.attempts}, cost={t.cost:.6f})"
