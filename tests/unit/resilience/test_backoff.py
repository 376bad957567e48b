"""Backoff: the seed's waits, the four jitters, and their bounds (property tests)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from surefoot import ConfigError
from surefoot.resilience import Backoff


def test_seed_waits_without_jitter() -> None:
    """Base 0.5 s, cap 8 s, no jitter: 0.5, 1, 2, 4, 8, 8, total 23.5 s."""
    waits = Backoff(0.5, 8, "none").waits(6)
    assert waits == [0.5, 1, 2, 4, 8, 8]
    assert sum(waits) == 23.5


def test_jitter_is_reproducible_with_a_seeded_rng() -> None:
    """The same seed gives the same jittered waits."""
    b = Backoff(0.5, 8, "full")
    assert b.waits(5, random.Random(7)) == b.waits(5, random.Random(7))
    assert b.waits(5, random.Random(7)) != b.waits(5, random.Random(8))


def test_equal_jitter_keeps_at_least_half() -> None:
    """Equal jitter never waits less than half the un-jittered value."""
    b = Backoff(1, 16, "equal")
    rng = random.Random(1)
    for n in range(1, 10):
        w = b.wait(n, rng)
        assert b.ceiling(n) / 2 <= w <= b.ceiling(n)


@given(
    base=st.floats(0, 10),
    extra=st.floats(0, 100),
    jitter=st.sampled_from(["none", "full", "equal", "decorrelated"]),
    n=st.integers(1, 80),
    seed=st.integers(0, 2**32),
)
def test_every_wait_is_within_zero_and_cap(
    base: float, extra: float, jitter: str, n: int, seed: int
) -> None:
    """Every wait, for any attempt and jitter, lies in [0, cap]; decorrelated stays >= base."""
    b = Backoff(base, base + extra, jitter)
    for w in b.waits(n, random.Random(seed)):
        assert 0 <= w <= b.cap
        if jitter == "decorrelated":
            assert w >= b.base


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"base": -1}, "base must be >= 0"),
        ({"base": 2, "cap": 1}, "cap must be >= base"),
        ({"jitter": "wild"}, "unknown jitter 'wild'"),
        ({"multiplier": 0.5}, "multiplier"),
    ],
)
def test_bad_parameters_name_the_value(kwargs: dict[str, object], match: str) -> None:
    """Invalid backoff parameters raise ConfigError naming the value and the fix."""
    with pytest.raises(ConfigError, match=match):
        Backoff(**kwargs)  # type: ignore[arg-type]
