"""Time as a parameter: the ``Clock`` protocol, the real ``SystemClock`` and ``FakeClock``.

Everything in surefoot that waits or reads time takes a ``Clock``. ``FakeClock`` moves time
forward instantly and records every sleep, so tests (yours too) run in microseconds and can
assert the exact waits: ``assert clock.sleeps == [0.5, 1.0, 2.0]``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import timedelta
from typing import Protocol, runtime_checkable

from .errors import ConfigError

__all__ = ["Clock", "FakeClock", "SystemClock", "default_clock", "seconds", "swap_default_clock"]


def seconds(value: float | timedelta, name: str = "duration") -> float:
    """Return ``value`` as float seconds; accepts a number or a ``timedelta``.

    Raises:
        ConfigError: if the value is negative or not a number.
    """
    if isinstance(value, timedelta):
        out = value.total_seconds()
    elif isinstance(value, int | float) and not isinstance(value, bool):
        out = float(value)
    else:
        raise ConfigError(f"{name} must be seconds (a number) or a timedelta, got {value!r}")
    if out < 0 or out != out:
        raise ConfigError(f"{name} must be >= 0 seconds, got {value!r}")
    return out


@runtime_checkable
class Clock(Protocol):
    """Reads time and waits. ``now()`` is seconds since the epoch (wall time)."""

    def now(self) -> float: ...
    def monotonic(self) -> float: ...
    def sleep(self, seconds: float) -> None: ...
    async def asleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real clock: ``time.time``, ``time.monotonic``, ``time.sleep``, ``asyncio.sleep``."""

    __slots__ = ()

    # The functions themselves, not methods calling them: a journalled step reads the
    # clock twice, and a C call costs less than a Python frame around it.
    now = staticmethod(time.time)
    monotonic = staticmethod(time.monotonic)

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    async def asleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds if seconds > 0 else 0)

    def __repr__(self) -> str:
        return "SystemClock()"


class FakeClock:
    """Virtual time that advances instantly and records every requested sleep.

    ``now()`` starts at ``start`` (default 1,700,000,000, a plausible epoch time) and
    ``monotonic()`` moves with it. ``sleep``/``asleep`` add to ``sleeps`` and advance the
    clock; ``advance`` moves time without recording a sleep (time spent working).
    Thread-safe.

    Args:
        start: the initial value of ``now()``.
    """

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = float(start)
        self._start = float(start)
        self._lock = threading.Lock()
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self._now

    def monotonic(self) -> float:
        return self._now - self._start

    @property
    def elapsed(self) -> float:
        """Seconds of virtual time since the clock was made."""
        return self._now - self._start

    def advance(self, seconds: float | timedelta) -> None:
        """Move time forward without recording a sleep."""
        s = globals()["seconds"](seconds, "advance")
        with self._lock:
            self._now += s

    def sleep(self, seconds: float) -> None:
        if seconds < 0:
            raise ConfigError(f"cannot sleep a negative time, got {seconds!r}")
        with self._lock:
            self.sleeps.append(seconds)
            self._now += seconds

    async def asleep(self, seconds: float) -> None:
        self.sleep(seconds)
        await asyncio.sleep(0)  # still yield to the loop, like a real sleep would

    def __repr__(self) -> str:
        return f"FakeClock(now={self._now!r}, sleeps={len(self.sleeps)})"


_DEFAULT: list[Clock] = []  # the process-wide default: empty means a SystemClock


def default_clock() -> Clock:
    """The clock retry drivers use when given none (a ``SystemClock`` unless swapped)."""
    if not _DEFAULT:
        _DEFAULT.append(SystemClock())
    return _DEFAULT[0]


def swap_default_clock(clock: Clock | None) -> Clock:
    """Make ``clock`` the process-wide default (None: the system clock); return the previous.

    ``surefoot.testing.instant_retries`` uses it so retries made without a clock do not wait.
    """
    old = default_clock()
    _DEFAULT[0] = clock if clock is not None else SystemClock()
    return old
