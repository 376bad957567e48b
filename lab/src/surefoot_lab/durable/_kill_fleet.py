"""What ``durable.frameworks`` does the same way on every engine: kill workers at random
mid-run, and count from the agent's ledger what the kills cost.

The ledger is written by the agent's model and tools (``pydantic_ai_trip``), outside every
engine's store, one JSON line per model request and tool call with the writing process's pid:
so a request the engine repeated is counted by the "services", not by the engine, and a kill
can be aimed at a worker that is calling the model or a tool right now.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..agent.chaos import WorkerProcesses
from ..agent.pydantic_ai_trip import MODEL_REQUESTS, read_ledger

__all__ = ["KillSchedule", "kill_at_random", "ledger_figures", "repeated_after_recorded"]

RECENT = 8
"""A worker is mid-run when its process wrote one of the ledger's last ``RECENT`` events."""


@dataclass(frozen=True, slots=True)
class KillSchedule:
    """When kills happen: each after a seeded random number of ledger events (model
    requests, tool calls) drawn from ``kill_after`` since the work began or the previous
    kill, at most ``max_kills``; the runs get ``time_limit`` seconds from their first event
    (the workers ``start_limit`` seconds to make it).

    Counting events, not seconds, puts the kills inside the runs however long the worker
    processes take to start (seconds on a loaded machine, against runs of about a second).
    """

    seed: int
    kill_after: tuple[int, int] = (3, 9)
    max_kills: int = 8
    time_limit: float = 50.0
    start_limit: float = 180.0


def kill_at_random(
    wp: WorkerProcesses,
    wids: Sequence[str],
    ledger: Path,
    ended: Callable[[], int],
    runs: int,
    schedule: KillSchedule,
    *,
    poll: float = 0.02,
) -> dict[str, Any]:
    """Start ``wids`` (those already started are left alone), then until ``ended()`` says
    all ``runs`` ended or the time ran out: once the ledger grew by the drawn number of
    events, SIGKILL a worker drawn among those whose process wrote one of its last
    ``RECENT`` events (it is calling the model or a tool now) and restart it under its id
    at once. Stops every worker at the end. ``{"kills", "startup_s": launch to the first
    event, "seconds": first event to the end}``."""
    rng = random.Random(schedule.seed)
    kills = at_last_kill = 0
    due = rng.randint(*schedule.kill_after)
    t0 = time.monotonic()
    began: float | None = None
    try:
        for wid in wids:
            if wid not in wp.procs:
                wp.start(wid)
        while True:
            now = time.monotonic()
            limit = schedule.start_limit if began is None else schedule.time_limit
            if now - (t0 if began is None else began) >= limit or ended() >= runs:
                break
            seen = read_ledger(ledger)
            if began is None and seen:
                began = time.monotonic()
            working = {e["pid"] for e in seen[-RECENT:]}
            live = sorted(w for w in wids if wp.procs[w].pid in working)
            if kills < schedule.max_kills and len(seen) >= at_last_kill + due and live:
                wid = rng.choice(live)
                wp.kill(wid)
                kills += 1
                at_last_kill = len(seen)
                due = rng.randint(*schedule.kill_after)
                wp.start(wid)
            time.sleep(poll)
    finally:
        wp.stop_all()
    end = time.monotonic()
    return {
        "kills": kills,
        "startup_s": round((began or end) - t0, 2),
        "seconds": round(end - (began or end), 2),
    }


def repeated_after_recorded(
    events: list[dict[str, Any]], recorded: dict[str, list[float | None]]
) -> int:
    """Model requests received after the engine recorded that request's result:
    ``recorded[run][turn]`` is when the engine recorded turn ``turn``'s response (epoch
    seconds; None: not recorded). The figure every engine must keep at 0."""
    late = 0
    for e in events:
        if e["ev"] != "model":
            continue
        done = recorded.get(e["run"], [])
        at = done[e["turn"]] if e["turn"] < len(done) else None
        # engines record whole milliseconds: a request in the same millisecond is the original
        if at is not None and e["t"] > at + 0.001:
            late += 1
    return late


def ledger_figures(ledger: Path, ids: Sequence[str]) -> dict[str, Any]:
    """What the agent's services received for runs ``ids``: model requests (per run, and
    beyond the first for the same run and turn), lookups, booking requests, bookings
    applied more than once, and the real model's answers (``--llm``)."""
    events = read_ledger(ledger)
    model = Counter((e["run"], e["turn"]) for e in events if e["ev"] == "model")
    applied = Counter(e["run"] for e in events if e["ev"] == "effect_applied")
    requested = Counter(e["run"] for e in events if e["ev"] == "effect_request")
    runs = len(ids)
    return {
        "model_calls": sum(model.values()),
        "model_calls_per_run": round(sum(model.values()) / runs, 3),
        "repeated_model_calls": sum(n - 1 for n in model.values()),
        "model_requests_without_repeat": MODEL_REQUESTS,
        "effect_requests": sum(requested.values()),
        "duplicate_effects": sum(n - 1 for n in applied.values()),
        "runs_without_effect": sum(1 for r in ids if applied[r] == 0),
        "lookups": sum(1 for e in events if e.get("tool") == "lookup"),
        "real_model_answers": sum(1 for e in events if e["ev"] == "llm"),
    }
