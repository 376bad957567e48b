"""``Channel``: a seeded lossy, duplicating, delaying link between two agents."""

from __future__ import annotations

import random
from dataclasses import dataclass

from surefoot.errors import ConfigError

__all__ = ["Channel"]


@dataclass(frozen=True, slots=True)
class Channel:
    """A link that loses, duplicates and delays each transmission (messages and acks alike).

    Args:
        loss: probability a transmission is lost.
        duplicate: probability a transmission that arrives arrives twice (the network, not
            the sender, made the copy).
        delay: extra ticks a transmission may take on top of one tick (uniform 0..delay), so
            a slow ack can make the sender retry a message that did arrive.
        seed: combined with the seed given to ``deliver``; the same pair replays the same
            traffic.
    """

    loss: float = 0.2
    duplicate: float = 0.0
    delay: int = 1
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("loss", "duplicate"):
            p = getattr(self, name)
            if isinstance(p, bool) or not isinstance(p, int | float) or not 0.0 <= p <= 1.0:
                raise ConfigError(f"Channel {name} must be a probability in [0, 1], got {p!r}")
        if isinstance(self.delay, bool) or not isinstance(self.delay, int) or self.delay < 0:
            raise ConfigError(f"Channel delay must be whole ticks >= 0, got {self.delay!r}")

    def rng(self, seed: int) -> random.Random:
        """The random stream for one delivery run with ``seed``."""
        return random.Random(self.seed * 1_000_003 + seed)

    def transmit(self, rng: random.Random) -> list[int]:
        """Ticks until each copy arrives: ``[]`` if lost, two entries if duplicated.

        Always draws the same number of random values, so two runs with the same seed see
        the same fate for the same transmission whatever the receiver does.
        """
        lost = rng.random() < self.loss
        dup = rng.random() < self.duplicate
        first = 1 + rng.randint(0, self.delay)
        second = 1 + rng.randint(0, self.delay)
        if lost:
            return []
        return [first, second] if dup else [first]
