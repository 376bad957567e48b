"""What one Temporal kill run did, read from the ledger and from the run's server history.

The ledger (outside the worker) says which calls the services received; the history says
which activities the server recorded as completed, when, and on which attempt. A call for
a step completed before the kill is a repeated call of a completed step (the seed's
figure); the attempt that completed the step in flight is how often it ran.
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass
from typing import Any

from ._ledger import Ledger
from ._workflow import APPROVE, STEPS

__all__ = ["TemporalKillReport", "build_report", "timestamp"]

_CALLS = ("plan", "search", "read", "summarize", "draft", "publish")


@dataclass(frozen=True, slots=True)
class TemporalKillReport:
    """One agent run on Temporal whose worker (or server) was SIGKILLed mid-run.

    Attributes:
        kill_at: the step in flight at the kill (``approve``: the run waited for its signal).
        target: ``"worker"`` or ``"server"`` (the worker kept running then).
        window: ``"request"`` (killed half a service latency after the step's activity
            started: the service has not acted yet), ``"reply"`` (killed after the service
            received the step's request, before it answered) or ``"wait"`` (approve).
        tuning: the :class:`Tuning`'s name.
        status: the workflow's final status (``COMPLETED`` when it finished).
        completed_before_kill: activities whose completion the server had recorded.
        calls_per_step: requests the services received per step (``publish``: publish
            requests), counted in the ledger outside the worker.
        model_calls: model calls received. repeated_for_completed: calls beyond the first
            for steps completed before the kill (the seed's figure: must be 0).
        repeated_after_completion: model calls received after their step's completion
            was recorded (0 unless a completed activity ran again).
        in_flight / in_flight_calls / in_flight_attempts: the step in flight, its requests
            in the ledger, and the attempt that completed it (server history).
        posts / duplicate_posts: posts created, and those beyond the first per channel.
        resumed_in_s: seconds from the kill to the next activity attempt's start (the
            in-flight step's retry, or the step after it).
        next_step_in_s: seconds from the kill to the start of the step after the one in
            flight (includes a stall on the dead worker's sticky queue).
        result_in_s: seconds from the kill to the workflow's completion.
        worker_restarts: worker processes started after the first.
    """

    kill_at: str
    target: str
    window: str
    tuning: str
    status: str
    completed_before_kill: list[str]
    calls_per_step: dict[str, int]
    model_calls: int
    repeated_for_completed: int
    repeated_after_completion: int
    in_flight: str
    in_flight_calls: int
    in_flight_attempts: int | None
    posts: int
    duplicate_posts: int
    resumed_in_s: float | None
    next_step_in_s: float | None
    result_in_s: float | None
    worker_restarts: int


def timestamp(t: Any) -> float:
    """A protobuf Timestamp as Unix seconds."""
    return float(t.seconds) + float(t.nanos) / 1e9


def build_report(
    ledger: Ledger,
    events: list[Any],
    *,
    run_id: str,
    kill_at: str,
    target: str,
    window: str,
    tuning: str,
    status: str,
    killed: float,
    finished: float,
    restarts: int,
) -> TemporalKillReport:
    """The report of one run from its ledger rows and its history ``events`` (``killed``,
    ``finished``: Unix seconds on this machine's clock, which the server shares)."""
    names: dict[int, str] = {}
    started: dict[int, tuple[float, int]] = {}
    completed: dict[str, float] = {}
    for e in events:
        kind = e.WhichOneof("attributes")
        at = timestamp(e.event_time)
        if kind == "activity_task_scheduled_event_attributes":
            names[e.event_id] = e.activity_task_scheduled_event_attributes.activity_type.name
        elif kind == "activity_task_started_event_attributes":
            a = e.activity_task_started_event_attributes
            started[a.scheduled_event_id] = (at, a.attempt)
        elif kind == "activity_task_completed_event_attributes":
            completed[names[e.activity_task_completed_event_attributes.scheduled_event_id]] = at
    before = [s for s in STEPS if s in completed and completed[s] < killed]
    if kill_at != APPROVE and completed.get(kill_at, float("inf")) < killed:
        before = [s for s in before if s != kill_at]  # a server kill: it finished meanwhile
    starts = sorted((at, names[sid]) for sid, (at, _) in started.items())
    after_kill = [(at, n) for at, n in starts if at >= killed]
    # the activity after the one in flight (approve is a wait, not an activity)
    nxt = "publish" if kill_at == APPROVE else dict(itertools.pairwise(_CALLS)).get(kill_at)
    calls = ledger.calls(run_id)
    per_step = {
        s: sum(1 for c in calls if (c["service"] == s if s == "publish" else c["step"] == s))
        for s in _CALLS
    }
    late = sum(
        1
        for c in calls
        if c["service"] == "model" and c["at"] > completed.get(c["step"], float("inf"))
    )
    posts = ledger.posts(run_id)
    in_flight = kill_at
    attempts = next((att for sid, (_, att) in started.items() if names[sid] == kill_at), None)
    ledger.close()
    return TemporalKillReport(
        kill_at=kill_at,
        target=target,
        window=window,
        tuning=tuning,
        status=status,
        completed_before_kill=before,
        calls_per_step=per_step,
        model_calls=sum(1 for c in calls if c["service"] == "model"),
        repeated_for_completed=sum(max(per_step.get(s, 1) - 1, 0) for s in before),
        repeated_after_completion=late,
        in_flight=in_flight,
        in_flight_calls=per_step.get(in_flight, 0),
        in_flight_attempts=attempts,
        posts=len(posts),
        duplicate_posts=sum(n - 1 for n in Counter(p["channel"] for p in posts).values()),
        resumed_in_s=after_kill[0][0] - killed if after_kill else None,
        next_step_in_s=next((at - killed for at, n in after_kill if n == nxt), None),
        result_in_s=finished - killed,
        worker_restarts=restarts,
    )
