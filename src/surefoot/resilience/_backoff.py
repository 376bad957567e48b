"""Exponential backoff with a cap, and four kinds of jitter, for retries.

The schedule itself is core (:mod:`surefoot.backoff`), shared with the storage clients'
reconnect loops; ``Backoff`` is its name in the resilience API.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..backoff import JITTERS, Schedule

__all__ = ["JITTERS", "Backoff"]


@dataclass(frozen=True, slots=True)
class Backoff(Schedule):
    """Waits that grow exponentially up to a cap, optionally jittered.

    The wait after the n-th failed attempt (n = 1, 2, …), before attempt n + 1, is
    ``v = min(cap, base * multiplier ** (n - 1))`` and then, by ``jitter``:

    ``none``          v
    ``full``          uniform(0, v)                      (AWS "full jitter", the default)
    ``equal``         v / 2 + uniform(0, v / 2)
    ``decorrelated``  min(cap, uniform(base, 3 * previous wait)), first previous = base

    The cap is applied first and the jitter drawn inside it, so the jitter never disappears
    at the cap and waits never pile up on the cap. With base 0.5 s, cap 8 s and no jitter the
    waits before attempts 2..7 are 0.5, 1, 2, 4, 8, 8. The waits and jitter draws are those
    of :class:`surefoot.backoff.Schedule` with the same arguments and the same ``Random``.

    Args:
        base: the first wait, seconds (or a ``timedelta``), >= 0.
        cap: the longest wait, >= base.
        jitter: ``"none" | "full" | "equal" | "decorrelated"``.
        multiplier: growth per attempt, >= 1.

    Raises:
        ConfigError: a negative base, a cap below the base, an unknown jitter.
    """
