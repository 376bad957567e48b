"""Resilient calls: classification, backoff, retries, breakers, fallbacks, idempotency.

::

    from surefoot.resilience import Backoff, RetryPolicy, retry_call
    policy = RetryPolicy(max_attempts=4, backoff=Backoff(0.5, 8, "full"), deadline=30)
    reply = retry_call(llm.create, model="m", messages=msgs, policy=policy)

Every decision goes through one pure function (``decide``) shared by the sync and async
drivers; time comes from a ``Clock`` and jitter from a ``random.Random`` you can pass in.
"""

from __future__ import annotations

from ..errors import (
    CircuitOpenError,
    IdempotencyConflictError,
    IdempotencyInProgressError,
    TimeoutError_,
)
from . import faults
from ._backoff import JITTERS, Backoff
from ._breaker import BreakerStats, CircuitBreaker
from ._budget import RetryBudget
from ._classify import (
    DEFAULT_CLASSIFIER,
    Classifier,
    Decision,
    classify,
    classify_stream_error,
    is_retryable,
    parse_retry_after,
)
from ._fallback import Fallback, ResilientClient
from ._idempotency import IdempotentExecutor, fingerprint
from ._policy import Attempt, RetryEvent, RetryPolicy, Step, attempts_of, decide
from ._retry import aretry_call, retry, retry_call
from .faults import ProviderError, ReplyLostError

__all__ = [
    "DEFAULT_CLASSIFIER",
    "JITTERS",
    "Attempt",
    "Backoff",
    "BreakerStats",
    "CircuitBreaker",
    "CircuitOpenError",
    "Classifier",
    "Decision",
    "Fallback",
    "IdempotencyConflictError",
    "IdempotencyInProgressError",
    "IdempotentExecutor",
    "ProviderError",
    "ReplyLostError",
    "ResilientClient",
    "RetryBudget",
    "RetryEvent",
    "RetryPolicy",
    "Step",
    "TimeoutError_",
    "aretry_call",
    "attempts_of",
    "classify",
    "classify_stream_error",
    "decide",
    "faults",
    "fingerprint",
    "is_retryable",
    "parse_retry_after",
    "retry",
    "retry_call",
]
