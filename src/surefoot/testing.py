"""Helpers for *your* tests: virtual time and counting fakes.

``FakeClock`` advances instantly and records every sleep; pass it wherever surefoot takes a
``clock``. The fakes that count what they receive (``FakeLLM``, fault injectors) live in
``surefoot.llm`` and ``surefoot.resilience.faults``.
"""

from __future__ import annotations

from .clock import FakeClock

__all__ = ["FakeClock"]
