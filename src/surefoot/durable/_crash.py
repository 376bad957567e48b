"""Crash points: where a test or the lab makes a run die, in-process or for real.

``before_step``   the step is numbered, nothing written, the function not called
``before_effect`` an effect's intent row is committed, the effect not performed
``after_effect``  the effect was performed, its result not journalled (the window)
``after_journal`` the step's result is committed

In-process a crash raises :class:`SimulatedCrash` (a ``BaseException``, so workflow code's
``except Exception`` cannot swallow it); the run is left exactly as a dead process leaves
it: running, under a lease nobody renews. With ``exit=True`` the process calls
``os._exit(exit_code)`` at once, like ``kill -9`` (no cleanup, no flush). Worker processes
read a plan from ``SUREFOOT_CRASH=point[:step][:exit]`` (``step`` is a step name or a
position).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field

from ..errors import ConfigError

__all__ = ["POINTS", "CrashPlan", "SimulatedCrash"]

POINTS = ("before_step", "before_effect", "after_effect", "after_journal")


class SimulatedCrash(BaseException):
    """Raised at a crash point in-process: the run stops as if its process died.

    Attributes:
        point: the crash point. run_id / pos / step: where.
    """

    def __init__(self, point: str, run_id: str, pos: str, step: str) -> None:
        self.point = point
        self.run_id = run_id
        self.pos = pos
        self.step = step
        super().__init__(f"simulated crash at {point} of step {pos} {step!r} in run {run_id!r}")


@dataclass(slots=True)
class CrashPlan:
    """Crash once at ``point`` of the step named (or positioned) ``step`` (any step if None).

    Args:
        point: one of ``before_step``, ``before_effect``, ``after_effect``, ``after_journal``.
        step: a step name or position; None matches the first step that reaches ``point``.
        exit: call ``os._exit(exit_code)`` instead of raising ``SimulatedCrash``.
        times: how many times it fires (then it is spent).
        exit_code: the exit status with ``exit``.

    Raises:
        ConfigError: an unknown point.
    """

    point: str
    step: str | None = None
    exit: bool = False
    times: int = 1
    exit_code: int = 137
    _lock: threading.Lock = field(
        default_factory=threading.Lock, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if self.point not in POINTS:
            raise ConfigError(f"crash point must be one of {', '.join(POINTS)}; got {self.point!r}")

    @classmethod
    def from_env(cls, value: str | None = None) -> CrashPlan | None:
        """Read ``SUREFOOT_CRASH`` (``point[:step][:exit]``); None when unset or empty."""
        text = os.environ.get("SUREFOOT_CRASH", "") if value is None else value
        if not text:
            return None
        parts = text.split(":")
        exit_ = parts[-1] == "exit"
        if exit_:
            parts = parts[:-1]
        return cls(parts[0], parts[1] if len(parts) > 1 and parts[1] else None, exit=exit_)

    def check(self, point: str, run_id: str, pos: str, step: str) -> None:
        """Crash here if this plan says so (raise, or ``os._exit``)."""
        if point != self.point or self.times <= 0:
            return
        if self.step is not None and self.step not in (step, pos):
            return
        with self._lock:
            if self.times <= 0:
                return
            self.times -= 1
        if self.exit:
            os._exit(self.exit_code)
        raise SimulatedCrash(point, run_id, pos, step)
