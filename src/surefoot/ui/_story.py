"""A run's story for its page: where it died, who resumed it and why, and its steps on a
time axis (a waterfall: each step's bar, its attempts, the waits, the gap while the run was
dead), all read from the journal (steps and audit log).

Geometry is computed here, as percentages of the run's span, and drawn by the template as
inline SVG (attributes, not styles: the pages' CSP allows no inline style). Nothing here is
markup: names, workers and outcomes are values the template escapes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import durable

__all__ = ["Bar", "Epoch", "Handover", "Story", "story"]

WAITS = ("sleep", "signal", "wait")
MIN_WIDTH = 0.6  # percent: a step shorter than this is still drawn visibly

_CAPTIONS = {
    "lease_expired": "its lease had expired (its worker died or stalled)",
    "holder_dead": "its holder's process was gone, so its lease was not waited out",
    "restarted": "the same worker id took it back after a restart",
    "operator": "an operator resumed it",
}


@dataclass(frozen=True, slots=True)
class Bar:
    """One step on the axis: ``left``/``width`` in percent of the run's span."""

    pos: str
    name: str
    kind: str
    status: str
    epoch: int
    attempts: int
    left: float
    width: float
    duration: float | None
    outcomes: list[str]
    more: bool
    resumed_here: bool
    wait: bool
    replayed: bool  # journalled by an execution that died, replayed by the next one
    lost_left: float | None = None  # the attempt the dead execution started and lost
    lost_width: float = 0.0
    since_resume: float | None = None  # seconds from the handover to its end (if lost_left)


@dataclass(frozen=True, slots=True)
class Epoch:
    """One execution of the run (an epoch): from its claim to its last sign of life."""

    epoch: int
    worker: str
    left: float
    width: float
    start: float
    end: float
    died: bool


@dataclass(frozen=True, slots=True)
class Handover:
    """The run changed hands: the gap while it was dead, who took it, why, and where."""

    at: float
    left: float
    worker: str
    previous_epoch: int
    epoch: int
    reason: str
    why: str
    died_at: float
    died_left: float
    gap_width: float
    died_after: tuple[str, str] | None  # (pos, name) of the last step the dead one journalled
    resumed_at_step: tuple[str, str] | None  # (pos, name) of the first step it ran
    resumed_by_operator: bool
    previous_worker: str


@dataclass(frozen=True, slots=True)
class Story:
    """What the run page draws above its timeline table."""

    start: float
    end: float
    span: float
    bars: list[Bar]
    epochs: list[Epoch]
    handovers: list[Handover]
    ticks: list[tuple[float, str]]
    outcomes: dict[str, list[str]] = field(default_factory=dict)
    fenced: list[tuple[float, float, str, Any]] = field(default_factory=list)  # late writes


def _end_of(s: durable.StepInfo) -> float:
    return s.finished_at if s.finished_at is not None else s.started_at


def _tick(seconds: float) -> str:
    if seconds < 1:
        return f"+{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"+{seconds:.1f} s"
    return f"+{seconds / 60:.1f} min"


def _detail(a: durable.AuditEntry) -> dict[str, Any]:
    return a.detail if isinstance(a.detail, dict) else {}


def story(d: durable.RunDetail, *, now: float) -> Story:
    """The story of run ``d``: its executions, its handovers and its steps on one axis."""
    r = d.run
    steps = list(d.steps)
    audit = list(d.audit)
    start = r.created_at
    times = [start, r.updated_at, *(a.at for a in audit), *(_end_of(s) for s in steps)]
    end = max(times)
    if r.status == "running":
        end = max(end, min(now, end + 3600.0))
    span = max(end - start, 1e-6)

    def pct(t: float) -> float:
        return round(max(0.0, min(100.0, 100.0 * (t - start) / span)), 3)

    outcomes: dict[str, list[str]] = {}
    more: set[str] = set()
    for a in audit:
        dd = _detail(a)
        if a.action == "attempts" and "pos" in dd:
            outcomes.setdefault(str(dd["pos"]), []).extend(str(o) for o in dd.get("outcomes", []))
            if dd.get("more"):
                more.add(str(dd["pos"]))

    # executions: each epoch from its claim (or the run's creation) to its last sign of life
    claimed: dict[int, tuple[float, str]] = {}
    created: tuple[float, str] | None = None
    for a in audit:
        dd = _detail(a)
        if a.action in ("claimed", "taken_over") and isinstance(dd.get("epoch"), int):
            # the claim's own time: its audit row may be written later (after the steps)
            at = dd.get("claimed_at")
            t0 = float(at) if isinstance(at, int | float) and not isinstance(at, bool) else a.at
            claimed.setdefault(dd["epoch"], (t0, str(dd.get("worker", a.actor))))
        elif a.action == "created" and created is None:
            created = (a.at, a.actor)
    if 1 not in claimed and created is not None and r.epoch >= 1:
        claimed[1] = created  # start()ed here: created running, its claim entry not written
    fenced = [
        (pct(a.at), a.at, a.actor, _detail(a).get("epoch"))
        for a in audit
        if a.action == "lease_lost"
    ]
    last: dict[int, tuple[float, durable.StepInfo | None]] = {}
    for s in steps:
        t = _end_of(s)
        if s.epoch not in last or t >= last[s.epoch][0]:
            last[s.epoch] = (t, s)

    handovers: list[Handover] = []
    for a in audit:
        dd = _detail(a)
        if a.action != "taken_over" or not isinstance(dd.get("previous_epoch"), int):
            continue
        prev, new = int(dd["previous_epoch"]), int(dd.get("epoch", dd["previous_epoch"] + 1))
        t_claim, prev_worker = claimed.get(prev, (start, "?"))
        died_at, died_step = last.get(prev, (t_claim, None))
        died_at = min(max(died_at, t_claim), a.at)
        first = min((s for s in steps if s.epoch == new), key=lambda s: s.started_at, default=None)
        reason = str(dd.get("reason") or "")
        operator = reason == "operator" or any(
            b.action == "resume" and b.at >= a.at and _detail(b).get("worker") == dd.get("worker")
            for b in audit
        )
        handovers.append(
            Handover(
                at=a.at,
                left=pct(a.at),
                worker=str(dd.get("worker", a.actor)),
                previous_epoch=prev,
                epoch=new,
                reason=reason,
                why=_CAPTIONS.get(reason, ""),
                died_at=died_at,
                died_left=pct(died_at),
                gap_width=max(pct(a.at) - pct(died_at), 0.0),
                died_after=None if died_step is None else (died_step.pos, died_step.name),
                resumed_at_step=None if first is None else (first.pos, first.name),
                resumed_by_operator=operator,
                previous_worker=prev_worker,
            )
        )

    dead = {h.previous_epoch: h for h in handovers}
    epochs = []
    order = sorted(claimed.items())
    for i, (e, (t0, worker)) in enumerate(order):
        h = dead.get(e)
        t1 = h.died_at if h is not None else (order[i + 1][1][0] if i + 1 < len(order) else end)
        t1 = max(t1, t0)
        width = round(max(pct(t1) - pct(t0), MIN_WIDTH), 3)
        epochs.append(Epoch(e, worker, pct(t0), width, t0, t1, h is not None))

    resumed = {h.resumed_at_step[0]: h for h in handovers if h.resumed_at_step is not None}
    bars = []
    for s in steps:
        if s.finished_at is not None:
            t1 = s.finished_at
        else:  # an intent without outcome reaches the end; any other is a point for now
            t1 = end if s.status == "intent" else s.started_at
        t0 = s.started_at
        h = resumed.get(s.pos)
        lost_left, lost_width, since = None, 0.0, None
        if h is not None and h.epoch == s.epoch and t0 < h.at:
            # started by the execution that died (its intent row), done again after the
            # handover: the lost attempt, then the one that counted
            lost_left, lost_width = pct(t0), round(max(pct(h.died_at) - pct(t0), MIN_WIDTH), 3)
            t0 = h.at
            since = max(t1 - h.at, 0.0)
        left = pct(t0)
        bars.append(
            Bar(
                pos=s.pos,
                name=s.name,
                kind=s.kind,
                status=s.status,
                epoch=s.epoch,
                attempts=s.attempts,
                left=min(left, 100.0 - MIN_WIDTH),
                width=round(max(pct(t1) - left, MIN_WIDTH), 3),
                duration=s.duration,
                outcomes=outcomes.get(s.pos, []),
                more=s.pos in more,
                resumed_here=s.pos in resumed and resumed[s.pos].epoch == s.epoch,
                wait=s.kind in WAITS,
                replayed=s.epoch in dead,
                lost_left=lost_left,
                lost_width=lost_width,
                since_resume=since,
            )
        )
    ticks = [(p, _tick(span * p / 100.0)) for p in (0.0, 25.0, 50.0, 75.0, 100.0)]
    return Story(start, end, span, bars, epochs, handovers, ticks, outcomes, fenced)
