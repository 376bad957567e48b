"""RetryPolicy and the one pure decision function the sync and async drivers share."""

from __future__ import annotations

import random
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, NamedTuple, cast

from ..errors import ConfigError
from ._backoff import Backoff
from ._budget import RetryBudget
from ._checks import duration, real
from ._classify import (
    DEFAULT_CLASSIFIER,
    Classifier,
    Decision,
    RetryOn,
    headers_of,
    parse_retry_after,
)

__all__ = [
    "TIMEOUT_MODES",
    "Attempt",
    "RetryEvent",
    "RetryPolicy",
    "Step",
    "attempts_of",
    "decide",
]

TIMEOUT_MODES = ("auto", "thread")


class Attempt(NamedTuple):
    """One failed attempt, as recorded in the history attached to the final error.

    Attributes:
        number: 1-based attempt number.
        error: ``"Type: message"`` of the error it raised.
        reason: why the policy retried or gave up.
        wait: seconds waited before the next attempt (None: gave up).
        elapsed: seconds since the call started, when it failed (for a policy without
            deadline, timeout or budget the clock is first read at the first failure, so
            the success path never touches it: elapsed then counts from there).
    """

    number: int
    error: str
    reason: str
    wait: float | None
    elapsed: float


class RetryEvent(NamedTuple):
    """What an ``on_retry`` hook sees: every decision, retries and the final give-up.

    Attributes:
        attempt: the attempt that failed. error: its exception. retry: True to try again.
        wait: seconds until the next attempt (0 when giving up). reason: one line.
        elapsed: seconds since the call started.
    """

    attempt: int
    error: BaseException
    retry: bool
    wait: float
    reason: str
    elapsed: float


class Step(NamedTuple):
    """The decision after a failed attempt: retry after ``wait`` seconds, or give up."""

    retry: bool
    wait: float
    reason: str


def _opt_seconds(value: float | timedelta | None, name: str) -> float | None:
    return duration(value, name, positive=True, none_means="no limit")


def _jitter(value: Any) -> float:
    out = real(value, "retry_after_jitter", "a fraction of the server's wait, 0..1")
    if not 0 <= out <= 1:
        raise ConfigError(
            f"retry_after_jitter must be a fraction of the server's wait between 0 and 1 "
            f"(0 obeys Retry-After exactly), got {value!r}"
        )
    return out


def _make_check(retry_on: RetryOn | None) -> Callable[[BaseException], Decision]:
    if retry_on is None:
        return DEFAULT_CLASSIFIER.classify
    if isinstance(retry_on, Classifier):
        return retry_on.classify
    if isinstance(retry_on, type) and issubclass(retry_on, BaseException):
        retry_on = (retry_on,)
    if isinstance(retry_on, tuple):
        types = retry_on
        if not types or not all(
            isinstance(t, type) and issubclass(t, BaseException) for t in types
        ):
            raise ConfigError(
                f"retry_on must be exception types, a Classifier or a callable, got {retry_on!r}"
            )
        names = ", ".join(t.__name__ for t in types)
        yes = Decision(True, f"the error is one of retry_on ({names})")

        def by_type(exc: BaseException) -> Decision:
            if isinstance(exc, types):
                if getattr(exc, "headers", None) is None:
                    return yes
                after = parse_retry_after(headers_of(exc))
                return yes if after is None else Decision(True, yes.reason, after)
            return Decision(False, f"{type(exc).__name__} is not in retry_on ({names})")

        return by_type
    if callable(retry_on):
        fn = cast(Callable[[BaseException], Any], retry_on)

        def by_callable(exc: BaseException) -> Decision:
            out = fn(exc)
            if isinstance(out, Decision):
                return out
            return Decision(bool(out), f"retry_on({type(exc).__name__}) returned {bool(out)}")

        return by_callable
    raise ConfigError(
        f"retry_on must be exception types, a Classifier or a callable, got {retry_on!r}"
    )


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How to retry one logical call. Immutable; per-call state lives in the driver.

    Args:
        max_attempts: attempts in total (1 = no retry).
        backoff: the waits between attempts when the server gives no ``Retry-After``.
        deadline: seconds for the whole call, waits included. No attempt starts and no
            sleep ends past it; a wait (or ``Retry-After``) longer than what is left gives up
            at once. None: no deadline.
        timeout_per_attempt: seconds one attempt may take (see the drivers for exactly what
            is enforced). None: no limit.
        retry_on: what is worth retrying: a ``Classifier`` (default: ``DEFAULT_CLASSIFIER``),
            exception types, or ``callable(exc) -> bool | Decision``.
        budget: a shared ``RetryBudget``; when it is empty the call gives up instead of
            retrying.
        max_retry_after: the longest ``Retry-After`` obeyed (finite seconds); a longer one
            fails at once.
        retry_after_jitter: how far above the server's ``Retry-After`` a wait may land, as a
            fraction of it: the wait is drawn from ``[after, after * (1 + jitter)]``, never
            below what the server asked. Default 0.1, so clients rate-limited at the same
            moment do not all come back at the same instant; 0 obeys it exactly. Under a
            deadline the jitter is cut so the wait ends at most halfway between the server's
            wait and the deadline (a ``Retry-After`` that does not fit fails at once).
        timeout_mode: how ``timeout_per_attempt`` is enforced on a *sync* function:
            ``"auto"`` (default) passes the limit to a ``timeout`` parameter if the function
            has one and otherwise cannot interrupt it; ``"thread"`` runs each timed attempt
            in a worker thread and stops waiting at the limit with ``TimeoutError_`` (the
            call is not killed and its late result is discarded). Async functions are
            always cancelled at the limit.
        on_retry: called with a ``RetryEvent`` for every decision.

    Infinity is never accepted as a duration: None means "no limit" for ``deadline`` and
    ``timeout_per_attempt``.

    Raises:
        ConfigError: ``max_attempts < 1``, ``deadline <= 0``, ``deadline=inf`` and the like,
            naming the value.
    """

    max_attempts: int = 3
    backoff: Backoff = field(default_factory=Backoff)
    deadline: float | None = None
    timeout_per_attempt: float | None = None
    retry_on: RetryOn | None = None
    budget: RetryBudget | None = None
    max_retry_after: float = 60.0
    retry_after_jitter: float = 0.1
    timeout_mode: str = "auto"
    on_retry: Callable[[RetryEvent], Any] | None = None
    check: Callable[[BaseException], Decision] = field(init=False, repr=False, compare=False)
    plain: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        ma = self.max_attempts
        if not isinstance(ma, int) or isinstance(ma, bool) or ma < 1:
            raise ConfigError(f"max_attempts must be an int >= 1 (1 means no retry), got {ma!r}")
        if not isinstance(self.backoff, Backoff):
            raise ConfigError(f"backoff must be a Backoff(base, cap, jitter), got {self.backoff!r}")
        set_ = object.__setattr__
        set_(self, "deadline", _opt_seconds(self.deadline, "deadline"))
        set_(
            self,
            "timeout_per_attempt",
            _opt_seconds(self.timeout_per_attempt, "timeout_per_attempt"),
        )
        set_(self, "max_retry_after", duration(self.max_retry_after, "max_retry_after"))
        set_(self, "retry_after_jitter", _jitter(self.retry_after_jitter))
        if self.timeout_mode not in TIMEOUT_MODES:
            raise ConfigError(
                f"timeout_mode must be one of {', '.join(map(repr, TIMEOUT_MODES))}, got "
                f"{self.timeout_mode!r}: 'auto' passes timeout= to functions that take it, "
                "'thread' runs sync attempts in a worker thread and stops waiting at the limit"
            )
        tpa, deadline = self.timeout_per_attempt, self.deadline
        if tpa is not None and deadline is not None and tpa >= deadline:
            warnings.warn(
                f"timeout_per_attempt={tpa:g} s is not shorter than deadline={deadline:g} s, so "
                "the first attempt can use the whole deadline and leave no time to retry; "
                "lower timeout_per_attempt",
                stacklevel=3,  # __post_init__ <- __init__ <- the caller
            )
        if self.budget is not None and not isinstance(self.budget, RetryBudget):
            raise ConfigError(f"budget must be a RetryBudget, got {self.budget!r}")
        if self.on_retry is not None and not callable(self.on_retry):
            raise TypeError(f"on_retry must be callable(RetryEvent), got {self.on_retry!r}")
        set_(self, "check", _make_check(self.retry_on))
        set_(
            self,
            "plain",
            self.deadline is None and self.timeout_per_attempt is None and self.budget is None,
        )


def decide(
    policy: RetryPolicy,
    attempt: int,
    error: BaseException,
    elapsed: float,
    previous_wait: float | None,
    rng: random.Random,
) -> Step:
    """After attempt ``attempt`` failed with ``error``: retry after how long, or give up?

    The only place retry rules live; the sync and async drivers only do the I/O. Pure
    except for drawing jitter from ``rng``.

    Args:
        policy: the rules.
        attempt: the number of the attempt that failed (1-based).
        error: what it raised.
        elapsed: seconds since the call started (used against the deadline).
        previous_wait: the last wait, for decorrelated jitter.
        rng: randomness for jitter.
    """
    retry, reason, after, _ = policy.check(error)
    return decide_checked(policy, attempt, retry, reason, after, elapsed, previous_wait, rng)


def decide_checked(
    policy: RetryPolicy,
    attempt: int,
    retry: bool,
    reason: str,
    after: float | None,
    elapsed: float,
    previous_wait: float | None,
    rng: random.Random,
) -> Step:
    """``decide`` once ``policy.check(error)`` has answered (the check runs exactly once)."""
    if not retry:
        return Step(False, 0.0, f"not retryable: {reason}")
    if attempt >= policy.max_attempts:
        return Step(
            False, 0.0, f"attempts exhausted ({attempt} of {policy.max_attempts}); {reason}"
        )
    if after is not None:
        if after > policy.max_retry_after:
            return Step(
                False,
                0.0,
                f"the server asked to wait {after:g} s, more than max_retry_after "
                f"({policy.max_retry_after:g} s); failing now instead of blocking",
            )
        wait = after
    else:
        wait = policy.backoff.wait(attempt, rng, previous_wait)
    deadline = policy.deadline
    if deadline is not None and wait >= deadline - elapsed:
        source = "backoff" if after is None else "Retry-After"
        return Step(
            False,
            0.0,
            f"the {source} wait of {wait:.3g} s does not fit in the "
            f"{max(deadline - elapsed, 0.0):.3g} s left before the {deadline:g} s deadline",
        )
    if after is not None and policy.retry_after_jitter > 0 and after > 0:
        spread = after * policy.retry_after_jitter
        if deadline is not None:  # end at most halfway to the deadline: time for an attempt
            spread = min(spread, (deadline - elapsed - after) / 2)
        wait = after + rng.random() * spread
    return _step(True, wait, reason)


def _step(retry: bool, wait: float, reason: str) -> Step:
    """``Step(retry, wait, reason)`` without NamedTuple's generated ``__new__`` (hot path)."""
    return _tuple_new(Step, (retry, wait, reason))


_tuple_new = tuple.__new__


def attempts_of(error: BaseException) -> tuple[Attempt, ...]:
    """The attempt history a retry driver attached to ``error`` (empty if none)."""
    return tuple(getattr(error, "surefoot_attempts", ()))
