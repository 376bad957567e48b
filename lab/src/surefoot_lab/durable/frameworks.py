"""Seed 002's Hard 1 and Hard 2 again, on a PydanticAI agent on surefoot, DBOS and Temporal.

``durable.frameworks``: the agent of ``surefoot_lab.agent.pydantic_ai_trip`` (PydanticAI;
two parallel lookups, a keyed booking effect, an answer) under ``SurefootDurability``
(SQLite, real ``surefoot worker`` processes), PydanticAI's ``DBOSDurability`` (SQLite system
database, ``agent._dbos_trip`` workers) and its ``TemporalDurability`` (a dev server,
``agent._temporal_trip`` workers): two worker processes per engine, SIGKILLed at seeded
random moments during real runs and restarted under their ids (``_kill_fleet``). The three
engines run at once, so the experiment takes about as long as the slowest. Counted by the
agent's ledger (outside every engine): runs completed, model calls per run, model calls
repeated (and repeated after the engine recorded the response), tool calls run again,
booking effects applied more than once. An engine that is not installed is a row saying so.
With ``--llm local`` the final answer of each run is a real completion; when the local model
is absent the lab says so and reports the FunctionModel's figures.
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from surefoot.durable import TERMINAL

from .._registry import LabContext, LabResult, Table, experiment
from ..agent.chaos import ChaosConfig, WorkerProcesses
from ..agent.pydantic_ai_trip import TEMPORAL_HEARTBEAT_S, TEMPORAL_STICKY_S
from ._common import SEED_FILE
from ._framework_peers import dbos_kill_runs, dbos_missing, temporal_kill_runs, temporal_missing
from ._kill_fleet import KillSchedule, kill_at_random, ledger_figures, repeated_after_recorded

__all__ = ["kill_runs"]

ENDED = frozenset({*TERMINAL, "needs_attention"})
APP = "surefoot_lab.agent.pydantic_ai_trip:app"
FUNCTION_MODEL = "PydanticAI FunctionModel (a scripted model, not a real LLM)"


def kill_runs(
    workdir: Path,
    *,
    runs: int,
    seed: int,
    workers: int = 2,
    kill_after: tuple[int, int] = (3, 9),
    max_kills: int = 20,
    time_limit: float = 45.0,
    delay: float = 0.1,
    llm: Any = None,
) -> dict[str, Any]:
    """``runs`` agent runs enqueued on a fresh SQLite journal, ``workers`` ``surefoot worker``
    processes SIGKILLed at seeded random moments (``_kill_fleet.kill_at_random``: after
    ``kill_after`` ledger events, at most ``max_kills``, each at a worker calling the model or
    a tool) and restarted under their ids
    until every run ended or ``time_limit`` seconds passed; what the ledger counted."""
    from ..agent.pydantic_ai_trip import build, read_ledger

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

    def ended() -> int:
        return sum(1 for r in ids if app.show(r).run.status in ENDED)

    schedule = KillSchedule(seed, kill_after, max_kills, time_limit)
    wids = [f"w{i}" for i in range(workers)]
    timing = kill_at_random(wp, wids, ledger, ended, runs, schedule)
    statuses = Counter(app.show(r).run.status for r in ids)
    recorded: dict[str, list[float | None]] = {}
    for rid in ids:
        steps = [s for s in app.show(rid).steps if s.name.endswith("model.request")]
        steps.sort(key=lambda s: s.started_at)
        recorded[rid] = [s.finished_at if s.status == "done" else None for s in steps]
    app.close()
    return {
        "runs": runs,
        "completed": statuses.get("succeeded", 0),
        "statuses": dict(statuses),
        **timing,
        **ledger_figures(ledger, ids),
        "repeated_after_journal": repeated_after_recorded(read_ledger(ledger), recorded),
        "worker_starts": wp.started,
    }


def _peer(missing: str | None, run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """A peer's figures; ``{"skipped": why}`` when its engine is not installed, and
    ``{"skipped": "failed: …"}`` when its run raised (the other rows still stand)."""
    if missing is not None:
        return {"skipped": missing}
    try:
        return run()
    except Exception as exc:  # a peer's failure is reported in its row, not raised
        return {"skipped": f"failed: {type(exc).__name__}: {exc}", "failed": True}


def _row(t: Table, engine: str, r: dict[str, Any]) -> None:
    if "skipped" in r:
        t.add(engine, f"not run: {r['skipped']}", *["-"] * (len(t.columns) - 2))
        return
    t.add(
        engine,
        f"{r['completed']}/{r['runs']}",
        r["model_calls_per_run"],
        r["repeated_model_calls"],
        r["repeated_after_journal"],
        round(r["lookups"] / r["runs"], 2),
        r["effect_requests"],
        r["duplicate_effects"],
        r["kills"],
        r["seconds"],
    )


def _sentence(engine: str, r: dict[str, Any]) -> str:
    if "skipped" in r:
        return f"{engine}: not run ({r['skipped']})"
    return (
        f"{engine}: {r['completed']}/{r['runs']} runs completed through {r['kills']} kills in "
        f"{r['seconds']} s, {r['model_calls_per_run']} model calls per run "
        f"({r['repeated_model_calls']} repeated, {r['repeated_after_journal']} of them after "
        f"the engine recorded the response), {r['lookups'] / r['runs']:.2f} lookups per run "
        f"(2 without a repeat), {r['effect_requests']} booking requests, "
        f"{r['duplicate_effects']} duplicate bookings"
        + (
            f", {r['real_model_answers']} answers from the real model"
            if r.get("real_model_answers")
            else ""
        )
        + (
            f", {r['retried_attempts']} activity attempts retried by the server"
            if "retried_attempts" in r
            else ""
        )
    )


def _sizes(ctx: LabContext, full: bool) -> dict[str, Any]:
    """Runs, kills and time limits per engine. Every engine gets the same schedule (the same
    runs, the same number of kills drawn from the same seed), except under ``--quick``,
    where surefoot keeps 4 runs and the peers get 2 (their assertions are lighter). Each
    kill costs a worker restart: seconds of imports on an idle machine, up to 40 s at load
    13 on two cores (2026-12-06), hence few kills, and the time limits are upper bounds
    counted from each engine's first model request. A real model gets fewer runs (each
    final answer is a real completion) and three times the time."""
    sizes: dict[str, Any]
    if ctx.quick:
        sizes = {"runs": 4, "max_kills": 2, "peer_runs": 2, "peer_kills": 1}
    elif full:
        sizes = {"runs": 20, "max_kills": 8, "peer_runs": 20, "peer_kills": 8}
    else:
        sizes = {"runs": 4, "max_kills": 2, "peer_runs": 4, "peer_kills": 2}
    sizes["time_limit"] = sizes["peer_time_limit"] = 240.0 if full else 90.0
    if ctx.llm is not None:
        sizes["runs"] = min(sizes["runs"], 4)
        sizes["peer_runs"] = min(sizes["peer_runs"], 2)
        sizes["time_limit"] *= 3
        sizes["peer_time_limit"] *= 3
    return sizes


@experiment(
    id="durable.frameworks",
    seed_file=SEED_FILE,
    exercise="Hard 1, Hard 2",
    title="A PydanticAI agent on surefoot, DBOS and Temporal: workers SIGKILLed at random",
    real_llm=True,
)
def frameworks(ctx: LabContext) -> LabResult:
    full = os.environ.get("SUREFOOT_LAB_FULL") == "1"
    z = _sizes(ctx, full)
    delay = 0.1
    load = [round(x, 1) for x in os.getloadavg()]
    params: dict[str, Any] = {
        **z,
        "workers": 2,
        "kill_after_events": [3, 9],
        "delay_s": delay,
        "engines": {
            "surefoot": "SurefootDurability, SQLite journal, `surefoot worker`, lease 2 s",
            "dbos": "DBOSDurability, SQLite system database, a DBOS queue, workers restarted "
            "under their executor ids",
            "temporal": f"TemporalDurability, dev server on loopback, heartbeat "
            f"{TEMPORAL_HEARTBEAT_S:g} s, sticky queue {TEMPORAL_STICKY_S:g} s",
        },
        "concurrently": True,
        "load_average_at_start": load,
        "full": full,
    }
    peer = KillSchedule(ctx.seed, (3, 9), z["peer_kills"], z["peer_time_limit"])
    jobs: dict[str, Callable[[], dict[str, Any]]] = {
        "surefoot": lambda: kill_runs(
            ctx.workdir,
            runs=z["runs"],
            seed=ctx.seed,
            max_kills=z["max_kills"],
            time_limit=z["time_limit"],
            delay=delay,
            llm=ctx.llm,
        ),
        "dbos": lambda: _peer(
            dbos_missing(),
            lambda: dbos_kill_runs(
                ctx.workdir, runs=z["peer_runs"], schedule=peer, delay=delay, llm=ctx.llm
            ),
        ),
        "temporal": lambda: _peer(
            temporal_missing(),
            lambda: temporal_kill_runs(
                ctx.workdir, runs=z["peer_runs"], schedule=peer, delay=delay, llm=ctx.llm
            ),
        ),
    }
    t0 = time.monotonic()
    # the three engines at once, each its own workers and kills: the lab stays fast, and
    # each engine runs on the same loaded machine as the others
    with ThreadPoolExecutor(len(jobs)) as pool:
        futures = {name: pool.submit(job) for name, job in jobs.items()}
        results = {name: f.result() for name, f in futures.items()}
    params["seconds"] = round(time.monotonic() - t0, 1)
    starts = ", ".join(f"{n} {r['startup_s']} s" for n, r in results.items() if "startup_s" in r)
    model = ctx.llm.label if ctx.llm is not None else FUNCTION_MODEL
    if ctx.llm is None and ctx.llm_absent:
        model = f"{FUNCTION_MODEL}; --llm local asked for, but {ctx.llm_absent}"
    t = Table(
        "The same PydanticAI agent on three engines at once, 2 worker processes each, SIGKILLed "
        "at seeded random moments while calling the model or a tool and restarted under their "
        "ids; a run without a repeat: 3 model requests, 2 lookups, 1 booking",
        [
            "engine",
            "completed",
            "model calls/run",
            "repeated model calls",
            "repeated after recorded",
            "lookups/run",
            "booking requests",
            "duplicate bookings",
            "kills",
            "seconds",
        ],
        note=f"model: {model}. Load average at start {load[0]}. Seconds: from the first model "
        f"request to the last run's end (the worker processes started before that, in {starts}). "
        "'Repeated after recorded': "
        "model requests received after the engine had recorded that response (surefoot's "
        "journal, DBOS's steps, Temporal's history). surefoot keys the booking itself; for DBOS "
        "and Temporal the tool builds the key by hand (run and tool call id), so a booking "
        "request beyond one per run is a tool call run again that a service without the key "
        f"would have applied twice. Runs per engine: surefoot {z['runs']}, DBOS and Temporal "
        f"{z['peer_runs']}; at most {z['max_kills']} / {z['peer_kills']} kills.",
    )
    for name in ("surefoot", "dbos", "temporal"):
        _row(t, name, results[name])
    r = results["surefoot"]
    answer = (
        "; ".join(_sentence(n, results[n]) for n in ("surefoot", "dbos", "temporal"))
        + f" (the three at once, {params['seconds']} s in all, load {load[0]})."
        " surefoot journals each model request and each tool call: what ran again was in"
        " flight at a kill, and its booking key, from the run and the tool call id, is the same"
        " on every resume. DBOSDurability journals model requests but not tool calls (a tool is"
        " a step only if the user makes it one), so a recovered run calls its tools again."
        " TemporalDurability makes both activities; an attempt whose worker died (or missed its"
        " heartbeat) runs again."
    )
    if ctx.llm is None and ctx.llm_absent:
        answer += (
            f" --llm local was asked for, but {ctx.llm_absent}: these are the FunctionModel's "
            "figures."
        )
    facts = {**r, "engines": results}
    return LabResult(tables=[t], facts=facts, answer=answer, params=params, model=model)
