"""A circuit breaker that never holds its lock while the protected call runs."""

from __future__ import annotations

import collections
import functools
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, ParamSpec, TypeVar

from .. import telemetry
from ..clock import Clock, SystemClock
from ..errors import CircuitOpenError, ConfigError
from ._checks import count, duration, fraction
from ._classify import is_retryable

__all__ = ["BreakerStats", "CircuitBreaker"]

P = ParamSpec("P")
T = TypeVar("T")

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half_open"

log = telemetry.get_logger("surefoot.resilience.breaker")


@dataclass(frozen=True, slots=True)
class BreakerStats:
    """Counts since the breaker was made.

    Attributes:
        calls: calls let through. successes, failures, ignored: their outcomes
        (ignored errors count as neither). rejected: calls refused while open.
        opened: times the breaker opened. state: the current state.
    """

    calls: int
    successes: int
    failures: int
    ignored: int
    rejected: int
    opened: int
    state: str


class CircuitBreaker:
    """Stops calling a failing service for a while, then probes it.

    ``closed`` → ``open`` when ``failure_threshold`` consecutive calls failed, or (if
    ``failure_rate`` is set) when at least ``min_calls`` of the last ``window`` calls were
    recorded and the failed share reached ``failure_rate``. ``open`` refuses calls with
    ``CircuitOpenError`` for ``reset_timeout`` seconds, then ``half_open`` lets exactly
    ``half_open_probes`` calls through: all succeed → ``closed``; any fails → ``open`` again.
    A call slower than ``slow_call_threshold`` counts as a failure even if it succeeded.

    The lock is held only to take a permit and to record the outcome, never during the
    call, so concurrent calls run concurrently (pybreaker serialises them). Outcomes of
    calls let through in an earlier state are not counted after the state changed.

    Args:
        name: shown in errors.
        failure_threshold: consecutive failures that open the breaker.
        failure_rate: failed share (0..1) over the window that opens it; None: off.
        window: how many recent calls the rate looks at.
        min_calls: calls needed in the window before the rate counts.
        reset_timeout: seconds (or timedelta) to stay open.
        half_open_probes: calls let through while half-open.
        slow_call_threshold: seconds after which a call counts as failed; None: off.
        is_failure: which errors count (default: the transient ones, ``is_retryable``);
            other errors are passed through and ignored.
        clock: time source (``SystemClock`` by default).
        on_state_change: ``callable(old, new)`` on every transition, called after the lock
            is released (so it may read ``state`` or ``stats()``); each transition once.

    Every transition is also logged (``surefoot.resilience.breaker``: WARNING when it
    opens, INFO otherwise), counted (``surefoot_breaker_transitions_total``) and, when
    traced, added as a ``surefoot.breaker.state_change`` event to the current span; the
    state is the ``surefoot_breaker_state`` gauge while the breaker lives.
    """

    def __init__(
        self,
        name: str = "default",
        *,
        failure_threshold: int = 5,
        failure_rate: float | None = None,
        window: int = 20,
        min_calls: int = 10,
        reset_timeout: float | timedelta = 30.0,
        half_open_probes: int = 1,
        slow_call_threshold: float | timedelta | None = None,
        is_failure: Callable[[BaseException], bool] | None = None,
        clock: Clock | None = None,
        on_state_change: Callable[[str, str], Any] | None = None,
    ) -> None:
        count(failure_threshold, "failure_threshold")
        if failure_rate is not None:
            failure_rate = fraction(failure_rate, "failure_rate", zero=False)
        count(window, "window")
        count(min_calls, "min_calls")
        if min_calls > window:
            raise ConfigError(
                f"need 1 <= min_calls <= window, got min_calls={min_calls!r} window={window!r}"
            )
        count(half_open_probes, "half_open_probes")
        self.name = name
        self.failure_threshold = failure_threshold
        self.failure_rate = failure_rate
        self.window = window
        self.min_calls = min_calls
        self.reset_timeout: float = duration(reset_timeout, "reset_timeout") or 0.0
        self.half_open_probes = half_open_probes
        self.slow_call_threshold = duration(
            slow_call_threshold, "slow_call_threshold", positive=True, none_means="off"
        )
        if is_failure is not None and not callable(is_failure):
            raise ConfigError(f"is_failure must be callable(exc) -> bool, got {is_failure!r}")
        if on_state_change is not None and not callable(on_state_change):
            raise ConfigError(
                f"on_state_change must be callable(old, new), got {on_state_change!r}"
            )
        self.is_failure = is_failure if is_failure is not None else is_retryable
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.on_state_change = on_state_change
        self.transitions: list[tuple[float, str, str]] = []
        self._lock = threading.Lock()
        self._state = CLOSED
        self._gen = 0  # bumped on every transition; permits carry it
        self._consecutive = 0
        self._outcomes: collections.deque[bool] = collections.deque(maxlen=window)
        self._window_failures = 0
        self._opened_at = 0.0
        self._probes_out = 0
        self._probes_ok = 0
        self._pending: list[tuple[str, str]] = []  # transitions whose hook has not run yet
        self._calls = self._ok = self._failed = self._ignored = self._rejected = self._opened = 0
        telemetry.track_breaker(self)

    # -- state -------------------------------------------------------------------------

    @property
    def state(self) -> str:
        """``closed``, ``open`` or ``half_open`` (open past its timeout reads half_open)."""
        with self._lock:
            if (
                self._state == OPEN
                and self.clock.monotonic() - self._opened_at >= self.reset_timeout
            ):
                return HALF_OPEN
            return self._state

    def stats(self) -> BreakerStats:
        """Counts of calls and outcomes so far."""
        st = self.state
        with self._lock:
            return BreakerStats(
                self._calls, self._ok, self._failed, self._ignored, self._rejected, self._opened, st
            )

    def _move(self, new: str) -> None:  # lock held
        old = self._state
        self._state = new
        self._gen += 1
        self._consecutive = 0
        self._outcomes.clear()
        self._window_failures = 0
        self._probes_out = self._probes_ok = 0
        now = self.clock.monotonic()
        if new == OPEN:
            self._opened_at = now
            self._opened += 1
        self.transitions.append((now, old, new))
        self._pending.append((old, new))  # reported by _notify once the lock is released

    def _notify(self) -> None:
        """Report the transitions made so far and call ``on_state_change``, outside the lock.

        The hook runs user code (logging, metrics, reading ``breaker.state``): under the
        lock it would deadlock on ``state`` and stall every other caller.
        """
        with self._lock:
            pending, self._pending = self._pending, []
        hook = self.on_state_change
        for old, new in pending:
            telemetry.BREAKER_TRANSITIONS.inc(self.name, new)
            telemetry.log_event(
                log,
                "breaker_" + new,
                logging.WARNING if new == OPEN else logging.INFO,
                breaker=self.name,
                previous=old,
                state=new,
            )
            telemetry.add_event(
                "surefoot.breaker.state_change",
                {
                    "surefoot.breaker.name": self.name,
                    "surefoot.breaker.from": old,
                    "surefoot.breaker.to": new,
                },
            )
            if hook is not None:
                hook(old, new)

    def reset(self) -> None:
        """Close the breaker by hand."""
        with self._lock:
            if self._state != CLOSED:
                self._move(CLOSED)
        self._notify()

    def force_open(self) -> None:
        """Open the breaker by hand (for ``reset_timeout`` seconds)."""
        with self._lock:
            self._move(OPEN)
        self._notify()

    # -- permits -----------------------------------------------------------------------

    def _acquire(self) -> tuple[int, bool, float]:
        """Take a permit (generation, is_probe, start) or raise ``CircuitOpenError``."""
        with self._lock:
            if self._state == CLOSED:
                self._calls += 1
                if self.slow_call_threshold is None:
                    return self._gen, False, 0.0
                return self._gen, False, self.clock.monotonic()
        permit = self._acquire_slow()
        if self._pending:
            self._notify()
        return permit

    def _acquire_slow(self) -> tuple[int, bool, float]:
        """``_acquire`` when the breaker is not closed: refuse, or hand out a probe."""
        with self._lock:
            st = self._state
            if st == CLOSED:  # closed by another thread in between
                self._calls += 1
                start = 0.0 if self.slow_call_threshold is None else self.clock.monotonic()
                return self._gen, False, start
            now = self.clock.monotonic()
            if st == OPEN:
                left = self._opened_at + self.reset_timeout - now
                if left > 0:
                    self._rejected += 1
                    raise CircuitOpenError(self.name, left)
                self._move(HALF_OPEN)
            if self._probes_out >= self.half_open_probes:
                self._rejected += 1
                raise CircuitOpenError(self.name, 0.0)
            self._probes_out += 1
            self._calls += 1
            return self._gen, True, now

    def _record(self, permit: tuple[int, bool, float], error: BaseException | None) -> None:
        """Count the outcome; a cancellation or KeyboardInterrupt is ignored, not a success."""
        gen, probe, start = permit
        failed: bool | None
        if error is None:
            if self.slow_call_threshold is None and not probe and self.failure_rate is None:
                with self._lock:  # the common case: a success while closed
                    self._ok += 1
                    if gen == self._gen:
                        self._consecutive = 0
                return
            failed = False
            if self.slow_call_threshold is not None and (
                self.clock.monotonic() - start > self.slow_call_threshold
            ):
                failed = True
        elif isinstance(error, Exception) and self.is_failure(error):
            failed = True
        else:
            failed = None
        with self._lock:
            self._count(gen, probe, failed)
        if self._pending:
            self._notify()

    def _count(self, gen: int, probe: bool, failed: bool | None) -> None:  # lock held
        """Record one outcome and move state if it calls for it."""
        if failed is None:
            self._ignored += 1
            if probe and gen == self._gen:
                self._probes_out -= 1  # give the probe slot back: it told us nothing
            return
        if failed:
            self._failed += 1
        else:
            self._ok += 1
        if gen != self._gen:
            return  # started in an earlier state: does not count now
        if probe:
            if failed:
                self._move(OPEN)
            else:
                self._probes_ok += 1
                if self._probes_ok >= self.half_open_probes:
                    self._move(CLOSED)
            return
        if failed:
            self._consecutive += 1
        else:
            self._consecutive = 0
        if self.failure_rate is not None:
            if len(self._outcomes) == self.window and self._outcomes[0]:
                self._window_failures -= 1
            self._outcomes.append(failed)
            self._window_failures += failed
        if failed and (
            self._consecutive >= self.failure_threshold
            or (
                self.failure_rate is not None
                and len(self._outcomes) >= self.min_calls
                and self._window_failures >= self.failure_rate * len(self._outcomes)
            )
        ):
            self._move(OPEN)

    # -- calling -----------------------------------------------------------------------

    def call(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Call ``fn`` through the breaker.

        Raises:
            CircuitOpenError: the breaker is open (the call was not made).
            Whatever ``fn`` raised (recorded first).
        """
        permit = self._acquire()
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:
            self._record(permit, exc)
            raise
        self._record(permit, None)
        return result

    async def acall(self, fn: Callable[..., Awaitable[T]], /, *args: Any, **kwargs: Any) -> T:
        """Await ``fn`` through the breaker (the async twin of :meth:`call`)."""
        permit = self._acquire()
        try:
            result = await fn(*args, **kwargs)
        except BaseException as exc:
            self._record(permit, exc)
            raise
        self._record(permit, None)
        return result

    def __call__(self, fn: Callable[P, T]) -> Callable[P, T]:
        """Use the breaker as a decorator on a sync or async function."""
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def awrapper(*args: P.args, **kwargs: P.kwargs) -> Any:
                return await self.acall(fn, *args, **kwargs)

            return awrapper  # type: ignore[return-value]

        acquire, record = self._acquire, self._record  # bound once: this is the hot path

        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
            permit = acquire()
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:
                record(permit, exc)
                raise
            record(permit, None)
            return result

        return wrapper

    def __repr__(self) -> str:
        return f"CircuitBreaker({self.name!r}, state={self.state!r})"
