"""Prices and meters: the cost of tokens, prefix lookup, and totals across clients."""

from __future__ import annotations

import pytest

from surefoot.errors import ConfigError
from surefoot.llm import Meter, Price, PriceTable, Usage, connect


def test_price_counts_cached_input_at_its_own_rate() -> None:
    """1M fresh input at $1, 1M cached at $0.1, 1M output at $4: $5.10."""
    u = Usage(2_000_000, 1_000_000, 3_000_000, cached_tokens=1_000_000)
    assert Price(1.0, 4.0, 0.1).cost(u) == pytest.approx(5.1)
    assert Price(1.0, 4.0).cost(u) == pytest.approx(6.0)  # no cached price: input price


def test_exact_name_wins_then_longest_prefix() -> None:
    """gpt-4o-mini takes its own price, gpt-4o-2024 the gpt-4o prefix, others the default."""
    t = PriceTable(
        {"gpt-4o": Price(2.5, 10), "gpt-4o-mini": Price(0.15, 0.6), "gpt-": Price(9, 9)},
        default=Price(1, 1),
    )
    assert t.price_of("gpt-4o-mini") == Price(0.15, 0.6)
    assert t.price_of("gpt-4o-2024-08-06") == Price(2.5, 10)
    assert t.price_of("gpt-3.5") == Price(9, 9)
    assert t.price_of("llama") == Price(1, 1)


def test_one_meter_totals_a_run_across_clients() -> None:
    """Two clients sharing a Meter add into the same totals."""
    meter = Meter()
    a = connect("fake", "a", meter=meter)
    b = connect("fake", "b", meter=meter)
    a.create(messages=[{"role": "user", "content": "x"}])
    b.create(messages=[{"role": "user", "content": "y"}])
    t = meter.totals
    assert t.calls == 2 and t.attempts == 2 and t.cost > 0  # FakeLLM prices itself
    assert meter.reset() == t and meter.totals.calls == 0


def test_negative_price_is_refused() -> None:
    """A negative price is a ConfigError naming the field."""
    with pytest.raises(ConfigError, match=r"Price\.output"):
        Price(1.0, -1.0)
    with pytest.raises(ConfigError, match="must be a Price"):
        PriceTable({"m": 1.0})  # type: ignore[dict-item]
