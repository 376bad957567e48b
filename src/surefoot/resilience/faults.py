"""Seeded fault injectors for fakes: errors, outages, slow calls and lost replies.

An injector decides, for the n-th request a fake receives (1-based), what goes wrong with it,
as a :class:`Fault`: an error raised *before* the effect, extra simulated seconds, or a reply
dropped *after* the effect happened (the work was done, the caller never hears of it)::

    from surefoot.resilience import faults
    inj = faults.chain(faults.FailFraction(0.3, status=503, seed=7), faults.Slow(2.0))
    flaky = faults.wrap(service, inj, clock=clock)   # counts calls and effects inside

Every injector is deterministic for its seed. The fakes that use them (``wrap``,
``surefoot.llm.FakeLLM``) count what they receive; reports read those counts, never the
client's own.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from ..clock import Clock, FakeClock
from ..errors import ConfigError, TimeoutError_

__all__ = [
    "Chain",
    "DropReply",
    "FailFraction",
    "Fault",
    "FaultyCall",
    "Injector",
    "Outage",
    "ProviderError",
    "ReplyLostError",
    "Script",
    "Slow",
    "chain",
    "spend",
    "wrap",
]

T = TypeVar("T")


class ProviderError(Exception):
    """An HTTP error from a provider, shaped like an SDK's ``APIStatusError``.

    Args:
        status: the HTTP status code.
        headers: response headers (names are matched case-insensitively).
        body: the response body (a string or decoded JSON).

    Attributes:
        status_code: the HTTP status.
        headers: the headers, names lower-cased.
        body: the body.
    """

    def __init__(
        self, status: int, headers: Mapping[str, str] | None = None, body: Any = None
    ) -> None:
        self.status_code = int(status)
        self.headers = {str(k).lower(): str(v) for k, v in (headers or {}).items()}
        self.body = body
        detail = f": {body}" if body else ""
        super().__init__(f"HTTP {self.status_code}{detail}")

    def __reduce__(self) -> Any:  # keep copy/deepcopy working with the 3-argument signature
        return (type(self), (self.status_code, self.headers, self.body))


class ReplyLostError(ConnectionResetError):
    """The request reached the service and took effect, but the reply was lost.

    A connection reset, as the caller sees it: the caller cannot tell that the work was done.
    """


@dataclass(frozen=True, slots=True)
class Fault:
    """What goes wrong with one request.

    Attributes:
        error: raised before the effect (nothing happened on the service side).
        delay: extra simulated seconds the request takes.
        drop_reply: the effect happens, then the reply is lost (``ReplyLostError``).
    """

    error: BaseException | None = None
    delay: float = 0.0
    drop_reply: bool = False


@runtime_checkable
class Injector(Protocol):
    """Decides the fault of the n-th request (1-based); ``key`` is the request's key, if any."""

    def plan(self, n: int, key: str | None = None) -> Fault | None: ...


def _fraction(value: float, name: str = "fraction") -> float:
    if not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise ConfigError(f"{name} must be between 0 and 1, got {value!r}")
    return float(value)


class _Seeded:
    """Draws one uniform number per request number, so a plan is a pure function of (seed, n)."""

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def draw(self, n: int) -> float:
        return random.Random(self.seed * 1_000_003 + n).random()


class FailFraction(_Seeded):
    """Fail a seeded fraction of requests with an HTTP status (or a timeout).

    Args:
        fraction: the share of requests that fail, 0..1.
        status: the HTTP status of the ``ProviderError`` raised.
        seed: which requests fail is fixed by the seed.
        headers: headers of the error (e.g. ``{"retry-after": "2"}``).
        body: body of the error.
        timeout: raise a builtin ``TimeoutError`` (a read timeout) instead of a status.
    """

    def __init__(
        self,
        fraction: float,
        status: int = 503,
        *,
        seed: int = 0,
        headers: Mapping[str, str] | None = None,
        body: Any = None,
        timeout: bool = False,
    ) -> None:
        super().__init__(seed)
        self.fraction = _fraction(fraction)
        self.status = status
        self.headers = dict(headers or {})
        self.body = body
        self.timeout = timeout

    def plan(self, n: int, key: str | None = None) -> Fault | None:
        if self.draw(n) >= self.fraction:
            return None
        if self.timeout:
            return Fault(error=TimeoutError("read timed out (injected)"))
        return Fault(error=ProviderError(self.status, self.headers, self.body))


class Outage:
    """Fail every request numbered ``start``..``end`` (inclusive) with ``status``.

    Args:
        start, end: the window, by request number (1-based, inclusive).
        status: the HTTP status of the ``ProviderError``.
        headers: headers of the error.
        delay: simulated seconds a failing request takes before its error (a server that
            hangs, then answers 503).
        counter: number the window by this instead of by calls received, e.g.
            ``lambda: client.requests`` to take the service down for *logical* requests
            300..600 however many retries each makes.
    """

    def __init__(
        self,
        start: int,
        end: int,
        status: int = 503,
        headers: Mapping[str, str] | None = None,
        *,
        delay: float = 0.0,
        counter: Callable[[], int] | None = None,
    ) -> None:
        if delay < 0:
            raise ConfigError(f"outage delay must be >= 0 seconds, got {delay!r}")
        if start < 1 or end < start:
            raise ConfigError(f"an outage needs 1 <= start <= end, got start={start!r} end={end!r}")
        self.start, self.end, self.status = start, end, status
        self.headers = dict(headers or {})
        self.counter = counter
        self.delay = float(delay)

    def plan(self, n: int, key: str | None = None) -> Fault | None:
        if self.counter is not None:
            n = self.counter()
        if self.start <= n <= self.end:
            err = ProviderError(self.status, self.headers, "outage (injected)")
            return Fault(error=err, delay=self.delay)
        return None


class Slow(_Seeded):
    """Make requests take simulated seconds.

    Args:
        seconds: one duration for every slowed request, or a list: request n takes
            ``seconds[n-1]`` (the last value repeats).
        fraction: the share of requests slowed (seeded).
        seed: which requests are slowed.
    """

    def __init__(
        self, seconds: float | Sequence[float], *, fraction: float = 1.0, seed: int = 0
    ) -> None:
        super().__init__(seed)
        values = [float(seconds)] if isinstance(seconds, int | float) else list(seconds)
        if not values or any(v < 0 for v in values):
            raise ConfigError(f"slow seconds must be >= 0 and not empty, got {seconds!r}")
        self.values = values
        self.fraction = _fraction(fraction)

    def plan(self, n: int, key: str | None = None) -> Fault | None:
        if self.fraction < 1.0 and self.draw(n) >= self.fraction:
            return None
        return Fault(delay=self.values[min(n, len(self.values)) - 1])


class DropReply(_Seeded):
    """Drop the reply after the effect: for the first request of each key, or a fraction.

    Args:
        first_per_key: drop the reply to the first request carrying each key (requests
            without a key are left to ``fraction``).
        fraction: drop a seeded fraction of the replies to requests without a key.
        seed: which replies are dropped when ``fraction`` is used.
    """

    def __init__(self, *, first_per_key: bool = True, fraction: float = 0.0, seed: int = 0) -> None:
        super().__init__(seed)
        self.first_per_key = first_per_key
        self.fraction = _fraction(fraction)
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def plan(self, n: int, key: str | None = None) -> Fault | None:
        if self.first_per_key and key is not None:
            with self._lock:
                if key in self._seen:
                    return None
                self._seen.add(key)
            return Fault(drop_reply=True)
        if self.fraction and self.draw(n) < self.fraction:
            return Fault(drop_reply=True)
        return None


class Script:
    """Play a fixed list of faults by request number; after the list, nothing goes wrong.

    Entries are a ``Fault``, an exception (raised before the effect), an HTTP status
    (``ProviderError``), a float (simulated seconds) or ``None`` (success)::

        Script([ProviderError(429, {"retry-after": "2"}), 503, None])
    """

    def __init__(self, steps: Sequence[Fault | BaseException | int | float | None]) -> None:
        self.steps = list(steps)

    def plan(self, n: int, key: str | None = None) -> Fault | None:
        if n > len(self.steps):
            return None
        step = self.steps[n - 1]
        if step is None or isinstance(step, Fault):
            return step
        if isinstance(step, BaseException):
            # a fresh copy per request, so notes and tracebacks never pile up on one object
            err: BaseException = step
            try:
                if isinstance(step, ProviderError):
                    err = type(step)(step.status_code, step.headers, step.body)
                else:
                    err = type(step)(*step.args)
            except Exception:  # an exception type with an unusual __init__: reuse it
                err = step
            return Fault(error=err)
        if isinstance(step, bool):
            raise ConfigError(f"script step must not be a bool, got {step!r}")
        if isinstance(step, int):
            return Fault(error=ProviderError(step, None, "scripted"))
        return Fault(delay=float(step))


class Chain:
    """Several injectors at once: the first error wins, delays add up, any drop drops."""

    def __init__(self, *injectors: Injector) -> None:
        self.injectors = injectors

    def plan(self, n: int, key: str | None = None) -> Fault | None:
        error: BaseException | None = None
        delay = 0.0
        drop = False
        hit = False
        for inj in self.injectors:
            f = inj.plan(n, key)
            if f is None:
                continue
            hit = True
            if error is None:
                error = f.error
            delay += f.delay
            drop = drop or f.drop_reply
        return Fault(error, delay, drop) if hit else None


def chain(*injectors: Injector) -> Chain:
    """Combine injectors (see :class:`Chain`)."""
    return Chain(*injectors)


def spend(clock: Clock, seconds: float, timeout: float | None = None) -> None:
    """Spend ``seconds`` of simulated work on ``clock``, cut at ``timeout``.

    A ``FakeClock`` advances (work is not a sleep, so ``sleeps`` stays clean); another clock
    really sleeps. When ``timeout`` is smaller than ``seconds`` the clock moves by ``timeout``
    only and ``TimeoutError_`` is raised, as a per-attempt timeout cuts a slow call.
    """
    cut = timeout is not None and seconds > timeout
    step = timeout if cut and timeout is not None else seconds
    if step > 0:
        if isinstance(clock, FakeClock):
            clock.advance(step)
        else:
            clock.sleep(step)
    if cut and timeout is not None:
        raise TimeoutError_(timeout)


class FaultyCall(Generic[T]):
    """A function behind an injector, counting what it receives.

    Calling it with ``timeout=`` (as ``retry_call`` does for callables that accept one)
    cuts a slow request at the timeout. Pass ``key=`` to let key-aware injectors see it
    (the key is not forwarded to the wrapped function).

    Attributes:
        calls: requests received. effects: times the wrapped function ran.
        errors: requests failed before the effect. lost_replies: effects whose reply was lost.
    """

    def __init__(self, fn: Callable[..., T], injector: Injector | None, clock: Clock) -> None:
        self.fn = fn
        self.injector = injector
        self.clock = clock
        self.calls = 0
        self.effects = 0
        self.errors = 0
        self.lost_replies = 0
        self._lock = threading.Lock()
        # not functools.update_wrapper: __wrapped__ would hide our ``timeout`` parameter
        self.__name__ = getattr(fn, "__name__", type(fn).__name__)
        self.__doc__ = getattr(fn, "__doc__", None)

    def __call__(
        self, *args: Any, timeout: float | None = None, key: str | None = None, **kwargs: Any
    ) -> T:
        with self._lock:
            self.calls += 1
            n = self.calls
        fault = self.injector.plan(n, key) if self.injector is not None else None
        if fault is not None and fault.delay:
            spend(self.clock, fault.delay, timeout)
        if fault is not None and fault.error is not None:
            with self._lock:
                self.errors += 1
            raise fault.error
        result = self.fn(*args, **kwargs)
        with self._lock:
            self.effects += 1
        if fault is not None and fault.drop_reply:
            with self._lock:
                self.lost_replies += 1
            raise ReplyLostError("connection reset after the request took effect (injected)")
        return result


def wrap(
    fn: Callable[..., T], injector: Injector | None = None, *, clock: Clock | None = None
) -> FaultyCall[T]:
    """Put ``fn`` behind ``injector``; the result counts calls, effects and lost replies."""
    if not callable(fn):
        raise TypeError(f"wrap() needs a callable, got {fn!r}")
    return FaultyCall(fn, injector, clock if clock is not None else FakeClock())
