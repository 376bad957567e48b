"""Virtual time for tests: ``FakeClock`` and ``instant_retries``.

``FakeClock`` advances instantly and records every sleep; pass it wherever surefoot takes a
``clock``. The fakes that count what they receive (``FakeLLM``, fault injectors) live in
``surefoot.llm`` and ``surefoot.resilience.faults``.

When the code under test calls ``retry_call``/``@retry`` deep inside and you cannot pass it
a clock, ``instant_retries()`` makes every retry that was given no clock wait on a
``FakeClock`` instead (like stamina's ``set_testing``): the retries still happen, the
attempts still count, nothing sleeps, and the clock it yields records the waits.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ..clock import FakeClock, swap_default_clock

__all__ = ["FakeClock", "instant_retries"]


@contextlib.contextmanager
def instant_retries(clock: FakeClock | None = None) -> Iterator[FakeClock]:
    """Within the block, retry drivers given no ``clock`` wait on a ``FakeClock``.

    Covers ``retry_call``, ``aretry_call``, ``@retry`` and ``ResilientClient`` made without
    a clock, including ones decorated before the block. Not covered (they keep their own
    clock): ``CircuitBreaker`` and ``IdempotentExecutor``, and any call given ``clock=``.
    The switch is process-wide, not per thread or task: do not run tests that expect real
    waits in parallel threads of the same process. The previous default comes back on exit.

    Args:
        clock: the clock to use (a new ``FakeClock()`` by default).

    Yields:
        The clock: ``clock.sleeps`` lists every wait the retries asked for.
    """
    fake = clock if clock is not None else FakeClock()
    old = swap_default_clock(fake)
    try:
        yield fake
    finally:
        swap_default_clock(old)
