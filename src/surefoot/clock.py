"""Time as a parameter: the ``Clock`` protocol, the real ``SystemClock``, ``FakeClock`` and
``ServerClock``.

Everything in surefoot that waits or reads time takes a ``Clock``. ``FakeClock`` moves time
forward instantly and records every sleep, so tests (yours too) run in microseconds and can
assert the exact waits: ``assert clock.sleeps == [0.5, 1.0, 2.0]``. ``ServerClock`` reads
wall time from a shared server (PostgreSQL's or Redis's clock), so leases written by
processes on different machines, or with skewed clocks, are judged on one clock.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Protocol, runtime_checkable

from .errors import ConfigError

__all__ = [
    "Clock",
    "FakeClock",
    "ServerClock",
    "SystemClock",
    "default_clock",
    "seconds",
    "server_clock_for",
    "swap_default_clock",
]


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


class ServerClock:
    """Wall time by a server's clock (the database's), carried between reads by this
    process's monotonic clock: ``now()`` = the server's time at the last read + monotonic
    seconds since.

    Leases (durable runs, idempotency keys, Store locks) are written and judged with
    ``now()``: every process sharing the server then compares one clock, so a process whose
    wall clock runs ahead (or behind, or is stepped) neither sees a live lease as expired
    nor holds one longer. Reading costs one round trip, at the first ``now()`` and then at
    most every ``resync`` seconds, never per claim or renewal. Its error is half the read's
    round trip plus the monotonic clock's drift since the read (parts per million). A
    failed read keeps the last reading and is tried again after one second; before the
    first reading, this process's wall clock stands in and every call tries again. Sleeps
    are real.

    Args:
        read: returns the server's wall time in seconds since the epoch (one query).
        resync: seconds between reads.
    """

    def __init__(self, read: Callable[[], float], *, resync: float = 30.0) -> None:
        self._read = read
        self.resync = seconds(resync, "resync")
        self._lock = threading.Lock()
        self._base: float | None = None  # the server's time at _at
        self._at = 0.0  # monotonic time of the reading
        self._tried = -1e18  # monotonic time of the last attempt
        self.reads = 0  # readings taken (tests count them)

    def now(self) -> float:
        m = time.monotonic()
        if self._base is None or m - self._tried >= self.resync:
            self._sync()
            m = time.monotonic()
        base = self._base
        if base is None:
            return time.time()  # the server never answered: nothing better
        return base + (m - self._at)

    def _sync(self) -> None:
        with self._lock:
            m0 = time.monotonic()
            if self._base is not None and m0 - self._tried < self.resync:
                return  # another thread read it meanwhile
            self._tried = m0
            try:
                server = float(self._read())
            except Exception:  # the server is down: claims fail anyway; keep the last reading
                self._tried = m0 - self.resync + 1.0  # and try again in one second
                return
            m1 = time.monotonic()
            self._base, self._at = server + (m1 - m0) / 2, m1
            self._tried = m1
            self.reads += 1

    monotonic = staticmethod(time.monotonic)

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    async def asleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds if seconds > 0 else 0)

    def __repr__(self) -> str:
        return f"ServerClock(resync={self.resync:g}, reads={self.reads})"


def server_clock_for(clock: Clock | None, storage: object) -> Clock:
    """The clock leases on ``storage`` should use: the storage's server clock (PostgreSQL,
    Redis) when ``clock`` is the real one (None or a plain ``SystemClock``), else ``clock``
    itself (a ``FakeClock`` keeps driving time in tests, a ``SystemClock`` subclass is
    kept; SQLite and memory storages have no server: every process there shares the
    machine's clock)."""
    if clock is not None and type(clock) is not SystemClock:
        return clock  # a subclass (a shifted clock, say) is a choice: kept
    make = getattr(storage, "server_clock", None)
    server = make() if callable(make) else None
    return server if server is not None else (clock or SystemClock())


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
