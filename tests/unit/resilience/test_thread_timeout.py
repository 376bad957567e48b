"""timeout_mode="thread": an overrunning sync attempt releases the caller; its result is dropped."""

from __future__ import annotations

import threading

import pytest

from surefoot import FakeClock
from surefoot.errors import TimeoutError_
from surefoot.resilience import RetryPolicy, attempts_of, retry, retry_call

# the attempt's limit in real seconds; the tests never depend on how long anything took:
# a blocked call waits on an event the test sets only after the caller was released
LIMIT = 0.05


class Blocking:
    """A sync callable whose first ``blocked`` calls wait for ``release``; counts outcomes."""

    def __init__(self, blocked: int = 1) -> None:
        self.blocked = blocked
        self.release = threading.Event()
        self.started = 0
        self.finished = 0
        self.lock = threading.Lock()
        self.done = threading.Event()

    def __call__(self) -> str:
        with self.lock:
            self.started += 1
            n = self.started
        if n <= self.blocked:
            self.release.wait(30)
        with self.lock:
            self.finished += 1
        self.done.set()
        return f"reply {n}"


def test_the_caller_gets_timeout_and_the_call_runs_on() -> None:
    """At the limit the caller gets TimeoutError_; the call finishes later; nothing is returned."""
    call = Blocking()
    policy = RetryPolicy(max_attempts=1, timeout_per_attempt=LIMIT, timeout_mode="thread")
    with pytest.raises(TimeoutError_, match="thread was left running") as info:
        retry_call(call, policy=policy)
    assert info.value.timeout == LIMIT
    assert (call.started, call.finished) == (1, 0)  # released while the call still runs
    call.release.set()
    assert call.done.wait(30)
    assert (call.started, call.finished) == (1, 1)  # not killed; its reply went nowhere


def test_a_timed_out_attempt_is_retried() -> None:
    """The default classifier retries the thread timeout; the second attempt's reply is returned."""
    call = Blocking(blocked=1)
    policy = RetryPolicy(max_attempts=3, timeout_per_attempt=LIMIT, timeout_mode="thread")
    try:
        assert retry_call(call, policy=policy, clock=FakeClock()) == "reply 2"
        assert call.started == 2
    finally:
        call.release.set()


def test_errors_and_results_cross_the_thread_unchanged() -> None:
    """A quick call's result and a quick call's error reach the caller as themselves."""
    policy = RetryPolicy(max_attempts=2, timeout_per_attempt=5, timeout_mode="thread")
    seen: list[str] = []

    @retry(policy, clock=FakeClock())
    def bad() -> None:
        seen.append(threading.current_thread().name)
        raise KeyError("nope")

    with pytest.raises(KeyError, match="nope") as info:
        bad()
    assert len(attempts_of(info.value)) == 1  # not retryable: one attempt
    assert seen[0].startswith("surefoot-attempt:") and seen[0] != threading.main_thread().name
    assert retry_call(lambda: 42, policy=policy) == 42


def test_auto_mode_runs_the_call_in_the_callers_thread() -> None:
    """The default mode never starts a thread: the call runs where the caller is."""
    names: list[str] = []
    policy = RetryPolicy(timeout_per_attempt=5)
    retry_call(lambda: names.append(threading.current_thread().name), policy=policy)
    assert names == [threading.current_thread().name]
