"""AnthropicChat: the messages API over the official ``anthropic`` SDK, in FakeLLM's shape."""

from __future__ import annotations

import inspect
import os
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

from ._client import ChatClient, Request
from ._fake import ChatCompletion, Choice, Message, Usage
from ._sdk import PerLoop, Secret, check_base_url, load_sdk, redact_url, warn_sdk_retries
from ._stream import Delta

__all__ = ["AnthropicChat"]

_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}


def _usage(u: Any, output: int | None = None) -> Usage:
    read = getattr(u, "cache_read_input_tokens", None) or 0
    made = getattr(u, "cache_creation_input_tokens", None) or 0
    prompt = (getattr(u, "input_tokens", None) or 0) + read + made
    out = output if output is not None else (getattr(u, "output_tokens", None) or 0)
    return Usage(prompt, out, prompt + out, read)


class AnthropicChat(ChatClient):
    """An Anthropic messages client with the chat-completions call shape of ``FakeLLM``.

    ``messages`` use the same ``{"role", "content"}`` dicts; ``system`` messages are joined
    into the API's ``system`` parameter. The reply is a ``ChatCompletion`` whose text is the
    reply's text blocks; ``usage.prompt_tokens`` counts input, cache reads and cache
    writes, and ``usage.cached_tokens`` the cache reads. The SDK clients are built with
    ``max_retries=0``.

    Args:
        model: e.g. ``claude-sonnet-4-5``.
        api_key: the key (default: ``ANTHROPIC_API_KEY``). Never shown.
        base_url: default ``ANTHROPIC_BASE_URL``, else Anthropic's.
        client, async_client: ready SDK clients (``anthropic.Anthropic``/``AsyncAnthropic``).
        policy, breaker, limiter, prices, meter, clock, rng, max_tokens: see ``ChatClient``.
    """

    provider = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: Any = None,
        async_client: Any = None,
        **common: Any,
    ) -> None:
        super().__init__(model=model, **common)
        self._sdk = load_sdk("anthropic")
        for c in (client, async_client):
            if c is not None:
                warn_sdk_retries(c, "anthropic")
        self._client = client
        self._async_client = async_client
        self._build_lock = threading.Lock()
        self._async_clients = PerLoop(self._new_async)
        given = str(base_url or os.environ.get("ANTHROPIC_BASE_URL") or "") or None
        self.base_url = check_base_url(given, "ANTHROPIC_BASE_URL")
        self.__key = Secret(api_key or os.environ.get("ANTHROPIC_API_KEY"))

    def _sync(self) -> Any:
        if self._client is None:
            with self._build_lock:  # two threads' first calls build one SDK client
                if self._client is None:
                    self._client = self._sdk.Anthropic(
                        api_key=self.__key.get(), base_url=self.base_url, max_retries=0
                    )
        return self._client

    def _async(self) -> Any:
        if self._async_client is not None:  # passed in: the caller owns its loop
            return self._async_client
        return self._async_clients.get()

    def _new_async(self) -> Any:
        return self._sdk.AsyncAnthropic(
            api_key=self.__key.get(), base_url=self.base_url, max_retries=0
        )

    def _kwargs(self, req: Request, timeout: float | None) -> dict[str, Any]:
        system = [str(m.get("content", "")) for m in req.messages if m.get("role") == "system"]
        msgs = [
            {"role": m["role"], "content": m.get("content", "")}
            for m in req.messages
            if m.get("role") != "system"
        ]
        kw: dict[str, Any] = {"model": req.model, "messages": msgs, **req.params}
        kw.setdefault("max_tokens", req.max_tokens)
        if system:
            kw.setdefault("system", "\n\n".join(system))
        if timeout is not None:
            kw["timeout"] = timeout
        if req.idempotency_key is not None:
            kw["extra_headers"] = {"Idempotency-Key": req.idempotency_key}
        return kw

    @staticmethod
    def _reply(msg: Any, req: Request) -> ChatCompletion:
        text = "".join(b.text for b in msg.content or [] if getattr(b, "type", "") == "text")
        finish = _FINISH.get(msg.stop_reason or "", msg.stop_reason or "stop")
        return ChatCompletion(
            id=msg.id or "",
            model=msg.model or req.model,
            choices=[Choice(0, Message("assistant", text), finish)],
            usage=_usage(msg.usage),
        )

    def _send(self, req: Request, timeout: float | None) -> tuple[ChatCompletion, Any]:
        raw = self._sync().messages.with_raw_response.create(**self._kwargs(req, timeout))
        return self._reply(raw.parse(), req), raw.headers

    async def _asend(self, req: Request, timeout: float | None) -> tuple[ChatCompletion, Any]:
        raw = await self._async().messages.with_raw_response.create(**self._kwargs(req, timeout))
        parsed = raw.parse()
        if inspect.isawaitable(parsed):  # anthropic's async raw response parses lazily
            parsed = await parsed
        return self._reply(parsed, req), raw.headers

    def _open(self, req: Request, timeout: float | None) -> tuple[Iterator[Delta], Any]:
        stream = self._sync().messages.create(stream=True, **self._kwargs(req, timeout))
        ev = _Events()
        return (d for e in stream if (d := ev.feed(e)) is not None), stream.response.headers

    async def _aopen(self, req: Request, timeout: float | None) -> tuple[AsyncIterator[Delta], Any]:
        stream = await self._async().messages.create(stream=True, **self._kwargs(req, timeout))
        ev = _Events()

        async def deltas() -> AsyncIterator[Delta]:
            async for e in stream:
                d = ev.feed(e)
                if d is not None:
                    yield d

        return deltas(), stream.response.headers

    def close(self) -> None:
        """Close the SDK's sync HTTP client."""
        if self._client is not None:
            self._client.close()

    async def aclose(self) -> None:
        """Close the running loop's async SDK client (or the one passed in)."""
        client = self._async_client or self._async_clients.pop()
        if client is not None:
            await client.close()

    def __repr__(self) -> str:
        t = self.meter.totals
        where = f", base_url={redact_url(self.base_url)!r}" if self.base_url else ""
        return (
            f"AnthropicChat(model={self.model!r}{where}, calls={t.calls}, "
            f"attempts={t.attempts}, cost={t.cost:.6f})"
        )


class _Events:
    """Turns the messages stream's events into ``Delta``s (usage arrives in two parts)."""

    def __init__(self) -> None:
        self.start_usage: Any = None
        self.model: str | None = None
        self.id: str | None = None

    def feed(self, e: Any) -> Delta | None:
        kind = getattr(e, "type", "")
        if kind == "message_start":
            self.start_usage = e.message.usage
            self.model, self.id = e.message.model, e.message.id
            return Delta(model=self.model, id=self.id)
        if kind == "content_block_delta" and getattr(e.delta, "type", "") == "text_delta":
            return Delta(text=e.delta.text)
        if kind == "message_delta":
            out = getattr(e.usage, "output_tokens", None)
            usage = _usage(self.start_usage, out) if self.start_usage is not None else None
            stop = e.delta.stop_reason
            return Delta(usage=usage, finish_reason=_FINISH.get(stop or "", stop or "stop"))
        return None
