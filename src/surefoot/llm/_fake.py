"""FakeLLM: a seeded, priced, fault-injecting stand-in for a chat-completions client."""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..clock import Clock, FakeClock
from ..codec import register
from ..errors import ConfigError, TimeoutError_
from ..resilience.faults import Fault, Injector, ReplyLostError, spend

__all__ = ["ChatCompletion", "Choice", "FakeLLM", "Message", "Usage"]

_TEXT = """
agent plan step tool result search read summary draft answer check retry state journal
key value source evidence claim note reason model cost token latency budget review
final data report finding risk option choice because therefore however first next
then done
"""
_WORDS = tuple(_TEXT.split())


@register
@dataclass(frozen=True, slots=True)
class Message:
    """One chat message."""

    role: str
    content: str


@register
@dataclass(frozen=True, slots=True)
class Choice:
    """One completion choice."""

    index: int
    message: Message
    finish_reason: str = "stop"


@register
@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts of one call.

    Attributes:
        prompt_tokens: input tokens (cached ones included). completion_tokens: output
        tokens. total_tokens: both. cached_tokens: input tokens the provider served from
        its prompt cache (priced lower; 0 when unknown).
    """

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    cached_tokens: int = 0


@register
@dataclass(frozen=True, slots=True)
class ChatCompletion:
    """The reply of ``FakeLLM.create``, shaped like a chat-completions response.

    Attributes:
        id: a deterministic id (the provider's id for real calls). model: the model
        that answered. choices: one choice. usage: token counts. cost: priced tokens in
        USD. parsed: the value a ``schema=`` check produced (None without one).
    """

    id: str
    model: str
    choices: list[Choice] = field(default_factory=list)
    usage: Usage = field(default_factory=lambda: Usage(0, 0, 0))
    cost: float = 0.0
    parsed: Any = field(default=None, compare=False)

    @property
    def text(self) -> str:
        """The first choice's message content ("" when there is none)."""
        return self.choices[0].message.content if self.choices else ""


def count_tokens(text: str) -> int:
    """A rough token count (about 4 characters per token, at least 1 per word)."""
    return max(len(text.split()), (len(text) + 3) // 4)


class FakeLLM:
    """A fake chat model: same seed and messages give the same text; counts and prices calls.

    Not a real model: lab reports label it ``FAKE_MODEL``. Failures come from a fault
    injector (``surefoot.resilience.faults``): an injected error is raised before any
    tokens are charged; a dropped reply charges the tokens, then raises ``ReplyLostError``.

    Args:
        seed: fixes every generated text.
        clock: simulated latency is spent on it (a private ``FakeClock`` by default).
        latency: seconds each call takes (plus any injected delay).
        price_in: USD per prompt token. price_out: USD per completion token.
        responder: ``callable(messages) -> str`` to script the answers.
        failures: a fault injector.

    Attributes:
        calls: calls received (failed ones included). failed: calls that raised.
        prompt_tokens, completion_tokens, cost: summed over calls that reached the model.
    """

    def __init__(
        self,
        seed: int = 0,
        clock: Clock | None = None,
        latency: float = 0.0,
        price_in: float = 2.5e-6,
        price_out: float = 1e-5,
        responder: Callable[[list[dict[str, Any]]], str] | None = None,
        failures: Injector | None = None,
    ) -> None:
        if latency < 0 or price_in < 0 or price_out < 0:
            raise ConfigError(
                f"latency and prices must be >= 0, got latency={latency!r} "
                f"price_in={price_in!r} price_out={price_out!r}"
            )
        if responder is not None and not callable(responder):
            raise TypeError(f"responder must be callable(messages) -> str, got {responder!r}")
        self.seed = seed
        self.clock: Clock = clock if clock is not None else FakeClock()
        self.latency = float(latency)
        self.price_in = price_in
        self.price_out = price_out
        self.responder = responder
        self.failures = failures
        self.calls = 0
        self.failed = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cost = 0.0
        self._lock = threading.Lock()

    # -- the pieces shared by create and acreate --------------------------------------

    def _begin(self, key: str | None) -> Fault | None:
        with self._lock:
            self.calls += 1
            n = self.calls
        return self.failures.plan(n, key) if self.failures is not None else None

    def _fail(self, exc: BaseException) -> BaseException:
        with self._lock:
            self.failed += 1
        return exc

    def _answer(self, model: str, messages: Sequence[dict[str, Any]]) -> ChatCompletion:
        msgs = [dict(m) for m in messages]
        if self.responder is not None:
            text = str(self.responder(msgs))
        else:
            text = self._generate(msgs)
        prompt = sum(count_tokens(str(m.get("content", ""))) + 3 for m in msgs)
        completion = count_tokens(text)
        cost = prompt * self.price_in + completion * self.price_out
        digest = hashlib.sha256(f"{self.seed}|{text}".encode()).hexdigest()[:16]
        with self._lock:
            self.prompt_tokens += prompt
            self.completion_tokens += completion
            self.cost += cost
        return ChatCompletion(
            id=f"fake-{digest}",
            model=model,
            choices=[Choice(0, Message("assistant", text))],
            usage=Usage(prompt, completion, prompt + completion),
            cost=cost,
        )

    def _generate(self, msgs: list[dict[str, Any]]) -> str:
        blob = json.dumps(msgs, sort_keys=True, default=str)
        h = hashlib.sha256(f"{self.seed}|{blob}".encode()).digest()
        rng = random.Random(int.from_bytes(h[:8], "big"))
        return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(8, 24))) + "."

    @staticmethod
    def _check(model: str, messages: Any) -> None:
        if not isinstance(messages, list | tuple) or not all(
            isinstance(m, dict) and "role" in m for m in messages
        ):
            raise ConfigError(
                f"messages must be a list of dicts with 'role' and 'content', got {messages!r}"
            )
        if not isinstance(model, str) or not model:
            raise ConfigError(f"model must be a non-empty string, got {model!r}")

    # -- the client API ----------------------------------------------------------------

    def create(
        self,
        *,
        model: str,
        messages: Sequence[dict[str, Any]],
        timeout: float | None = None,
        idempotency_key: str | None = None,
        **_: Any,
    ) -> ChatCompletion:
        """Answer ``messages`` (sync). Simulated latency is spent on the clock.

        Args:
            model: the model name (echoed back).
            messages: ``[{"role": ..., "content": ...}, ...]``.
            timeout: cut the call at this many simulated seconds (``TimeoutError_``).
            idempotency_key: shown to key-aware injectors (e.g. ``DropReply``).

        Raises:
            ProviderError, TimeoutError, ReplyLostError: as injected.
            TimeoutError_: the call's latency exceeded ``timeout``.
        """
        self._check(model, messages)
        fault = self._begin(idempotency_key)
        delay = self.latency + (fault.delay if fault is not None else 0.0)
        try:
            spend(self.clock, delay, timeout)  # a cut call times out before any error arrives
        except BaseException as exc:
            raise self._fail(exc) from None
        if fault is not None and fault.error is not None:
            raise self._fail(fault.error)
        resp = self._answer(model, messages)
        if fault is not None and fault.drop_reply:
            raise self._fail(ReplyLostError("connection reset after the model answered"))
        return resp

    async def acreate(
        self,
        *,
        model: str,
        messages: Sequence[dict[str, Any]],
        timeout: float | None = None,
        idempotency_key: str | None = None,
        **_: Any,
    ) -> ChatCompletion:
        """Answer ``messages`` (async); like :meth:`create`, waiting with ``clock.asleep``."""
        self._check(model, messages)
        fault = self._begin(idempotency_key)
        delay = self.latency + (fault.delay if fault is not None else 0.0)
        cut = timeout is not None and delay > timeout
        wait = min(delay, timeout) if timeout is not None else delay
        if isinstance(self.clock, FakeClock):
            self.clock.advance(wait)
            await asyncio.sleep(0)
        elif wait > 0:
            await self.clock.asleep(wait)
        if cut and timeout is not None:  # a cut call times out before any error arrives
            raise self._fail(TimeoutError_(timeout))
        if fault is not None and fault.error is not None:
            raise self._fail(fault.error)
        resp = self._answer(model, messages)
        if fault is not None and fault.drop_reply:
            raise self._fail(ReplyLostError("connection reset after the model answered"))
        return resp

    def __repr__(self) -> str:
        return f"FakeLLM(seed={self.seed}, calls={self.calls}, cost={self.cost:.6f})"
