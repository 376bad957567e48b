"""Fallback chains and the ResilientClient: retry and breaker per backend, fallback outside."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Generator
from typing import Any, Generic, TypeVar

from ..clock import Clock
from ._breaker import CircuitBreaker
from ._policy import RetryPolicy
from ._retry import accepts_timeout, aretry_call, retry_call

__all__ = ["Fallback", "ResilientClient"]

T = TypeVar("T")
_PRIMARY, _BACKUP = "primary", "backup"  # what the client's flow asks for


class Fallback(Generic[T]):
    """Call ``primary``; when it fails with an error ``on`` accepts, call the backups in order.

    If every backend fails, the last error is raised with the earlier ones as notes.

    Args:
        primary: the first choice. backups: the others, in order.
        on: which errors move on to the next backend (default: every ``Exception``).

    Attributes:
        served: how many calls each backend answered (index 0 is the primary).
        failed: calls on which every backend failed.
    """

    def __init__(
        self,
        primary: Callable[..., T],
        *backups: Callable[..., T],
        on: Callable[[BaseException], bool] | tuple[type[BaseException], ...] | None = None,
    ) -> None:
        chain = (primary, *backups)
        for fn in chain:
            if not callable(fn):
                raise TypeError(f"Fallback needs callables, got {fn!r}")
        self.chain = chain
        if on is None:
            self._on: Callable[[BaseException], bool] = lambda e: isinstance(e, Exception)
        elif isinstance(on, tuple):
            types = on
            self._on = lambda e: isinstance(e, types)
        else:
            self._on = on
        self.served = [0] * len(chain)
        self.failed = 0
        self._lock = threading.Lock()

    def _note(self, errors: list[BaseException], last: BaseException) -> None:
        for i, e in enumerate(errors):
            last.add_note(f"surefoot.fallback: backend {i} failed first: {type(e).__name__}: {e}")

    def _flow(self) -> Generator[Callable[..., Any], Any, Any]:
        """Yield each backend to call, in order; its answer is sent back, its error thrown in."""
        errors: list[BaseException] = []
        last = len(self.chain) - 1
        for i, fn in enumerate(self.chain):
            try:
                out = yield fn
            except Exception as exc:
                if i == last or not self._on(exc):
                    with self._lock:
                        self.failed += 1
                    self._note(errors, exc)
                    raise
                errors.append(exc)
                continue
            with self._lock:
                self.served[i] += 1
            return out
        raise AssertionError("unreachable")  # pragma: no cover

    # -- drivers: the same lines, with and without await -------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> T:
        flow = self._flow()
        try:
            fn = next(flow)
            while True:
                try:
                    got = fn(*args, **kwargs)
                except Exception as exc:
                    fn = flow.throw(exc)
                    continue
                fn = flow.send(got)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    async def acall(self, *args: Any, **kwargs: Any) -> Any:
        """Await the chain (each backend an async function)."""
        flow = self._flow()
        try:
            fn = next(flow)
            while True:
                try:
                    got = await fn(*args, **kwargs)
                except Exception as exc:
                    fn = flow.throw(exc)
                    continue
                fn = flow.send(got)
        except StopIteration as done:
            return done.value


class ResilientClient(Generic[T]):
    """A primary service with retries behind a circuit breaker, and a backup to fall back on.

    The composition order is fixed (as in Polly's standard pipeline): fallback outside →
    retry (with its deadline and budget) → breaker → per-attempt timeout → the call. The
    breaker sits inside the retry, so every attempt is recorded and an open breaker ends
    the primary's retries at once (``CircuitOpenError`` is not retried); the backup then
    answers with its own policy.

    Args:
        primary: the service to prefer. backup: the one to fall back on (None: no fallback).
        policy: retries of the primary. breaker: guards the primary (None: no breaker).
        backup_policy: retries of the backup (default: one attempt).
        clock, rng: passed to the retry drivers.

    Attributes:
        requests, primary_ok, backup_ok, failed: counts of logical requests.
    """

    def __init__(
        self,
        primary: Callable[..., T],
        backup: Callable[..., T] | None = None,
        *,
        policy: RetryPolicy | None = None,
        breaker: CircuitBreaker | None = None,
        backup_policy: RetryPolicy | None = None,
        clock: Clock | None = None,
        rng: random.Random | None = None,
    ) -> None:
        if not callable(primary) or (backup is not None and not callable(backup)):
            raise TypeError("ResilientClient needs a callable primary (and backup)")
        self.primary = primary
        self.backup = backup
        self.policy = policy if policy is not None else RetryPolicy()
        self.breaker = breaker
        self.backup_policy = backup_policy if backup_policy is not None else RetryPolicy(1)
        self.clock = clock
        self.rng = rng
        self.requests = self.primary_ok = self.backup_ok = self.failed = 0
        self._lock = threading.Lock()
        self._pass_timeout = accepts_timeout(primary)

    def _attempt(self, *args: Any, timeout: float | None = None, **kwargs: Any) -> T:
        if timeout is not None and self._pass_timeout:
            kwargs["timeout"] = timeout
        if self.breaker is None:
            return self.primary(*args, **kwargs)
        return self.breaker.call(self.primary, *args, **kwargs)

    async def _aattempt(self, *args: Any, timeout: float | None = None, **kwargs: Any) -> Any:
        if timeout is not None and self._pass_timeout:
            kwargs["timeout"] = timeout
        if self.breaker is None:
            return await self.primary(*args, **kwargs)  # type: ignore[misc]
        return await self.breaker.acall(self.primary, *args, **kwargs)  # type: ignore[arg-type]

    def _count(self, field: str) -> None:
        with self._lock:
            setattr(self, field, getattr(self, field) + 1)

    def _flow(self) -> Generator[str, Any, Any]:
        """Ask for the primary (``_PRIMARY``), then, if it failed, the backup (``_BACKUP``).

        Each answer is sent back, each error thrown in; the counts and notes live here once.
        """
        self._count("requests")
        try:
            out = yield _PRIMARY
        except Exception as exc:
            if self.backup is None:
                self._count("failed")
                raise
            first = exc
        else:
            self._count("primary_ok")
            return out
        try:
            out = yield _BACKUP
        except Exception as exc:
            self._count("failed")
            exc.add_note(
                f"surefoot.fallback: the primary failed first: {type(first).__name__}: {first}"
            )
            raise
        self._count("backup_ok")
        return out

    # -- drivers: the same lines, with and without await -------------------------------

    def call(self, *args: Any, **kwargs: Any) -> T:
        """Make one logical request; returns the primary's or the backup's answer."""
        flow = self._flow()
        try:
            req = next(flow)
            while True:
                fn: Callable[..., Any] = self._attempt
                policy = self.policy
                if req is _BACKUP:
                    assert self.backup is not None  # the flow asks for it only if there is one
                    fn, policy = self.backup, self.backup_policy
                try:
                    got = retry_call(
                        fn, *args, policy=policy, clock=self.clock, rng=self.rng, **kwargs
                    )
                except Exception as exc:
                    req = flow.throw(exc)
                    continue
                req = flow.send(got)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    async def acall(self, *args: Any, **kwargs: Any) -> Any:
        """The async twin of :meth:`call` (primary and backup are async functions)."""
        flow = self._flow()
        try:
            req = next(flow)
            while True:
                fn: Callable[..., Any] = self._aattempt
                policy = self.policy
                if req is _BACKUP:
                    assert self.backup is not None  # the flow asks for it only if there is one
                    fn, policy = self.backup, self.backup_policy
                try:
                    got = await aretry_call(
                        fn, *args, policy=policy, clock=self.clock, rng=self.rng, **kwargs
                    )
                except Exception as exc:
                    req = flow.throw(exc)
                    continue
                req = flow.send(got)
        except StopIteration as done:
            return done.value

    __call__ = call
