"""connect() and from_env(): one call gives a client, fake or real, by configuration alone."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

from ..errors import ConfigError
from ._client import ChatClient, Request
from ._fake import ChatCompletion, FakeLLM
from ._stream import Delta

__all__ = ["PROVIDERS", "FakeChat", "connect", "from_env"]

PROVIDERS = ("openai", "anthropic", "fake")


class FakeChat(ChatClient):
    """``FakeLLM`` behind the same machinery as the real adapters (retries, checks, meter).

    What ``connect("fake")`` returns, so a program tested on the fake runs unchanged on a
    real provider. Streaming splits the fake's text into words.

    Args:
        model: the model name echoed back. llm: the ``FakeLLM`` (a new one by default).
        common: policy, breaker, limiter, prices, meter, clock, rng, max_tokens.
    """

    provider = "fake"

    def __init__(self, model: str = "fake-model", *, llm: FakeLLM | None = None, **common: Any):
        super().__init__(model=model, **common)
        self.llm = llm if llm is not None else FakeLLM()

    def _call_kwargs(self, req: Request, timeout: float | None) -> dict[str, Any]:
        kw: dict[str, Any] = {"model": req.model, "messages": req.messages}
        if timeout is not None:
            kw["timeout"] = timeout
        if req.idempotency_key is not None:
            kw["idempotency_key"] = req.idempotency_key
        return kw

    def _send(self, req: Request, timeout: float | None) -> tuple[ChatCompletion, Any]:
        return self.llm.create(**self._call_kwargs(req, timeout)), None

    async def _asend(self, req: Request, timeout: float | None) -> tuple[ChatCompletion, Any]:
        return await self.llm.acreate(**self._call_kwargs(req, timeout)), None

    @staticmethod
    def _split(reply: ChatCompletion) -> list[Delta]:
        words = reply.text.split(" ")
        out = [Delta(text=w + (" " if i < len(words) - 1 else "")) for i, w in enumerate(words)]
        out.append(Delta(usage=reply.usage, finish_reason="stop", model=reply.model, id=reply.id))
        return out

    def _open(self, req: Request, timeout: float | None) -> tuple[Iterator[Delta], Any]:
        reply, _ = self._send(req, timeout)
        return iter(self._split(reply)), None

    async def _aopen(self, req: Request, timeout: float | None) -> tuple[AsyncIterator[Delta], Any]:
        reply, _ = await self._asend(req, timeout)
        parts = self._split(reply)

        async def deltas() -> AsyncIterator[Delta]:
            for d in parts:
                yield d

        return deltas(), None


def connect(
    provider: str = "openai",
    model: str | None = None,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    **common: Any,
) -> ChatClient:
    """A chat client for ``provider``: ``openai`` (and compatible servers), ``anthropic``, ``fake``.

    All three have the same ``create``/``acreate``/``stream``/``astream`` and return the same
    ``ChatCompletion``, so tests run on ``fake`` and production on a real provider by
    configuration alone.

    Args:
        provider: ``openai``, ``anthropic`` or ``fake``.
        model: the model name (required for real providers).
        api_key: the key (default: ``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY``).
        base_url: the endpoint (default: ``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL``).
        common: ``policy``, ``breaker``, ``limiter``, ``prices``, ``meter``, ``clock``,
            ``rng``, ``max_tokens``; ``client``/``async_client`` for ready SDK clients;
            ``llm`` (a ``FakeLLM``) for ``fake``.

    Raises:
        ConfigError: unknown provider, missing model, or a ``base_url`` that is not an
        ``http://``/``https://`` URL with a host. MissingExtraError: the SDK is not
        installed (``pip install surefoot[openai]``).
    """
    kind = str(provider).strip().lower()
    if kind == "fake":
        if api_key is not None or base_url is not None:
            raise ConfigError("the fake provider takes no api_key or base_url; drop them")
        return FakeChat(model or "fake-model", **common)
    if kind not in PROVIDERS:
        raise ConfigError(
            f"unknown provider {provider!r}; use one of {', '.join(PROVIDERS)} "
            "(an OpenAI-compatible server such as vLLM, Ollama or llama.cpp is 'openai' "
            "with base_url=...)"
        )
    if not model:
        raise ConfigError(
            f"connect({kind!r}) needs a model name, e.g. model='gpt-4o-mini' or the name "
            "your local server serves (set SUREFOOT_LLM_MODEL when using from_env())"
        )
    if kind == "openai":
        from ._openai import OpenAIChat

        return OpenAIChat(model, api_key=api_key, base_url=base_url, **common)
    from ._anthropic import AnthropicChat

    return AnthropicChat(model, api_key=api_key, base_url=base_url, **common)


def from_env(env: Mapping[str, str] | None = None, **common: Any) -> ChatClient:
    """A client configured from environment variables, as users of the SDKs expect.

    ``SUREFOOT_LLM_PROVIDER`` (``openai``, ``anthropic``, ``fake``; default: ``anthropic``
    when only ``ANTHROPIC_API_KEY`` is set, else ``openai`` when ``OPENAI_API_KEY`` or
    ``OPENAI_BASE_URL`` is set), ``SUREFOOT_LLM_MODEL`` (else ``OPENAI_MODEL`` /
    ``ANTHROPIC_MODEL``). The SDKs' own variables (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``,
    ``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL``) give the key and endpoint.

    Args:
        env: where to read (``os.environ`` by default).
        common: as for :func:`connect`.

    Raises:
        ConfigError: nothing says which provider to use, or no model is named. The message
        names the variables, never their values.
    """
    e = os.environ if env is None else env
    provider = e.get("SUREFOOT_LLM_PROVIDER", "").strip().lower()
    if not provider:
        if e.get("ANTHROPIC_API_KEY") and not (e.get("OPENAI_API_KEY") or e.get("OPENAI_BASE_URL")):
            provider = "anthropic"
        elif e.get("OPENAI_API_KEY") or e.get("OPENAI_BASE_URL"):
            provider = "openai"
        else:
            raise ConfigError(
                "no provider configured: set SUREFOOT_LLM_PROVIDER=openai|anthropic|fake, or "
                "OPENAI_API_KEY / OPENAI_BASE_URL / ANTHROPIC_API_KEY"
            )
    model = e.get("SUREFOOT_LLM_MODEL") or e.get(
        "ANTHROPIC_MODEL" if provider == "anthropic" else "OPENAI_MODEL"
    )
    if provider == "fake":
        return connect("fake", model, **common)
    prefix = "ANTHROPIC" if provider == "anthropic" else "OPENAI"
    return connect(
        provider,
        model,
        api_key=e.get(f"{prefix}_API_KEY") or None,
        base_url=e.get(f"{prefix}_BASE_URL") or None,
        **common,
    )
