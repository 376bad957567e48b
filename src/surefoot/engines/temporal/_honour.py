"""What an app asks for that Temporal cannot honour: refused with a clear error, not ignored.

Standard library only (checked before the SDK is imported or the cluster reached).
"""

from __future__ import annotations

from typing import Any

from ...clock import Clock, SystemClock
from ...errors import ConfigError

__all__ = ["WrappedClock", "refuse_unhonoured"]


class WrappedClock:
    """A clock that wraps the app's own (the worker's workflow-time clock does)."""

    inner: Clock


def refuse_unhonoured(app: Any) -> None:
    """Refuse an app whose recovery strategy, crash plan or clock Temporal would ignore.

    Raises:
        ConfigError: ``strategy`` other than ``journal_keys``; a ``CrashPlan`` (``crash=``
            or ``SUREFOOT_CRASH``); a clock other than the system's (a ``FakeClock``).
    """
    strategy = getattr(app, "strategy", "journal_keys")
    if strategy != "journal_keys":
        raise ConfigError(
            f"App(strategy={strategy!r}) is not supported on Temporal: it replays a run from "
            "its own history, as strategy 'journal_keys' does (completed steps never run "
            "again, keys stay the same); drop strategy= or run on sqlite:// or postgresql://"
        )
    if getattr(app, "crash", None) is not None:
        raise ConfigError(
            "App(crash=CrashPlan(...)) (or SUREFOOT_CRASH) has no crash points on Temporal: "
            "steps run as activities in worker processes; crash-test by killing a "
            "`surefoot engine worker` process instead, and drop crash= / unset SUREFOOT_CRASH"
        )
    clock = getattr(app, "clock", None)
    while isinstance(clock, WrappedClock):
        clock = clock.inner
    if clock is not None and not isinstance(clock, SystemClock):
        raise ConfigError(
            f"App(clock={type(clock).__name__}(...)) cannot drive Temporal: its timers run on "
            "the cluster's workflow time, so an advanced FakeClock would end a sleep in "
            "TimeoutError_ instead; drop clock= for a temporal:// app (test timers with a "
            "FakeClock on sqlite://)"
        )
