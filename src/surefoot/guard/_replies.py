"""What the guard asks of a model, and how it reads the model's replies.

The planner (:func:`~surefoot.guard.make_plan`) and the quarantined parser
(:class:`~surefoot.guard.QuarantinedParser`) each take any chat model and accept its reply
only as one JSON object; anything else is refused before it can be used.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

from ..errors import TrustError

__all__ = ["ChatModel", "reply_object"]


class ChatModel(Protocol):
    """Anything with a chat-completions ``create`` (``FakeLLM``, an OpenAI-style client)."""

    def create(self, *, model: str, messages: Sequence[dict[str, Any]]) -> Any: ...


def reply_object(reply: Any, who: str) -> dict[str, Any]:
    """The one JSON object in a chat reply's text.

    Raises:
        TrustError: the text holds no JSON object (``sink`` is ``who``); nothing was run.
    """
    text = str(reply.choices[0].message.content or "")
    start, end = text.find("{"), text.rfind("}")
    try:
        data = json.loads(text[start : end + 1]) if start >= 0 else None
    except json.JSONDecodeError:
        data = None
    if not isinstance(data, dict):
        raise TrustError(
            f"{who} must reply with one JSON object, got {text!r:.120}; nothing was run",
            sink=who,
        )
    return data
