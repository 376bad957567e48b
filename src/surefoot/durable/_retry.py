"""Step retries: a ``surefoot.resilience.RetryPolicy`` or a plain number of attempts."""

from __future__ import annotations

import random
from typing import Any

from ..errors import ConfigError

__all__ = ["StepRetry"]


class StepRetry:
    """Decides, after a failed attempt of a step, whether and when to try again.

    Args:
        policy: None (one attempt), an int (that many attempts, no wait, any ``Exception``
            retried) or a ``RetryPolicy`` (its classifier, backoff and deadline decide).

    Raises:
        ConfigError: anything else, or an int < 1.
    """

    __slots__ = ("_decide", "max_attempts", "policy")

    def __init__(self, policy: Any) -> None:
        self.policy = policy
        self._decide: Any = None
        if policy is None:
            self.max_attempts = 1
        elif isinstance(policy, int) and not isinstance(policy, bool):
            if policy < 1:
                raise ConfigError(f"retry must be >= 1 attempts, got {policy!r}")
            self.max_attempts = policy
        elif hasattr(policy, "max_attempts"):
            from ..resilience import decide  # the one retry decision function

            self._decide = decide
            self.max_attempts = int(policy.max_attempts)
        else:
            raise ConfigError(
                f"retry must be None, a number of attempts or a RetryPolicy, got {policy!r}"
            )

    def next_wait(
        self,
        attempt: int,
        error: BaseException,
        elapsed: float,
        previous_wait: float | None,
        rng: random.Random,
    ) -> float | None:
        """Seconds to wait before attempt ``attempt + 1``, or None to give up."""
        if self._decide is not None:
            step = self._decide(self.policy, attempt, error, elapsed, previous_wait, rng)
            return float(step.wait) if step.retry else None
        return 0.0 if attempt < self.max_attempts else None
