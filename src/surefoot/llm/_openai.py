"""OpenAIChat: chat completions over the official ``openai`` SDK (and compatible servers)."""

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

__all__ = ["OpenAIChat"]


def _usage(u: Any) -> Usage | None:
    if u is None:
        return None
    details = getattr(u, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) or 0
    p, c = u.prompt_tokens or 0, u.completion_tokens or 0
    return Usage(p, c, p + c, int(cached))


class OpenAIChat(ChatClient):
    """An OpenAI-compatible chat client: OpenAI, vLLM, Ollama, llama.cpp's server, LM Studio.

    The SDK clients are built with ``max_retries=0``: surefoot's policy is the only retry
    loop. A client passed in with retries on gets a warning.

    Args:
        model: the model name (``gpt-4o-mini``, or what the local server serves).
        api_key: the key (default: ``OPENAI_API_KEY``; a local server without keys gets a
            placeholder). Never shown in reprs, logs or errors.
        base_url: e.g. ``http://127.0.0.1:8080/v1`` (default: ``OPENAI_BASE_URL``, else
            OpenAI's).
        client, async_client: ready SDK clients to use instead (``openai.OpenAI``,
            ``openai.AsyncOpenAI``).
        policy, breaker, limiter, prices, meter, clock, rng, max_tokens: see ``ChatClient``.
    """

    provider = "openai"

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
        self._sdk = load_sdk("openai")
        for c in (client, async_client):
            if c is not None:
                warn_sdk_retries(c, "openai")
        self._client = client
        self._async_client = async_client
        self._build_lock = threading.Lock()
        self._async_clients = PerLoop(self._new_async)
        given = str(base_url or os.environ.get("OPENAI_BASE_URL") or "") or None
        self.base_url = check_base_url(given, "OPENAI_BASE_URL")
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if key is None and self.base_url is not None:
            key = "no-key"  # local servers (vLLM, Ollama, llama.cpp) take any key
        self.__key = Secret(key)

    def _sync(self) -> Any:
        if self._client is None:
            with self._build_lock:  # two threads' first calls build one SDK client
                if self._client is None:
                    self._client = self._sdk.OpenAI(
                        api_key=self.__key.get(), base_url=self.base_url, max_retries=0
                    )
        return self._client

    def _async(self) -> Any:
        if self._async_client is not None:  # passed in: the caller owns its loop
            return self._async_client
        return self._async_clients.get()

    def _new_async(self) -> Any:
        return self._sdk.AsyncOpenAI(
            api_key=self.__key.get(), base_url=self.base_url, max_retries=0
        )

    def _kwargs(self, req: Request, timeout: float | None) -> dict[str, Any]:
        kw: dict[str, Any] = {"model": req.model, "messages": req.messages, **req.params}
        if req.max_tokens_given:
            kw.setdefault("max_tokens", req.max_tokens)
        if timeout is not None:
            kw["timeout"] = timeout
        if req.idempotency_key is not None:
            kw["extra_headers"] = {"Idempotency-Key": req.idempotency_key}
        return kw

    @staticmethod
    def _reply(comp: Any, req: Request) -> ChatCompletion:
        choices = []
        for ch in comp.choices or []:
            content = ch.message.content or ""
            choices.append(
                Choice(ch.index, Message("assistant", content), ch.finish_reason or "stop")
            )
        usage = _usage(comp.usage) or Usage(0, 0, 0)
        return ChatCompletion(
            id=comp.id or "", model=comp.model or req.model, choices=choices, usage=usage
        )

    def _send(self, req: Request, timeout: float | None) -> tuple[ChatCompletion, Any]:
        raw = self._sync().chat.completions.with_raw_response.create(**self._kwargs(req, timeout))
        return self._reply(raw.parse(), req), raw.headers

    async def _asend(self, req: Request, timeout: float | None) -> tuple[ChatCompletion, Any]:
        api = self._async().chat.completions.with_raw_response
        raw = await api.create(**self._kwargs(req, timeout))
        parsed = raw.parse()
        if inspect.isawaitable(parsed):
            parsed = await parsed
        return self._reply(parsed, req), raw.headers

    @staticmethod
    def _delta(chunk: Any) -> Delta:
        text, finish = "", None
        if chunk.choices:
            ch = chunk.choices[0]
            text = (ch.delta.content if ch.delta is not None else None) or ""
            finish = ch.finish_reason
        return Delta(text, _usage(chunk.usage), finish, chunk.model, chunk.id)

    def _stream_kwargs(self, req: Request, timeout: float | None) -> dict[str, Any]:
        kw = self._kwargs(req, timeout)
        kw["stream"] = True
        kw.setdefault("stream_options", {"include_usage": True})
        return kw

    def _open(self, req: Request, timeout: float | None) -> tuple[Iterator[Delta], Any]:
        stream = self._sync().chat.completions.create(**self._stream_kwargs(req, timeout))
        return (self._delta(c) for c in stream), stream.response.headers

    async def _aopen(self, req: Request, timeout: float | None) -> tuple[AsyncIterator[Delta], Any]:
        stream = await self._async().chat.completions.create(**self._stream_kwargs(req, timeout))

        async def deltas() -> AsyncIterator[Delta]:
            async for c in stream:
                yield self._delta(c)

        return deltas(), stream.response.headers

    def close(self) -> None:
        """Close the SDK's sync HTTP client (if this adapter built or was given one)."""
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
            f"OpenAIChat(model={self.model!r}{where}, calls={t.calls}, "
            f"attempts={t.attempts}, cost={t.cost:.6f})"
        )
