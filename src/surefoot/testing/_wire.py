"""The OpenAI chat-completions and Anthropic messages wire formats the fake provider sends."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

__all__ = ["anthropic_events", "anthropic_message", "error_body", "openai_chunks", "openai_reply"]

Usage = tuple[int, int, int]  # prompt, completion, cached prompt tokens


def error_body(api: str, status: int, kind: str, code: str | None, message: str | None) -> Any:
    """A provider-shaped error body."""
    msg = message or f"fake provider error {status} ({kind})"
    if api == "anthropic":
        return {"type": "error", "error": {"type": kind, "message": msg}}
    return {"error": {"message": msg, "type": kind, "param": None, "code": code}}


def _openai_usage(usage: Usage) -> dict[str, Any]:
    p, c, cached = usage
    return {
        "prompt_tokens": p,
        "completion_tokens": c,
        "total_tokens": p + c,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


def openai_reply(n: int, model: str, text: str, usage: Usage) -> dict[str, Any]:
    """A ``chat.completion`` object."""
    return {
        "id": f"chatcmpl-fake-{n}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": _openai_usage(usage),
    }


def _sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


def openai_chunks(
    n: int, model: str, pieces: list[str], usage: Usage, include_usage: bool
) -> Iterator[tuple[bytes, bool]]:
    """``chat.completion.chunk`` SSE events, each with True when it carries content."""
    base = {
        "id": f"chatcmpl-fake-{n}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }
    yield (
        _sse(
            {
                **base,
                "choices": [
                    {
                        "index": 0,
                        "delta": {"role": "assistant", "content": ""},
                        "finish_reason": None,
                    }
                ],
            }
        ),
        False,
    )
    for piece in pieces:
        yield (
            _sse(
                {
                    **base,
                    "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}],
                }
            ),
            True,
        )
    yield _sse({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}), False
    if include_usage:
        yield _sse({**base, "choices": [], "usage": _openai_usage(usage)}), False
    yield b"data: [DONE]\n\n", False


def _anthropic_usage(usage: Usage, output: int) -> dict[str, Any]:
    p, _, cached = usage
    return {
        "input_tokens": p - cached,
        "output_tokens": output,
        "cache_read_input_tokens": cached,
        "cache_creation_input_tokens": 0,
    }


def anthropic_message(n: int, model: str, text: str, usage: Usage) -> dict[str, Any]:
    """A ``message`` object."""
    return {
        "id": f"msg_fake_{n}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": _anthropic_usage(usage, usage[1]),
    }


def anthropic_events(
    n: int, model: str, pieces: list[str], usage: Usage
) -> Iterator[tuple[bytes, bool]]:
    """Messages-API SSE events, each with True when it carries content."""
    start = {
        **anthropic_message(n, model, "", usage),
        "content": [],
        "stop_reason": None,
        "usage": _anthropic_usage(usage, 1),
    }
    yield _sse({"type": "message_start", "message": start}, "message_start"), False
    yield (
        _sse(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
            "content_block_start",
        ),
        False,
    )
    yield _sse({"type": "ping"}, "ping"), False
    for piece in pieces:
        yield (
            _sse(
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": piece},
                },
                "content_block_delta",
            ),
            True,
        )
    yield _sse({"type": "content_block_stop", "index": 0}, "content_block_stop"), False
    yield (
        _sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": usage[1]},
            },
            "message_delta",
        ),
        False,
    )
    yield _sse({"type": "message_stop"}, "message_stop"), False
