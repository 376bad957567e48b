"""The pure back-off schedule: exponential waits with a cap, and four kinds of jitter.

Core (standard library only): ``surefoot.resilience.Backoff`` builds on it for retries, and
the PostgreSQL and Redis clients use it between reconnect attempts. It decides how long to
wait; it never sleeps (the caller sleeps on its ``Clock``).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from datetime import timedelta

from .clock import seconds
from .errors import ConfigError

__all__ = ["JITTERS", "RECONNECT", "Schedule"]

JITTERS = ("none", "full", "equal", "decorrelated")


@dataclass(frozen=True, slots=True)
class Schedule:
    """Waits that grow exponentially up to a cap, optionally jittered.

    The wait after the n-th failed attempt (n = 1, 2, …), before attempt n + 1, is
    ``v = min(cap, base * multiplier ** (n - 1))`` and then, by ``jitter``:

    ``none``          v
    ``full``          uniform(0, v)                      (AWS "full jitter", the default)
    ``equal``         v / 2 + uniform(0, v / 2)
    ``decorrelated``  min(cap, uniform(base, 3 * previous wait)), first previous = base

    The cap is applied first and the jitter drawn inside it, so the jitter never disappears
    at the cap and waits never pile up on the cap. With base 0.5 s, cap 8 s and no jitter the
    waits before attempts 2..7 are 0.5, 1, 2, 4, 8, 8.

    Args:
        base: the first wait, seconds (or a ``timedelta``), >= 0.
        cap: the longest wait, >= base.
        jitter: ``"none" | "full" | "equal" | "decorrelated"``.
        multiplier: growth per attempt, >= 1.

    Raises:
        ConfigError: a negative base, a cap below the base, an unknown jitter, or a base,
            cap or multiplier that is not a finite number (an infinite cap cannot mean "no
            cap": the waits would outgrow what a clock can sleep).
    """

    base: float = 0.5
    cap: float = 8.0
    jitter: str = "full"
    multiplier: float = 2.0
    _table: tuple[float, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        base = seconds(self.base, "base") if isinstance(self.base, timedelta) else self.base
        cap = seconds(self.cap, "cap") if isinstance(self.cap, timedelta) else self.cap
        _finite(base, "base", "seconds")
        _finite(cap, "cap", "seconds")
        _finite(self.multiplier, "multiplier", "a growth factor")
        if not base >= 0:
            raise ConfigError(f"backoff base must be >= 0 seconds, got base={self.base!r}")
        if not cap >= base:
            raise ConfigError(
                f"backoff cap must be >= base, got cap={self.cap!r} and base={self.base!r}. "
                "Raise cap or lower base."
            )
        if self.jitter not in JITTERS:
            raise ConfigError(f"unknown jitter {self.jitter!r}; use one of {', '.join(JITTERS)}")
        if not self.multiplier >= 1:
            raise ConfigError(f"backoff multiplier must be >= 1, got {self.multiplier!r}")
        object.__setattr__(self, "base", float(base))
        object.__setattr__(self, "cap", float(cap))
        table = []
        v = float(base)
        for _ in range(64):
            table.append(min(float(cap), v))
            v *= self.multiplier
        object.__setattr__(self, "_table", tuple(table))

    def ceiling(self, n: int) -> float:
        """The un-jittered wait after failed attempt ``n`` (1-based)."""
        if n < 1:
            raise ConfigError(f"attempt numbers start at 1, got {n!r}")
        t = self._table
        return t[n - 1] if n <= len(t) else t[-1]

    def wait(
        self, n: int, rng: random.Random | None = None, previous: float | None = None
    ) -> float:
        """The wait after failed attempt ``n`` (1-based).

        Args:
            n: the number of the attempt that just failed.
            rng: the randomness for jitter (a fresh ``random.Random()`` when None).
            previous: the previous wait, for ``decorrelated`` jitter.
        """
        j = self.jitter
        if j == "none":
            t = self._table
            return t[n - 1] if 0 < n <= len(t) else self.ceiling(n)
        r = rng if rng is not None else random.Random()
        if j == "full":
            return r.uniform(0.0, self.ceiling(n))
        if j == "equal":
            v = self.ceiling(n)
            return v / 2 + r.uniform(0.0, v / 2)
        prev = self.base if previous is None or n == 1 else previous
        return min(self.cap, r.uniform(self.base, max(self.base, 3 * prev)))

    def waits(self, n: int, rng: random.Random | None = None) -> list[float]:
        """The first ``n`` waits: before attempts 2 .. n + 1."""
        if n < 0:
            raise ConfigError(f"waits(n) needs n >= 0, got {n!r}")
        out: list[float] = []
        prev: float | None = None
        r = rng if rng is not None else random.Random()
        for i in range(1, n + 1):
            prev = self.wait(i, r, prev)
            out.append(prev)
        return out


def _finite(value: object, name: str, what: str) -> None:
    """Refuse a bool, a non-number, NaN or an infinity for a backoff parameter."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(
            f"backoff {name} must be {what} (a number), got {value!r} ({type(value).__name__})"
        )
    if not math.isfinite(value):
        raise ConfigError(
            f"backoff {name} must be a finite number, got {name}={value!r}: a wait that long "
            "cannot be slept (time.sleep overflows); pass a finite value, e.g. cap=60 for "
            "waits of at most a minute"
        )


RECONNECT = Schedule(0.05, 2.0, "equal")
"""Between reconnect attempts of the storage clients: 0.05 s doubling to 2 s, equal jitter
(at least half of each wait), drawn from a per-process seeded ``Random`` so workers
reconnecting after a server restart spread out."""
