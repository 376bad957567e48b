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
from ..clock import Clock, server_clock_for
from ..errors import ConfigError, IdempotencyConflictError, IdempotencyInProgressError
from ..storage.keys import KeyRecord, KeyStore
from ._checks import duration

__all__ = ["IdempotentExecutor", "fingerprint"]

T = TypeVar("T")
_SLEEP, _CALL = "sleep", "call"  # what the flow asks its driver to do


_ACTION = ";action="  # between the arguments' hash and the action's name in a stored record


def action_name(action: Callable[..., Any]) -> str:
    """The name a key is bound to: ``module.qualname`` of the function (a ``partial``'s or a
    bound method's function; a callable object's class)."""
    while isinstance(action, functools.partial):
        action = action.func
    target = getattr(action, "__func__", action)
    qual = getattr(target, "__qualname__", None)
    if not isinstance(qual, str):
        target = type(action)
        qual = target.__qualname__
    module = getattr(target, "__module__", None)
    return f"{module}.{qual}" if module else qual


def fingerprint(
    action: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    include_action: bool = False,
) -> str:
    """A stable hash of the request's arguments (codec JSON, sha256).

    ``IdempotentExecutor`` stores it with the action's name beside it (see
    :func:`action_name`). With ``include_action`` the action's qualified name is hashed
    in (what surefoot 0.x stored: such records are still recognised).
    """
    if include_action:
        name = getattr(action, "__qualname__", None) or type(action).__qualname__
        text = codec.dumps([name, list(args), kwargs], where="idempotency arguments")
    else:
        text = codec.dumps([list(args), kwargs], where="idempotency arguments")
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _stored(action: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """What a record holds: the arguments' hash and the action's name (readable, for errors)."""
    return fingerprint(action, args, kwargs) + _ACTION + action_name(action)


_Same = Callable[[str, str], "str | None"]  # (key, stored fingerprint) -> None, or why not


class _Judge:
    """Whether a stored fingerprint is this request's, and if not, what to tell the caller."""

    def __init__(
        self,
        bind: bool,
        action: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        args_fp: str,
    ) -> None:
        self.bind, self.name, self.args_fp = bind, action_name(action), args_fp
        self._legacy = functools.partial(fingerprint, action, args, kwargs, include_action=True)

    def __call__(self, key: str, stored: str) -> str | None:
        args_fp, sep, first = stored.partition(_ACTION)
        if not sep:  # written by an earlier version: the arguments' hash, or 0.x's name+args
            if stored == self.args_fp or stored == self._legacy():
                return None
            return (
                f"idempotency key {key!r} was already used with different arguments (or a "
                "different action); a retry must send the same arguments, a new request "
                "needs a new key"
            )
        if args_fp != self.args_fp:
            return (
                f"idempotency key {key!r} was already used by {first!r} with different "
                "arguments; a retry must send the same arguments, a new request needs a new key"
            )
        if self.bind and first != self.name:
            return (
                f"idempotency key {key!r} belongs to {first!r}, not {self.name!r}: a key is "
                f"bound to one action (as a Stripe key is to one endpoint), so {self.name!r} "
                f"neither runs nor gets {first!r}'s result. Use a new key for this request; "
                f"if {self.name!r} is {first!r} renamed or moved by a deploy, use "
                "IdempotentExecutor(include_action=False)"
            )
        return None


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

    - A key belongs to one action, as a Stripe key belongs to one endpoint: reused with
      different arguments, or by another action (a refund sent with a charge's key), it
      raises ``IdempotencyConflictError`` naming the key and both actions; the other
      action neither runs nor gets the first one's result, even once the key is abandoned.
      The record holds a hash of the arguments and the action's ``module.qualname``. A
      deploy that renames or moves an action passes ``include_action=False``: the
      arguments alone decide. Records written by earlier versions (a hash of the
      arguments only, or of the name and arguments) are honoured when this call's
      arguments (and name) give their hash, so an upgrade turns no in-flight key into a
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
        include_action: bind a key to its action as well as its arguments (default
            True); False lets a renamed or moved action keep its keys.
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
        include_action: bool = True,
    ) -> None:
        self._storage: Any = None
        source: Any = store  # what may offer the server's clock (server_clock_for)
        if isinstance(store, str):
            from .. import storage

            self._storage = source = storage.open(store)
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
        # On PostgreSQL the lease is judged on the database's clock (a real clock only).
        self.clock: Clock = server_clock_for(clock, source)
        self.namespace = namespace
        if not isinstance(include_action, bool):
            raise ConfigError(f"include_action must be True or False, got {include_action!r}")
        self.include_action = include_action
        self._custom = fingerprint_fn is not None
        self.fingerprint: Callable[[Callable[..., Any], tuple[Any, ...], dict[str, Any]], str] = (
            fingerprint_fn if fingerprint_fn is not None else _stored
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

    def _begin(self, key: str, fp: str, same: _Same | None) -> tuple[bool, KeyRecord]:
        """Claim ``key``; a record of this same request in another form (an older version's,
        or this request through another name under ``include_action=False``) is claimed as
        it is stored, so an abandoned one is taken over."""
        claimed, rec = self._claim(key, fp)
        if claimed or rec.fingerprint == fp or same is None:
            return claimed, rec
        if same(key, rec.fingerprint) is not None:
            return claimed, rec
        return self._claim(key, rec.fingerprint)  # takes it over when abandoned

    def _existing(self, key: str, fp: str, rec: KeyRecord, same: _Same | None) -> tuple[bool, Any]:
        """(True, result) for a saved result; (False, None) to keep waiting. Raises on conflict."""
        if rec.fingerprint != fp:
            why = (
                f"idempotency key {key!r} was already used with a different request (by "
                "fingerprint_fn); a retry must send the same request, a new request needs a "
                "new key"
                if same is None
                else same(key, rec.fingerprint)
            )
            if why is not None:
                raise IdempotencyConflictError(key, why)
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
    ) -> tuple[str, _Same | None]:
        """What this request stores, and the judge of another stored fingerprint: None when
        it is this request's, else the reason it conflicts (built-ins only)."""
        if self._custom:
            return self.fingerprint(action, args, kwargs), None
        args_fp = fingerprint(action, args, kwargs)
        judge = _Judge(self.include_action, action, args, kwargs, args_fp)
        return args_fp + _ACTION + judge.name, judge

    def _flow(self, key: str, fp: str, same: _Same | None) -> Generator[str, Any, Any]:
        """Claim ``key``, or wait for (or return) its saved result, then run and save.

        The store's calls are the same in both drivers; the flow yields only what differs:
        ``_SLEEP`` (wait ``poll`` seconds) and ``_CALL`` (run the action; the answer is its
        result, or its error thrown in here).
        """
        waited = 0.0
        while True:
            claimed, rec = self._begin(key, fp, same)
            if claimed:
                break
            done, value = self._existing(key, fp, rec, same)
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
