"""Seed 002's Hard 1 and Hard 2 again, on a PydanticAI agent durable on surefoot.

``durable.frameworks``: the agent of ``surefoot_lab.agent.pydantic_ai_trip`` (PydanticAI,
``SurefootDurability`` on SQLite; two parallel lookups, a keyed booking effect, an answer)
served by real ``surefoot worker`` processes, SIGKILLed at seeded random moments during
real runs and restarted under their ids. Counted by the agent's ledger (outside the
journal): runs completed, model calls per run, model calls repeated, booking effects
applied more than once. DBOS and Temporal under the same agent are measured by
``benchmarks/bench_frameworks.py`` (``--kills`` for DBOS; Temporal's overhead and history
bytes), not here: the lab run stays within about a minute.
"""

from __future__ import annotations

import os
import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from surefoot.durable import TERMINAL

from .._registry import LabContext, LabResult, Table, experiment
from ..agent.chaos import ChaosConfig, WorkerProcesses
from ._common import SEED_FILE

__all__ = ["kill_runs"]

ENDED = frozenset({*TERMINAL, "needs_attention"})
APP = "surefoot_lab.agent.pydantic_ai_trip:app"
PROGRESS = 6
"""Ledger events (model requests, tool calls) between two kills: the runs move on between
kills however slowly restarted workers start (else kills can outpace a loaded machine)."""
KILL_WINDOW = 0.5
"""Kills happen in the first half of the time limit; the second half lets the runs end."""
FUNCTION_MODEL = "PydanticAI FunctionModel (a scripted model, not a real LLM)"


def kill_runs(
    workdir: Path,
    *,
    runs: int,
    seed: int,
    workers: int = 2,
    kill_every: tuple[float, float] = (1.0, 2.0),
    max_kills: int = 20,
    time_limit: float = 45.0,
    delay: float = 0.1,
    llm: Any = None,
) -> dict[str, Any]:
    """``runs`` agent runs enqueued on a fresh SQLite journal, ``workers`` worker processes
    SIGKILLed at seeded random moments (at most ``max_kills``; each hits a worker drawn
    among those whose process wrote one of the ledger's last 20 events, so it is mid-run, and
    only after ``PROGRESS`` more ledger events since the previous kill, in the first
    ``KILL_WINDOW`` of the time)
    and restarted under their ids until every run ended or ``time_limit`` seconds passed;
    what the ledger counted."""
    from ..agent.pydantic_ai_trip import MODEL_REQUESTS, build, read_ledger

    db = f"sqlite:///{workdir / 'frameworks.db'}"
    ledger = workdir / "frameworks-ledger.jsonl"
    app, trip = build(db, ledger, delay=delay)
    ids = [f"r{i}" for i in range(runs)]
    for rid in ids:
        app.enqueue(trip, rid, run_id=rid)

    def argv(wid: str) -> list[str]:
        return [
            sys.executable, "-m", "surefoot", "worker", "--db", db, "--app", APP,
            "--worker-id", wid, "--lease", "2", "--max-claims", "100", "--concurrency", "4",
        ]  # fmt: skip

    wp = WorkerProcesses(ChaosConfig(db=db, ledger=str(ledger), worker_cmd=argv), workdir)
    wp.env.update(
        SUREFOOT_LAB_PAI_DB=db,
        SUREFOOT_LAB_PAI_LEDGER=str(ledger),
        SUREFOOT_LAB_PAI_DELAY=str(delay),
    )
    if llm is not None:
        wp.env.update(SUREFOOT_LAB_LLM_URL=llm.base_url, SUREFOOT_LAB_LLM_MODEL=llm.model)
    rng = random.Random(seed)
    wids = [f"w{i}" for i in range(workers)]
    kills = at_last_kill = 0
    t0 = time.monotonic()
    ended: list[str] = []
    try:
        for wid in wids:
            wp.start(wid)
        next_kill = t0 + rng.uniform(*kill_every)
        while time.monotonic() - t0 < time_limit:
            ended = [r for r in ids if app.show(r).run.status in ENDED]
            if len(ended) == runs:
                break
            seen = read_ledger(ledger)
            working = {e["pid"] for e in seen[-20:]}
            live = sorted(w for w in wids if wp.procs[w].pid in working)
            progressed = len(seen) >= at_last_kill + PROGRESS
            now = time.monotonic()
            in_window = now - t0 < KILL_WINDOW * time_limit
            if kills < max_kills and now >= next_kill and live and progressed and in_window:
                wid = rng.choice(live)  # a worker calling the model or a tool: mid-run
                wp.kill(wid)
                kills += 1
                at_last_kill = len(seen)
                wp.start(wid)
                next_kill = time.monotonic() + rng.uniform(*kill_every)
            time.sleep(0.02)
    finally:
        wp.stop_all()
    elapsed = time.monotonic() - t0
    statuses = Counter(app.show(r).run.status for r in ids)
    events = read_ledger(ledger)
    after_journal = 0  # model requests received after that request's step was journalled
    for rid in ids:
        steps = [s for s in app.show(rid).steps if s.name.endswith("model.request")]
        steps.sort(key=lambda s: s.started_at)
        for turn, step in enumerate(steps):
            if step.status == "done" and step.finished_at is not None:
                after_journal += sum(
                    1
                    for e in events
                    if e["ev"] == "model"
                    and e["run"] == rid
                    and e["turn"] == turn
                    and e["t"] > step.finished_at
                )
    app.close()
    model = Counter((e["run"], e["turn"]) for e in events if e["ev"] == "model")
    applied = Counter(e["run"] for e in events if e["ev"] == "effect_applied")
    requested = Counter(e["run"] for e in events if e["ev"] == "effect_request")
    lookups = sum(1 for e in events if e.get("tool") == "lookup")
    return {
        "runs": runs,
        "completed": statuses.get("succeeded", 0),
        "statuses": dict(statuses),
        "kills": kills,
        "seconds": round(elapsed, 2),
        "model_calls": sum(model.values()),
        "model_calls_per_run": round(sum(model.values()) / runs, 3),
        "repeated_model_calls": sum(n - 1 for n in model.values()),
        "repeated_after_journal": after_journal,
        "model_requests_without_repeat": MODEL_REQUESTS,
        "effect_requests": sum(requested.values()),
        "duplicate_effects": sum(n - 1 for n in applied.values()),
        "runs_without_effect": sum(1 for r in ids if applied[r] == 0),
        "lookups": lookups,
    }


@experiment(
    id="durable.frameworks",
    seed_file=SEED_FILE,
    exercise="Hard 1, Hard 2",
    title="A PydanticAI agent on surefoot: workers SIGKILLed at random, nothing completed repeated",
    real_llm=True,
)
def frameworks(ctx: LabContext) -> LabResult:
    full = os.environ.get("SUREFOOT_LAB_FULL") == "1"
    runs = 4 if ctx.quick else (60 if full else 8)
    max_kills, time_limit, delay = (40, 240.0, 0.1) if full else (8, 50.0, 0.1)
    if ctx.quick:
        max_kills = 3
    params: dict[str, Any] = {
        "runs": runs,
        "workers": 2,
        "kill_every_s": [1.0, 2.0],
        "max_kills": max_kills,
        "time_limit_s": time_limit,
        "delay_s": delay,
        "journal": "SQLite",
        "full": full,
    }
    r = kill_runs(
        ctx.workdir,
        runs=runs,
        seed=ctx.seed,
        kill_every=(1.0, 2.0),
        max_kills=max_kills,
        time_limit=time_limit,
        delay=delay,
        llm=ctx.llm,
    )
    model = ctx.llm.label if ctx.llm is not None else FUNCTION_MODEL
    t = Table(
        f"{runs} PydanticAI agent runs (SurefootDurability, SQLite), 2 `surefoot worker` "
        f"processes, {r['kills']} SIGKILLs at seeded random moments in {r['seconds']} s; "
        f"a run without a repeat: 3 model requests, 2 lookups, 1 booking",
        [
            "engine",
            "completed",
            "model calls/run",
            "repeated model calls (in flight)",
            "repeated after journalled",
            "booking requests",
            "duplicate bookings",
            "kills",
        ],
        note=f"model: {model}. DBOS and Temporal under the same agent: "
        "benchmarks/bench_frameworks.py (--kills), recorded in docs/benchmarks.md.",
    )
    t.add(
        "surefoot (SQLite)",
        f"{r['completed']}/{runs}",
        r["model_calls_per_run"],
        r["repeated_model_calls"],
        r["repeated_after_journal"],
        r["effect_requests"],
        r["duplicate_effects"],
        r["kills"],
    )
    answer = (
        f"{r['completed']} of {runs} PydanticAI agent runs completed through {r['kills']} "
        f"SIGKILLs of their workers; {r['model_calls_per_run']} model calls per run "
        f"({r['repeated_model_calls']} repeated: requests in flight at a kill; "
        f"{r['repeated_after_journal']} received after their step was journalled), "
        f"{r['duplicate_effects']} duplicate bookings ({r['effect_requests']} booking "
        f"requests for {runs} bookings: the key surefoot derives from the run and the "
        "tool call id is the same on every resume)."
    )
    return LabResult(
        tables=[t],
        facts=r,
        answer=answer,
        params=params,
        model=model,
    )
