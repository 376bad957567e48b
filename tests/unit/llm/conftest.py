"""Fixtures for the adapter tests: a FakeProvider and adapters over the real SDKs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from surefoot import FakeClock
from surefoot.llm import ChatClient, connect
from surefoot.resilience import Backoff, RetryPolicy
from surefoot.testing import FakeProvider

MSGS = [{"role": "user", "content": "hello there"}]


@pytest.fixture
def fp() -> Iterator[FakeProvider]:
    """A fresh fake provider on a free loopback port."""
    with FakeProvider() as p:
        yield p


@pytest.fixture
def clock() -> FakeClock:
    """Virtual time: retry waits are recorded, never slept."""
    return FakeClock()


@pytest.fixture(params=["openai", "anthropic"])
def make(
    request: pytest.FixtureRequest, fp: FakeProvider, clock: FakeClock
) -> Iterator[Callable[..., ChatClient]]:
    """Build an adapter of each provider against the fake (no-jitter backoff, FakeClock)."""
    made: list[Any] = []

    def build(**kw: Any) -> ChatClient:
        kw.setdefault("policy", RetryPolicy(max_attempts=3, backoff=Backoff(0.5, 8, "none")))
        kw.setdefault("clock", clock)
        provider = request.param
        url = fp.openai_url if provider == "openai" else fp.anthropic_url
        c = connect(provider, f"{provider}-model", api_key="sk-SECRET-123", base_url=url, **kw)
        made.append(c)
        return c

    yield build
    for c in made:
        c.close()
