"""Model clients: ``FakeLLM`` and adapters over the official SDKs, all in one call shape.

``connect("openai" | "anthropic" | "fake", model)`` (or ``from_env()``) returns a client
with ``create``/``acreate``/``stream``/``astream`` that all return a ``ChatCompletion``
(choices, usage in tokens, a cost). surefoot is the only retry loop: the SDK clients are
built with ``max_retries=0`` and the client's ``RetryPolicy`` retries, with its budget,
deadline and breaker, errors and invalid replies alike. ``RateLimiter`` keeps requests and
tokens per minute, ``PriceTable``/``Meter`` price and total every attempt.

``FakeLLM.create(model=…, messages=…)`` is the seeded in-process fake (labelled as a fake
in every report) with simulated latency and injected provider failures.
"""

from __future__ import annotations

from ..errors import InvalidReplyError
from ..resilience.faults import ProviderError, ReplyLostError
from ._check import json_schema_errors
from ._client import AsyncReplyStream, ChatClient, ReplyStream
from ._connect import PROVIDERS, FakeChat, connect, from_env
from ._fake import ChatCompletion, Choice, FakeLLM, Message, Usage, count_tokens
from ._limiter import RateLimiter
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


def __getattr__(name: str) -> object:
    # the adapters are imported on first use, so `import surefoot.llm` needs no SDK
    if name == "OpenAIChat":
        from ._openai import OpenAIChat

        return OpenAIChat
    if name == "AnthropicChat":
        from ._anthropic import AnthropicChat

        return AnthropicChat
    raise AttributeError(f"module 'surefoot.llm' has no attribute {name!r}")
