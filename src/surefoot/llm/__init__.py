"""Model clients: the seeded ``FakeLLM`` (labelled as a fake in every report).

``FakeLLM.create(model=…, messages=…)`` is shaped like a chat-completions client: choices,
usage in tokens, a price per token, simulated latency on a clock, and provider failures
injected by ``surefoot.resilience.faults``. It counts every call it receives.
"""

from __future__ import annotations

from ..resilience.faults import ProviderError, ReplyLostError
from ._fake import ChatCompletion, Choice, FakeLLM, Message, Usage, count_tokens

__all__ = [
    "ChatCompletion",
    "Choice",
    "FakeLLM",
    "Message",
    "ProviderError",
    "ReplyLostError",
    "Usage",
    "count_tokens",
]
