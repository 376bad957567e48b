"""Model clients: ``FakeLLM`` and adapters over the official SDKs, all in one call shape.

``connect("openai" | "anthropic" | "fake", model)`` (or ``from_env()``) returns a client
with ``create``/``acreate``/``stream``/``astream`` that all return a ``ChatCompletion``
(choices, usage in tokens, a cost). surefoot is the only retry loop: the SDK clients are
built with ``max_retries=0`` and the client's ``RetryPolicy`` retries, with its budget,
deadline and breaker, errors and invalid replies alike. ``RateLimiter`` keeps requests and
tokens per minute, ``PriceTable``/``Meter`` price and total every attempt.

The SDKs are imported when an adapter is made, so ``import surefoot.llm`` needs neither.

``FakeLLM.create(model=…, messages=…)`` is the seeded in-process fake (labelled as a fake
in every report) with simulated latency and injected provider failures.
"""

from __future__ import annotations

from ..errors import InvalidReplyError
from ..resilience.faults import ProviderError, ReplyLostError
from ._anthropic import AnthropicChat
from ._check import json_schema_errors
from ._client import ChatClient
from ._connect import PROVIDERS, FakeChat, connect, from_env
from ._fake import ChatCompletion, Choice, FakeLLM, Message, Usage, count_tokens
from ._limiter import RateLimiter
from ._openai import OpenAIChat
from ._stream import AsyncReplyStream, ReplyStream
from ._usage import Meter, Price, PriceTable, Totals

__all__ = [
    "PROVIDERS",
    "AnthropicChat",
    "AsyncReplyStream",
    "ChatClient",
    "ChatCompletion",
    "Choice",
    "FakeChat",
    "FakeLLM",
    "InvalidReplyError",
    "Message",
    "Meter",
    "OpenAIChat",
    "Price",
    "PriceTable",
    "ProviderError",
    "RateLimiter",
    "ReplyLostError",
    "ReplyStream",
    "Totals",
    "Usage",
    "connect",
    "count_tokens",
    "from_env",
    "json_schema_errors",
]
