"""The provider-neutral half of the adapters: retries, breaker, rate limit, checks and costs.

A provider adapter only turns a request into an SDK call and the SDK's answer into a
``ChatCompletion`` (``_send``/``_asend``) or a stream of ``Delta`` (``_open``/``_aopen``);
everything else is here, once, for both providers and both drivers.
"""

from __future__ import annotations

import dataclasses
import random
import warnings
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from .. import telemetry
from ..clock import Clock
from ..errors import ConfigError, InvalidReplyError
from ..resilience import CircuitBreaker, Decision, RetryPolicy, aretry_call, retry_call
from ..resilience import classify_stream_error as _classify_stream_error
from ._check import ReplyCheck, make_check
from ._fake import ChatCompletion, Choice, Message, Usage, count_tokens
from ._limiter import RateLimiter
from ._sdk import name_url_in_connection_error
from ._stream import AsyncReplyStream, Delta, ReplyStream
from ._usage import Meter, PriceTable

__all__ = ["ChatClient", "Request", "result_policy"]

_PRE_CONTENT = "surefoot_stream_pre_content"


@dataclass(frozen=True, slots=True)
class Request:
    """One logical call, provider-neutral (what the adapters translate)."""

    model: str
    messages: list[dict[str, Any]]
    max_tokens: int  # the caller's, or the client's default (Anthropic requires one)
    max_tokens_given: bool  # False: OpenAI-compatible servers get none (reasoning models
    # refuse max_tokens and want max_completion_tokens, which passes through params)
    idempotency_key: str | None
    params: dict[str, Any]
    estimate: int  # tokens reserved at the rate limiter before the reply is known


def result_policy(policy: RetryPolicy) -> RetryPolicy:
    """``policy`` that also retries invalid replies and pre-content stream errors.

    The budget, backoff, deadline and hooks are the same objects: one loop, one budget.
    """
    base = policy.check

    def check(exc: BaseException) -> Decision:
        if isinstance(exc, InvalidReplyError):
            return Decision(True, f"invalid reply: {exc.reason}")
        decision = base(exc)
        if not decision.retry and getattr(exc, _PRE_CONTENT, False):
            in_stream = _classify_stream_error(exc, content_seen=False)
            if in_stream.retry:
                return in_stream
        return decision

    with warnings.catch_warnings():  # the caller already saw the policy's own warnings
        warnings.simplefilter("ignore")
        return dataclasses.replace(policy, retry_on=check)


class ChatClient:
    """Shared machinery of the provider adapters (see ``OpenAIChat`` and ``AnthropicChat``).

    Composition, inside out: the SDK call (SDK retries off) ← rate limiter ← circuit
    breaker ← reply check ← retry policy (with its budget and deadline). Every attempt is
    priced and counted on ``meter``.

    Args:
        model: the default model name. policy: the one retry loop (``RetryPolicy()`` by
            default). breaker: a ``CircuitBreaker`` around each request. limiter: a
            ``RateLimiter``. prices: a ``PriceTable`` (none: costs 0). meter: where attempts
            and costs are totalled (a new ``Meter`` by default; share one per run).
        clock: where retry waits happen (default: the retry drivers' ``SystemClock``, which
            ``surefoot.testing.instant_retries()`` replaces). rng: jitter randomness.
        max_tokens: the output limit when a call gives none (Anthropic needs one) and the
            size of the rate limiter's token estimate.
        on_text: called with every text piece of a streamed reply as it arrives
            (``stream``/``astream``), before it is handed to you: pass
            ``durable.emit`` and a durable step that streams publishes its tokens to the
            run's token stream (``emit`` does nothing outside a step); docs/streams.md.
    """

    provider = "?"

    def __init__(
        self,
        *,
        model: str,
        policy: RetryPolicy | None = None,
        breaker: CircuitBreaker | None = None,
        limiter: RateLimiter | None = None,
        prices: PriceTable | None = None,
        meter: Meter | None = None,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        max_tokens: int = 1024,
        on_text: Callable[[str], object] | None = None,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise ConfigError(f"model must be a non-empty string like 'gpt-4o-mini', got {model!r}")
        if policy is not None and not isinstance(policy, RetryPolicy):
            raise ConfigError(f"policy must be a surefoot RetryPolicy, got {policy!r}")
        if not isinstance(max_tokens, int) or max_tokens < 1:
            raise ConfigError(f"max_tokens must be an int >= 1, got {max_tokens!r}")
        self.model = model
        self.policy = policy if policy is not None else RetryPolicy()
        self._policy = result_policy(self.policy)
        self.breaker = breaker
        self.limiter = limiter
        self.prices = prices if prices is not None else PriceTable()
        self.meter = meter if meter is not None else Meter()
        # None: the retry drivers' default clock, which surefoot.testing.instant_retries()
        # swaps for a FakeClock in users' tests
        self.clock: Clock | None = clock
        self.rng = rng
        self.max_tokens = max_tokens
        if on_text is not None and not callable(on_text):
            raise ConfigError(f"on_text must be a callable taking a str, got {on_text!r}")
        self.on_text = on_text

    # -- what a provider implements ------------------------------------------------------

    def _send(self, req: Request, timeout: float | None) -> tuple[ChatCompletion, Any]:
        raise NotImplementedError

    async def _asend(self, req: Request, timeout: float | None) -> tuple[ChatCompletion, Any]:
        raise NotImplementedError

    def _open(self, req: Request, timeout: float | None) -> tuple[Iterator[Delta], Any]:
        raise NotImplementedError

    async def _aopen(self, req: Request, timeout: float | None) -> tuple[AsyncIterator[Delta], Any]:
        raise NotImplementedError

    # -- the shared steps ----------------------------------------------------------------

    def _request(
        self,
        model: str | None,
        messages: Sequence[Mapping[str, Any]],
        max_tokens: int | None,
        idempotency_key: str | None,
        params: dict[str, Any],
    ) -> Request:
        if (
            not isinstance(messages, list | tuple)
            or not messages
            or not all(isinstance(m, Mapping) and "role" in m for m in messages)
        ):
            raise ConfigError(
                "messages must be a non-empty list of dicts with 'role' and 'content', got "
                f"{messages!r}"
            )
        name = model if model is not None else self.model
        if not isinstance(name, str) or not name:
            raise ConfigError(f"model must be a non-empty string, got {name!r}")
        out = max_tokens if max_tokens is not None else self.max_tokens
        prompt = sum(count_tokens(str(m.get("content", ""))) + 3 for m in messages)
        return Request(
            name,
            [dict(m) for m in messages],
            out,
            max_tokens is not None,
            idempotency_key,
            params,
            prompt + out,
        )

    def _failed(self, exc: BaseException) -> None:
        name_url_in_connection_error(exc, getattr(self, "base_url", None))
        if self.limiter is not None:
            headers = getattr(getattr(exc, "response", None), "headers", None)
            if headers is not None:
                self.limiter.update(headers)
        self.meter.add_attempt(None, 0.0, priced=True, ok=False)
        telemetry.note_attempt(telemetry.attempt_outcome(exc))  # a durable step keeps these

    def _cost(self, reply: ChatCompletion, req: Request, headers: Any) -> float | None:
        """Feed the limiter; the reply's price (None: unpriced, keep the reply's own cost)."""
        if self.limiter is not None:
            if headers is not None:
                self.limiter.update(headers)
            self.limiter.settle(req.estimate, reply.usage.total_tokens)
        price = self.prices.price_of(reply.model or req.model)
        return price.cost(reply.usage) if price is not None else None

    def _checked(
        self,
        reply: ChatCompletion,
        cost: float | None,
        check: ReplyCheck | None,
        allow_empty: bool,
    ) -> ChatCompletion:
        priced = cost is not None or reply.cost > 0  # FakeLLM prices itself
        text = reply.text
        reason = None
        parsed = None
        if not text.strip() and not allow_empty:
            reason = "the reply is empty"
        elif check is not None:
            try:
                parsed = check(text)
            except ValueError as exc:
                reason = str(exc)
        if cost is not None or parsed is not None:
            # one replace for both: each dataclasses.replace is ~4 us of the ~15 us the
            # full adapter path costs (benchmarks/bench_llm.py, machinery alone)
            reply = dataclasses.replace(
                reply, cost=reply.cost if cost is None else cost, parsed=parsed
            )
        self.meter.add_attempt(reply.usage, reply.cost, priced=priced, ok=reason is None)
        telemetry.note_attempt("ok" if reason is None else "invalid")
        if reason is not None:
            raise InvalidReplyError(reason, text=text, model=reply.model, reply=reply)
        return reply

    def _attempt(
        self,
        req: Request,
        check: ReplyCheck | None,
        allow_empty: bool,
        *,
        timeout: float | None = None,
    ) -> ChatCompletion:
        if self.limiter is not None:
            self.limiter.acquire(req.estimate)
        try:
            if self.breaker is not None:
                reply, headers = self.breaker.call(self._send, req, timeout)
            else:
                reply, headers = self._send(req, timeout)
        except Exception as exc:
            self._failed(exc)
            raise
        return self._checked(reply, self._cost(reply, req, headers), check, allow_empty)

    async def _aattempt(
        self,
        req: Request,
        check: ReplyCheck | None,
        allow_empty: bool,
        *,
        timeout: float | None = None,
    ) -> ChatCompletion:
        if self.limiter is not None:
            await self.limiter.aacquire(req.estimate)
        try:
            if self.breaker is not None:
                reply, headers = await self.breaker.acall(self._asend, req, timeout)
            else:
                reply, headers = await self._asend(req, timeout)
        except Exception as exc:
            self._failed(exc)
            raise
        return self._checked(reply, self._cost(reply, req, headers), check, allow_empty)

    # -- the client API ------------------------------------------------------------------

    def create(
        self,
        *,
        messages: Sequence[Mapping[str, Any]],
        model: str | None = None,
        timeout: float | None = None,
        idempotency_key: str | None = None,
        max_tokens: int | None = None,
        schema: Any = None,
        allow_empty: bool = False,
        **params: Any,
    ) -> ChatCompletion:
        """Ask the model (sync), with retries, breaker, rate limit, reply check and pricing.

        Args:
            messages: ``[{"role": "system"|"user"|"assistant", "content": "..."}]``.
            model: overrides the client's model for this call.
            timeout: seconds one attempt may take (the policy's ``timeout_per_attempt`` is
                used when not given).
            idempotency_key: sent as the ``Idempotency-Key`` header.
            max_tokens: the output limit. Without it Anthropic gets the client's
                ``max_tokens`` (the API requires one) and OpenAI-compatible servers get none
                (pass ``max_completion_tokens=`` for OpenAI's reasoning models); the
                client's value still sizes the rate limiter's token estimate.
            schema: a JSON Schema dict, a pydantic model class or ``callable(text) -> value``;
                a reply that fails it is retried, and its value is ``reply.parsed``.
            allow_empty: accept an empty reply (by default it is retried).
            params: passed to the SDK (``temperature``, ``top_p``, …).

        Returns:
            A ``ChatCompletion`` (the same shape ``FakeLLM`` returns), priced.

        Raises:
            The provider's SDK error, unchanged, when retries run out or it is permanent;
            ``InvalidReplyError`` with the last invalid reply; ``CircuitOpenError``.
        """
        req = self._request(model, messages, max_tokens, idempotency_key, params)
        check = make_check(schema)
        kw: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
        reply = retry_call(
            self._attempt,
            req,
            check,
            allow_empty,
            policy=self._policy,
            clock=self.clock,
            rng=self.rng,
            **kw,
        )
        self.meter.add_call()
        return reply

    async def acreate(
        self,
        *,
        messages: Sequence[Mapping[str, Any]],
        model: str | None = None,
        timeout: float | None = None,
        idempotency_key: str | None = None,
        max_tokens: int | None = None,
        schema: Any = None,
        allow_empty: bool = False,
        **params: Any,
    ) -> ChatCompletion:
        """Ask the model (async); like :meth:`create`."""
        req = self._request(model, messages, max_tokens, idempotency_key, params)
        check = make_check(schema)
        kw: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
        reply = await aretry_call(
            self._aattempt,
            req,
            check,
            allow_empty,
            policy=self._policy,
            clock=self.clock,
            rng=self.rng,
            **kw,
        )
        self.meter.add_call()
        return reply

    def stream(
        self,
        *,
        messages: Sequence[Mapping[str, Any]],
        model: str | None = None,
        timeout: float | None = None,
        idempotency_key: str | None = None,
        max_tokens: int | None = None,
        **params: Any,
    ) -> ReplyStream:
        """Stream the reply's text (sync). Retried only until the first text arrives.

        Errors before any text (statuses, dropped connections, an SSE ``error`` event such
        as Anthropic's ``overloaded_error``) are retried by the policy like any attempt.
        After text was handed to you, a retry would repeat it, so an error then is raised
        as it came (not retried), with ``err.surefoot_partial`` holding the text so far
        and a note saying why.

        Returns:
            A ``ReplyStream``: iterate it for text pieces; ``.reply`` is the whole
            ``ChatCompletion`` once it is exhausted.
        """
        req = self._request(model, messages, max_tokens, idempotency_key, params)
        kw: dict[str, Any] = {} if timeout is None else {"timeout": timeout}

        def first(*, timeout: float | None = None) -> tuple[Iterator[Delta], list[Delta]]:
            if self.limiter is not None:
                self.limiter.acquire(req.estimate)
            try:
                if self.breaker is not None:
                    events, headers = self.breaker.call(self._open, req, timeout)
                else:
                    events, headers = self._open(req, timeout)
                if self.limiter is not None and headers is not None:
                    self.limiter.update(headers)
                head: list[Delta] = []
                try:
                    for d in events:
                        head.append(d)
                        if d.text or d.finish_reason:
                            break
                except Exception as exc:
                    setattr(exc, _PRE_CONTENT, True)
                    raise
                return events, head
            except Exception as exc:
                self._failed(exc)
                raise

        events, head = retry_call(first, policy=self._policy, clock=self.clock, rng=self.rng, **kw)
        return ReplyStream(
            events,
            head,
            finished=partial(self._stream_done, req),
            interrupted=partial(self._stream_failed, req),
            on_text=self.on_text,
        )

    async def astream(
        self,
        *,
        messages: Sequence[Mapping[str, Any]],
        model: str | None = None,
        timeout: float | None = None,
        idempotency_key: str | None = None,
        max_tokens: int | None = None,
        **params: Any,
    ) -> AsyncReplyStream:
        """Stream the reply's text (async); like :meth:`stream`."""
        req = self._request(model, messages, max_tokens, idempotency_key, params)
        kw: dict[str, Any] = {} if timeout is None else {"timeout": timeout}

        async def first(
            *, timeout: float | None = None
        ) -> tuple[AsyncIterator[Delta], list[Delta]]:
            if self.limiter is not None:
                await self.limiter.aacquire(req.estimate)
            try:
                if self.breaker is not None:
                    events, headers = await self.breaker.acall(self._aopen, req, timeout)
                else:
                    events, headers = await self._aopen(req, timeout)
                if self.limiter is not None and headers is not None:
                    self.limiter.update(headers)
                head: list[Delta] = []
                try:
                    async for d in events:
                        head.append(d)
                        if d.text or d.finish_reason:
                            break
                except Exception as exc:
                    setattr(exc, _PRE_CONTENT, True)
                    raise
                return events, head
            except Exception as exc:
                self._failed(exc)
                raise

        events, head = await aretry_call(
            first, policy=self._policy, clock=self.clock, rng=self.rng, **kw
        )
        return AsyncReplyStream(
            events,
            head,
            finished=partial(self._stream_done, req),
            interrupted=partial(self._stream_failed, req),
            on_text=self.on_text,
        )

    def _stream_done(self, req: Request, parts: list[str], last: Delta | None) -> ChatCompletion:
        text = "".join(parts)
        usage = last.usage if last is not None and last.usage is not None else None
        if usage is None:  # the server sent no usage: estimate it (documented)
            prompt = req.estimate - req.max_tokens
            out = count_tokens(text) if text else 0
            usage = Usage(prompt, out, prompt + out)
        reply = ChatCompletion(
            id=(last.id if last is not None else None) or "",
            model=(last.model if last is not None else None) or req.model,
            choices=[
                Choice(
                    0,
                    Message("assistant", text),
                    (last.finish_reason if last is not None else None) or "stop",
                )
            ],
            usage=usage,
        )
        cost = self._cost(reply, req, None)
        if cost is not None:
            reply = dataclasses.replace(reply, cost=cost)
        self.meter.add_attempt(reply.usage, reply.cost, priced=cost is not None, ok=True)
        telemetry.note_attempt("ok")
        self.meter.add_call()
        return reply

    def _stream_failed(self, req: Request, parts: list[str], exc: BaseException) -> None:
        text = "".join(parts)
        before = self._policy.check(exc)
        if not before.retry:
            before = _classify_stream_error(exc, content_seen=False)
        why = (
            f"it would be retried before any text ({before.reason}), but a retry now "
            "would repeat the text already handed out"
            if before.retry
            else before.reason
        )
        exc.surefoot_partial = text  # type: ignore[attr-defined]
        exc.add_note(
            f"surefoot.llm: the {self.provider} stream failed after {len(text)} characters "
            f"of text were handed out; not retried: {why}. The text so far is "
            "err.surefoot_partial."
        )
        prompt = req.estimate - req.max_tokens
        out = count_tokens(text) if text else 0
        usage = Usage(prompt, out, prompt + out)  # estimated: the tokens were produced
        price = self.prices.price_of(req.model)
        self.meter.add_attempt(
            usage, price.cost(usage) if price else 0.0, priced=price is not None, ok=False
        )
        telemetry.note_attempt(telemetry.attempt_outcome(exc))

    def __repr__(self) -> str:
        t = self.meter.totals
        return (
            f"{type(self).__name__}(model={self.model!r}, calls={t.calls}, "
            f"attempts={t.attempts}, cost={t.cost:.6f})"
        )
