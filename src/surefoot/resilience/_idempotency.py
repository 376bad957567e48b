"""Run an action once per idempotency key, across threads, processes and restarts."""

from __future__ import annotations

import functools
import hashlib
import os
import threading
import uuid
from collections.abc import Awaitable, Callable, Generator
from datetime import timedelta
from typing import Any, TypeVar

from .. import codec
from ..clock import Clock, SystemClock
from ..errors import ConfigError, IdempotencyConflictError, IdempotencyInProgressError
from ..storage.keys import KeyRecord, KeyStore
from ._checks import duration

__all__ = ["IdempotentExecutor", "fingerprint"]

T = TypeVar("T")
_SLEEP, _CALL = "sleep", "call"  # what the flow asks its driver to do


def fingerprint(
    action: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    include_action: bool = False,
) -> str:
    """A stable hash of the request: its arguments (codec JSON, sha256).

    As Stripe does, the request is what a key binds, so renaming or moving the action
    between deploys does not turn retries of in-flight keys into conflicts. With
    ``include_action`` the action's qualified name is hashed too (what surefoot 0.x did
    for every key: such records are still recognised, see ``IdempotentExecutor``).
    """
    if include_action:
        name = getattr(action, "__qualname__", None) or type(action).__qualname__
        text = codec.dumps([name, list(args), kwargs], where="idempotency arguments")
    else:
        text = codec.dumps([list(args), kwargs], where="idempotency arguments")
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _finite(value: Any, name: str, *, positive: bool = False) -> float:
    out = duration(value, name, positive=positive)
    assert out is not None  # duration() refuses None unless told what it means
    return out


class IdempotentExecutor:
    """Runs ``action(*args)`` once per key and returns the saved result afterwards.

    The record lives in a ``KeyStore`` (``memory://``, ``sqlite:///…``), so a second executor
    on the same database, in another process or after a restart, returns the saved result
    without running the action. The claim is one insert-if-absent statement, so two processes
    racing on one key run the action once.

    - A key reused with different arguments raises ``IdempotencyConflictError`` (a
      fingerprint of the arguments is stored; of the action's name too with
      ``include_action=True``). Renaming or moving the action keeps its keys valid. A
      record written with the other setting (or by an older surefoot, whose fingerprints
      always included the name) is honoured when this call's arguments (and name) give its
      fingerprint, so an upgrade or a change of setting turns no in-flight key into a
      conflict.
    - A key whose action is still running elsewhere raises ``IdempotencyInProgressError``,
      or, with ``wait=True``, waits for its result up to ``wait_timeout``.
    - If the action raises (or is cancelled), the record is deleted and the error re-raised
      unchanged: the next call with that key runs the action again (a failure is not a
      result). If the store cannot delete it, the error still propagates (with a note) and
      the key stays claimed until its ``lease`` ends.
    - A done record expires after ``ttl`` (None: never); a running record whose owner died is
      taken over after ``lease`` seconds, so the action may then run a second time: give it
      a downstream idempotency key (``f"{key}:…"``) if that matters.

    Args:
        store: a ``KeyStore``, an opened ``Storage``, or a storage URL.
        ttl: seconds a result is kept (None: forever). lease: seconds a running claim
            is honoured (finite: a dead owner's claim must end).
        wait: wait for an in-flight action instead of raising.
        wait_timeout: how long to wait (finite). poll: seconds between looks while
            waiting (finite, > 0).
        clock: time source. namespace: prefixed to every key.
        include_action: bind a key to the action's qualified name as well as its
            arguments (default False: the arguments only).
        fingerprint_fn: a custom fingerprint of ``(action, args, kwargs)``; it replaces
            the built-in ones (and ``include_action``), with no fallback.

    Raises:
        ConfigError: a store that is not one; a duration that is negative, NaN or infinite
            (``ttl=None`` is the one way to say "no limit").

    Attributes:
        runs: actions executed by this executor. replays: saved results returned.
    """

    def __init__(
        self,
        store: KeyStore | Any | str,
        *,
        ttl: float | timedelta | None = None,
        lease: float | timedelta = 300.0,
        wait: bool = False,
        wait_timeout: float | timedelta = 30.0,
        poll: float | timedelta = 0.05,
        clock: Clock | None = None,
        namespace: str = "",
        fingerprint_fn: Callable[[Callable[..., Any], tuple[Any, ...], dict[str, Any]], str]
        | None = None,
        include_action: bool = False,
    ) -> None:
        self._storage: Any = None
        if isinstance(store, str):
            from .. import storage

            self._storage = storage.open(store)
            store = self._storage.keystore()
        elif not isinstance(store, KeyStore) and hasattr(store, "keystore"):
            store = store.keystore()
        if not isinstance(store, KeyStore):
            raise ConfigError(
                f"IdempotentExecutor needs a KeyStore, a Storage or a URL like "
                f"'sqlite:///keys.db', got {store!r}"
            )
        self.store: KeyStore = store
        self.ttl = duration(ttl, "ttl", none_means="results kept forever")
        self.lease = _finite(lease, "lease", positive=True)
        self.wait = wait
        self.wait_timeout = _finite(wait_timeout, "wait_timeout")
        self.poll = _finite(poll, "poll", positive=True)
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.namespace = namespace
        if not isinstance(include_action, bool):
            raise ConfigError(f"include_action must be True or False, got {include_action!r}")
        self.include_action = include_action
        self._custom = fingerprint_fn is not None
        self.fingerprint: Callable[[Callable[..., Any], tuple[Any, ...], dict[str, Any]], str] = (
            fingerprint_fn
            if fingerprint_fn is not None
            else functools.partial(fingerprint, include_action=include_action)
        )
        self.owner = f"{os.getpid()}:{uuid.uuid4().hex[:12]}"
        self.runs = 0
        self.replays = 0
        self._lock = threading.Lock()

    def close(self) -> None:
        """Close the storage this executor opened from a URL (if any)."""
        if self._storage is not None:
            self._storage.close()

    # -- the shared decision -----------------------------------------------------------

    def _claim(self, key: str, fp: str) -> tuple[bool, KeyRecord]:
        if not isinstance(key, str) or not key:
            raise ConfigError(f"an idempotency key must be a non-empty string, got {key!r}")
        now = self.clock.now()
        return self.store.claim(self.namespace + key, fp, self.owner, now, now + self.lease)

    def _begin(self, key: str, fp: str, other: Callable[[], str] | None) -> tuple[bool, KeyRecord]:
        """Claim ``key``; a record holding this request's other fingerprint (``other()``:
        with or without the action's name) is this request's record, claimed as it is."""
        claimed, rec = self._claim(key, fp)
        if claimed or rec.fingerprint == fp or other is None or rec.fingerprint != other():
            return claimed, rec
        return self._claim(key, rec.fingerprint)  # takes it over when abandoned

    def _existing(self, key: str, fp: str, rec: KeyRecord, other: str | None) -> tuple[bool, Any]:
        """(True, result) for a saved result; (False, None) to keep waiting. Raises on conflict."""
        if rec.fingerprint != fp and rec.fingerprint != other:
            raise IdempotencyConflictError(
                key,
                f"idempotency key {key!r} was already used with different arguments (or a "
                "different action); a retry must send the same arguments, a new request "
                "needs a new key",
            )
        if rec.state == "done" and rec.result is not None:
            with self._lock:
                self.replays += 1
            return True, codec.loads(rec.result)
        if not self.wait:
            raise IdempotencyInProgressError(
                key,
                f"the action for idempotency key {key!r} is running in {rec.owner!r} (since "
                f"{rec.created_at:.3f}); retry later, or pass wait=True to wait for its result",
            )
        return False, None

    def _finish(self, key: str, result: Any) -> Any:
        """Save ``result`` as the key's answer and return the key's answer.

        If this executor's claim was taken over meanwhile (its action outlived the lease:
        the process was paused, or its clock is behind), its completion is refused and the
        key keeps the answer of the holder that completed: that one is returned, so every
        caller of a key gets one answer. While the new holder is still running,
        ``IdempotencyInProgressError`` says so.
        """
        try:
            text = codec.dumps(result, where=f"the result for idempotency key {key!r}")
        except BaseException:
            self.store.release(self.namespace + key, self.owner)  # let a fixed caller retry
            raise
        expires = None if self.ttl is None else self.clock.now() + self.ttl
        if self.store.complete(self.namespace + key, self.owner, text, expires):
            return result
        rec = self.store.get(self.namespace + key)
        if rec is not None and rec.state == "done" and rec.result is not None:
            with self._lock:
                self.replays += 1
            return codec.loads(rec.result)
        raise IdempotencyInProgressError(
            key,
            f"the claim on idempotency key {key!r} was taken over while its action ran (it "
            f"outlived the {self.lease:g} s lease), so its result was not saved; the key's "
            "action is running elsewhere: retry later for the key's one answer",
        )

    def _release_after(self, key: str, error: BaseException) -> None:
        """Release ``key`` after its action raised ``error``, never hiding that error.

        If the store cannot release it (the database is down), the action's error is still
        the one raised, with a note: the key then stays claimed until its lease ends.
        """
        try:
            self.store.release(self.namespace + key, self.owner)
        except Exception as exc:
            error.add_note(
                f"surefoot: could not release idempotency key {key!r} after this error "
                f"({type(exc).__name__}: {exc}); it stays claimed for up to {self.lease:g} s "
                "(the lease), then a retry can run the action"
            )

    def _timeout(self, key: str) -> IdempotencyInProgressError:
        return IdempotencyInProgressError(
            key,
            f"the action for idempotency key {key!r} was still running after waiting "
            f"{self.wait_timeout:g} s; retry later",
        )

    def _fingerprints(
        self, action: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[str, Callable[[], str] | None]:
        """This request's fingerprint, and how to compute its other one (built-ins only)."""
        fp = self.fingerprint(action, args, kwargs)
        if self._custom:
            return fp, None
        flip = not self.include_action
        return fp, lambda: fingerprint(action, args, kwargs, include_action=flip)

    def _flow(self, key: str, fp: str, other: Callable[[], str] | None) -> Generator[str, Any, Any]:
        """Claim ``key``, or wait for (or return) its saved result, then run and save.

        The store's calls are the same in both drivers; the flow yields only what differs:
        ``_SLEEP`` (wait ``poll`` seconds) and ``_CALL`` (run the action; the answer is its
        result, or its error thrown in here).
        """
        waited = 0.0
        while True:
            claimed, rec = self._begin(key, fp, other)
            if claimed:
                break
            alt = None if other is None or rec.fingerprint == fp else other()
            done, value = self._existing(key, fp, rec, alt)
            if done:
                return value
            if waited >= self.wait_timeout:
                raise self._timeout(key)
            yield _SLEEP
            waited += self.poll
        with self._lock:
            self.runs += 1
        try:
            result = yield _CALL
        except BaseException as exc:
            self._release_after(key, exc)
            raise
        return self._finish(key, result)

    # -- drivers: the same lines, with and without await -------------------------------

    def run(self, key: str, action: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``action(*args, **kwargs)`` once for ``key``; afterwards return its saved result.

        Raises:
            IdempotencyConflictError: the key was used with different arguments.
            IdempotencyInProgressError: the key's action is running elsewhere.
            EncodeError: the arguments or the result cannot be stored as JSON.
            Whatever ``action`` raised (the key is released).
        """
        if not callable(action):
            raise TypeError(f"run() needs an action to call, got {action!r}")
        flow = self._flow(key, *self._fingerprints(action, args, kwargs))
        try:
            req = next(flow)
            while True:
                if req is _SLEEP:
                    self.clock.sleep(self.poll)
                    req = flow.send(None)
                    continue
                try:
                    got = action(*args, **kwargs)
                except BaseException as exc:
                    req = flow.throw(exc)
                    continue
                req = flow.send(got)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    async def arun(
        self, key: str, action: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any
    ) -> T:
        """Await ``action(*args, **kwargs)`` once for ``key`` (the async twin of :meth:`run`)."""
        flow = self._flow(key, *self._fingerprints(action, args, kwargs))
        try:
            req = next(flow)
            while True:
                if req is _SLEEP:
                    await self.clock.asleep(self.poll)
                    req = flow.send(None)
                    continue
                try:
                    got = await action(*args, **kwargs)
                except BaseException as exc:
                    req = flow.throw(exc)
                    continue
                req = flow.send(got)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    def forget(self, key: str) -> bool:
        """Delete the record of ``key`` (the next call runs the action again)."""
        return self.store.delete(self.namespace + key)

    def purge(self) -> int:
        """Delete expired records; returns how many."""
        return self.store.purge(self.clock.now())
