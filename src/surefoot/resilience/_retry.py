"""The retry drivers, sync and async side by side; the rules live in ``_policy.decide``.

What ``timeout_per_attempt`` enforces, exactly:

- **async** functions: the attempt runs under ``asyncio.timeout``; at the limit it is
  cancelled and the attempt fails with ``TimeoutError_`` (real time on the event loop).
- **any** function that declares a ``timeout`` parameter (and was not given one) receives
  the attempt's limit: ``min(timeout_per_attempt, time left before the deadline)``. Fakes on
  a ``FakeClock`` (``FakeLLM``, ``faults.wrap``) use it to cut a slow call at the limit,
  advancing the clock by the smaller of call time and timeout; HTTP clients use it as their
  socket timeout.
- **sync** functions without a ``timeout`` parameter are **not** interrupted under the
  default ``timeout_mode="auto"``: Python cannot stop a running call safely. Their result is
  returned even if it came late; the deadline is still checked before every later attempt
  and every sleep.
- ``timeout_mode="thread"``: each timed attempt of a sync function runs in a fresh daemon
  thread; the caller waits at most the attempt's limit (real time), then the attempt fails
  with ``TimeoutError_``. The thread is **not** killed: the call runs on, and its result or
  error is discarded. Use it only for calls that are safe to abandon (reads, or effects
  guarded by an idempotency key).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import random
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar, overload

from .. import telemetry
from ..clock import Clock, SystemClock, default_clock
from ..errors import TimeoutError_
from ._policy import Attempt, RetryEvent, RetryPolicy, decide_checked

__all__ = ["aretry_call", "retry", "retry_call"]

P = ParamSpec("P")
T = TypeVar("T")

_RNG = random.Random()
DEFAULT_POLICY = RetryPolicy()
_TRACING = telemetry.TRACING  # .tracer is None until telemetry.instrument(): one read a call
_DECISIONS = telemetry.RETRY_DECISIONS


def accepts_timeout(fn: Callable[..., Any]) -> bool:
    """True if ``fn`` declares a ``timeout`` parameter (cached; unhashable callables too)."""
    try:
        return _accepts_timeout_cached(fn)
    except TypeError:  # unhashable: inspect it every time
        return _accepts_timeout_cached.__wrapped__(fn)


@functools.lru_cache(maxsize=512)
def _accepts_timeout_cached(fn: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    p = params.get("timeout")
    return p is not None and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)


def _with_timeout(
    fn: Callable[..., Any], kwargs: dict[str, Any], limit: float | None
) -> dict[str, Any]:
    if limit is None or "timeout" in kwargs:
        return kwargs
    return {**kwargs, "timeout": limit} if accepts_timeout(fn) else kwargs


def _call_in_thread(
    fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any], limit: float
) -> T:
    """``fn(*args, **kwargs)`` in a daemon thread; ``TimeoutError_`` if it outlives ``limit``.

    The thread is abandoned, not killed, at the limit: what it returns or raises later is
    dropped. A daemon thread, so a hung call never keeps the interpreter from exiting.
    """
    done = threading.Event()
    box: list[Any] = []

    def work() -> None:
        try:
            box.append((True, fn(*args, **kwargs)))
        except BaseException as exc:  # handed to the caller, or dropped after the limit
            box.append((False, exc))
        finally:
            done.set()

    name = getattr(fn, "__qualname__", type(fn).__name__)
    threading.Thread(target=work, name=f"surefoot-attempt:{name}", daemon=True).start()
    if not done.wait(limit):
        raise TimeoutError_(
            limit,
            f"the attempt did not return within {limit:g} s (timeout_mode='thread'); its "
            "thread was left running and its result will be discarded",
        )
    ok, value = box[0]
    if ok:
        return value  # type: ignore[no-any-return]
    raise value


def _describe(tp: type[BaseException], text: str) -> str:
    return f"{tp.__name__}: {text}" if text else tp.__name__


class _Run:
    """Per-call state of one logical call: never shared between calls."""

    __slots__ = (
        "attempt",
        "clock",
        "fname",
        "history",
        "hook",
        "mono",
        "policy",
        "prev",
        "rng",
        "start",
    )

    def __init__(
        self,
        policy: RetryPolicy,
        clock: Clock | None,
        rng: random.Random | None,
        on_retry: Callable[[RetryEvent], Any] | None,
        fn: Any = None,
    ) -> None:
        self.policy = policy
        # the name attempt spans carry; None when not traced (no span is made then)
        self.fname = (
            None if _TRACING.tracer is None else getattr(fn, "__qualname__", type(fn).__name__)
        )
        c = clock if clock is not None else default_clock()
        self.clock = c
        self.rng = rng if rng is not None else _RNG
        self.hook = on_retry if on_retry is not None else policy.on_retry
        # plain tuples while running; Attempt records are built only if the call gives up
        self.history: list[tuple[int, type[BaseException], str, str, float | None, float]] = []
        self.prev: float | None = None
        self.attempt = 0
        # the system clock's monotonic() is time.monotonic(): skip the wrapper (read 3x a call)
        self.mono = mono = time.monotonic if type(c) is SystemClock else c.monotonic
        self.start = mono()
        if policy.budget is not None:
            policy.budget.record_request()

    def limit(self) -> float | None:
        """The time this attempt may take, or None; raises nothing (checked by ``left``)."""
        p = self.policy
        t = p.timeout_per_attempt
        if p.deadline is not None:
            left = p.deadline - (self.mono() - self.start)
            t = left if t is None or left < t else t
        return t

    def elapsed(self) -> float:
        return self.mono() - self.start

    def span(self) -> telemetry.AttemptSpan | None:
        """The span of the attempt about to start (current while it runs), or None."""
        if self.fname is None:
            return None
        return telemetry.attempt_span(
            self.fname, self.attempt, {"surefoot.retry.max_attempts": self.policy.max_attempts}
        )

    def after_failure(
        self, err: BaseException, span: telemetry.AttemptSpan | None = None
    ) -> float | None:
        """Record the failed attempt and decide: the wait before the next one, None to give up.

        On give-up the history and the note are attached to ``err`` before returning. The
        decision is counted (``surefoot_retry_decisions_total``) and, when traced, added to
        the attempt's span as a ``surefoot.retry.decision`` event.
        """
        p = self.policy
        n = self.attempt
        elapsed = self.mono() - self.start
        retry, reason, after, _ = p.check(err)  # exactly once: a user's retry_on may count
        if retry and after is None and p.deadline is None and n < p.max_attempts:
            # the common case, decide()'s last branch with nothing else to check
            wait = p.backoff.wait(n, self.rng, self.prev)
        else:
            retry, wait, reason = decide_checked(
                p, n, retry, reason, after, elapsed, self.prev, self.rng
            )
        if retry and p.budget is not None and not p.budget.try_retry():
            retry, wait, reason = False, 0.0, "the retry budget is empty (an outage?): not retried"
        self.history.append((n, type(err), str(err), reason, wait if retry else None, elapsed))
        _DECISIONS.inc(
            "retry" if retry else "give_up",
            telemetry.reason_code(retry, reason),
            type(err).__qualname__,
        )
        if span is not None:
            span.decided(err, retry, wait if retry else None, reason)
        if self.hook is not None:
            self.hook(RetryEvent(n, err, retry, wait, reason, elapsed))
        if not retry:
            self.give_up(err, reason, elapsed)
            return None
        self.prev = wait
        return wait

    def give_up(self, err: BaseException, reason: str, elapsed: float) -> None:
        try:
            err.surefoot_attempts = tuple(  # type: ignore[attr-defined]
                Attempt(n, _describe(tp, text), why, wait, at)
                for n, tp, text, why, wait, at in self.history
            )
        except AttributeError:  # an exception type without a __dict__
            pass
        n = self.attempt
        err.add_note(
            f"surefoot.retry: gave up after {n} attempt{'s' if n != 1 else ''} "
            f"in {elapsed:.3g} s: {reason}"
        )


def _retry_sync(
    fn: Callable[..., T],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    run: _Run,
    first: BaseException | None,
) -> T:
    """Everything after the first failure (plain policies) or the whole call (the others)."""
    if not callable(fn):  # checked here, off the success path
        raise TypeError(f"retry_call() needs a function to call, got {fn!r}")
    last: BaseException | None = None
    if first is not None:
        run.attempt = 1
        wait = run.after_failure(first)
        if wait is None:
            raise first
        if wait > 0:
            run.clock.sleep(wait)
        last = first
    timed = run.policy.deadline is not None or run.policy.timeout_per_attempt is not None
    threaded = timed and run.policy.timeout_mode == "thread"
    while True:
        run.attempt += 1
        kw = kwargs
        limit = None
        if timed:
            limit = run.limit()
            if limit is not None and limit <= 0 and last is not None:
                run.attempt -= 1  # a real sleep overshot the deadline: no attempt starts past it
                run.give_up(last, "the deadline passed during the wait", run.elapsed())
                raise last
            kw = _with_timeout(fn, kwargs, limit)
        span = None if run.fname is None else run.span()
        try:
            if threaded and limit is not None:
                return _call_in_thread(fn, args, kw, max(limit, 0.0))
            return fn(*args, **kw)
        except Exception as exc:  # the policy decides
            wait = run.after_failure(exc, span)
            if wait is None:
                raise
            last = exc
        finally:
            if span is not None:
                span.close()
        if wait > 0:
            run.clock.sleep(wait)


def retry_call(
    fn: Callable[..., T],
    /,
    *args: Any,
    policy: RetryPolicy | None = None,
    clock: Clock | None = None,
    rng: random.Random | None = None,
    on_retry: Callable[[RetryEvent], Any] | None = None,
    **kwargs: Any,
) -> T:
    """Call ``fn(*args, **kwargs)``, retrying by ``policy``.

    When attempts run out, or an error is not retryable, the last error is re-raised
    unchanged (``except RateLimitError`` still works) with the history attached:
    ``attempts_of(err)`` and a note. A zero wait never calls ``sleep``.

    Args:
        fn: the function to call.
        policy: the rules (``RetryPolicy()`` by default: 3 attempts, full-jitter backoff).
        clock: where time is read and waits happen (``SystemClock`` by default).
        rng: randomness for jitter (pass ``random.Random(seed)`` for reproducible waits).
        on_retry: called with a ``RetryEvent`` for every decision (overrides the policy's).

    Raises:
        Whatever ``fn`` raised last.
    """
    p = policy if policy is not None else DEFAULT_POLICY
    if p.plain and _TRACING.tracer is None:  # the success path touches no clock or lock
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # the policy decides
            first = exc
        return _retry_sync(fn, args, kwargs, _Run(p, clock, rng, on_retry), first)
    return _retry_sync(fn, args, kwargs, _Run(p, clock, rng, on_retry, fn), None)


async def aretry_call(
    fn: Callable[..., Awaitable[T]],
    /,
    *args: Any,
    policy: RetryPolicy | None = None,
    clock: Clock | None = None,
    rng: random.Random | None = None,
    on_retry: Callable[[RetryEvent], Any] | None = None,
    **kwargs: Any,
) -> T:
    """Await ``fn(*args, **kwargs)``, retrying by ``policy``; the async twin of ``retry_call``.

    Each attempt with a time limit runs under ``asyncio.timeout`` and fails with
    ``TimeoutError_`` when cancelled at the limit.
    """
    p = policy if policy is not None else DEFAULT_POLICY
    if not callable(fn):
        raise TypeError(f"aretry_call() needs an async function to call, got {fn!r}")
    run = _Run(p, clock, rng, on_retry, fn)
    last: BaseException | None = None
    while True:
        run.attempt += 1
        limit = run.limit()
        if limit is not None and limit <= 0 and last is not None:
            run.attempt -= 1  # a real sleep overshot the deadline: no attempt starts past it
            run.give_up(last, "the deadline passed during the wait", run.elapsed())
            raise last
        kw = _with_timeout(fn, kwargs, limit)
        span = None if run.fname is None else run.span()
        try:
            if limit is None:
                return await fn(*args, **kw)
            cm = asyncio.timeout(limit)
            try:
                async with cm:
                    return await fn(*args, **kw)
            except TimeoutError as exc:
                if cm.expired() and not isinstance(exc, TimeoutError_):
                    raise TimeoutError_(limit) from exc
                raise
        except Exception as exc:
            wait = run.after_failure(exc, span)
            if wait is None:
                raise
            last = exc
        finally:
            if span is not None:
                span.close()
        if wait > 0:
            await run.clock.asleep(wait)


@overload
def retry(fn: Callable[P, T], /) -> Callable[P, T]: ...
@overload
def retry(
    policy: RetryPolicy | None = None,
    /,
    *,
    clock: Clock | None = None,
    rng: random.Random | None = None,
    on_retry: Callable[[RetryEvent], Any] | None = None,
    **policy_args: Any,
) -> Callable[[Callable[P, T]], Callable[P, T]]: ...
def retry(
    policy: Any = None,
    /,
    *,
    clock: Clock | None = None,
    rng: random.Random | None = None,
    on_retry: Callable[[RetryEvent], Any] | None = None,
    **policy_args: Any,
) -> Any:
    """Decorate a sync or async function so every call is retried by a policy.

    ``@retry``, ``@retry(policy)`` or ``@retry(max_attempts=4, deadline=30)``. The
    decorator picks the sync or async driver from the function; the signature is kept.
    """
    if callable(policy) and not isinstance(policy, RetryPolicy):
        return retry()(policy)
    if policy is not None and policy_args:
        raise TypeError("pass either a RetryPolicy or policy arguments to retry(), not both")
    p = (
        policy
        if policy is not None
        else (RetryPolicy(**policy_args) if policy_args else DEFAULT_POLICY)
    )

    def deco(fn: Callable[P, T]) -> Callable[P, T]:
        if not callable(fn):
            raise TypeError(f"@retry decorates a function, got {fn!r}")
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def awrapper(*args: P.args, **kwargs: P.kwargs) -> Any:
                return await aretry_call(
                    fn, *args, policy=p, clock=clock, rng=rng, on_retry=on_retry, **kwargs
                )

            return awrapper  # type: ignore[return-value]

        if p.plain:

            @functools.wraps(fn)
            def plain(*args: P.args, **kwargs: P.kwargs) -> T:
                if _TRACING.tracer is not None:
                    return _retry_sync(fn, args, kwargs, _Run(p, clock, rng, on_retry, fn), None)
                try:
                    return fn(*args, **kwargs)
                except Exception as exc:  # the policy decides
                    first = exc
                return _retry_sync(fn, args, kwargs, _Run(p, clock, rng, on_retry), first)

            return plain

        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
            return _retry_sync(fn, args, kwargs, _Run(p, clock, rng, on_retry, fn), None)

        return wrapper

    return deco
