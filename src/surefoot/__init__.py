"""surefoot: sure-footed LLM agents.

Resilient calls (``surefoot.resilience``), durable runs (``surefoot.durable``), shared
state between agents (``surefoot.statebus``) and a guard on what untrusted data may do
(``surefoot.guard``) on a small core: a clock you can fake, a JSON codec that never pickles,
and storage chosen by URL.
"""

from __future__ import annotations

from .clock import Clock, FakeClock, SystemClock
from .errors import ConfigError, SurefootError
from .resilience import CircuitBreaker, RetryPolicy, retry, retry_call
from .version import __version__

__all__ = [
    "CircuitBreaker",
    "Clock",
    "ConfigError",
    "FakeClock",
    "RetryPolicy",
    "SurefootError",
    "SystemClock",
    "__version__",
    "retry",
    "retry_call",
]
