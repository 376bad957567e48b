"""Seed 002, Hard 2: the 7-step agent ported to an existing durable engine, under kill -9.

The seed asks for a Temporal port; Temporal needs a server this machine cannot start, so
the port runs on DBOS (same model: workflow = orchestration, steps = activities) in a
real worker process on a SQLite system database. The worker is SIGKILLed mid-run at each
step from 2 to 6 and restarted; DBOS's launch recovers the run. What the fake services
received is counted in surefoot's ledger, outside the worker, for the DBOS port and for
surefoot's own agent killed at the same point (``chaos.kill_mid_run``), side by side.
"""

from __future__ import annotations

import random
from typing import Any

from ..durable.agent import STEPS, Ledger
from ..durable.agent.chaos import ChaosConfig, kill_mid_run
from ..durable.agent.port_dbos import PortKillReport, dbos_module, kill_dbos_mid_run
from ..errors import MissingExtraError
from ._registry import LabContext, LabResult, Table, experiment

SEED_FILE = "002_91829255f3db9460.txt"
KILL_POINTS = STEPS[1:6]
"""Steps 2..6 (search … approve): the step in flight when the worker is killed."""
REPLY_KILLS = ("summarize", "publish")
"""Steps killed after the service answered but before the engine recorded them."""
STEP_NAMES = {"signal:approve": "approve"}
"""surefoot's journal names mapped to the agent's step names."""


def _dbos_row(ctx: LabContext, kill_at: str, window: str, latency: float) -> dict[str, Any]:
    name = f"port-dbos-{kill_at}-{window}"
    r: PortKillReport = kill_dbos_mid_run(
        ctx.workdir / f"{name}.db",
        ctx.workdir / f"{name}-ledger.db",
        kill_at=kill_at,
        window=window,
        run_id=name,
        seed=ctx.seed,
        latency=latency,
        reply_latency=0.0 if window == "request" else 3 * latency,
    )
    return {
        "status": r.status,
        "succeeded": r.status == "SUCCESS",
        "journalled_before_kill": r.journalled_before_kill,
        "in_flight": r.in_flight,
        "calls_per_step": r.calls_per_step,
        "model_calls": r.model_calls,
        "repeated_for_journalled_steps": r.repeated_for_journalled,
        "repeated_after_journal": r.repeated_after_journal,
        "in_flight_calls": r.in_flight_calls,
        "duplicate_posts": r.duplicate_posts,
        "posts": r.posts,
        "resumed_in_s": r.recovered_in_s,
    }


def _surefoot_row(ctx: LabContext, kill_at: str, latency: float) -> dict[str, Any]:
    name = f"port-surefoot-{kill_at}"
    cfg = ChaosConfig(
        db=ctx.sqlite_url(f"{name}.db"),
        ledger=str(ctx.workdir / f"{name}-ledger.db"),
        seed=ctx.seed,
        latency=latency,
        reply_latency=0.0,
        lease=2.0,
        logdir=str(ctx.workdir),
    )
    r = kill_mid_run(cfg, after=STEPS[: STEPS.index(kill_at)], run_id=name)
    journalled = [STEP_NAMES.get(s, s) for s in r.journalled_before_kill]
    in_flight = next((s for s in STEPS if s not in journalled), "-")
    per = r.calls_per_step
    ledger = Ledger(cfg.ledger)
    posts = ledger.posts(name)
    ledger.close()
    return {
        "status": r.status,
        "succeeded": r.status == "succeeded",
        "journalled_before_kill": journalled,
        "in_flight": in_flight,
        "calls_per_step": per,
        "model_calls": r.model_calls,
        "repeated_for_journalled_steps": sum(max(per.get(s, 1) - 1, 0) for s in journalled),
        "repeated_after_journal": r.repeated_after_journal,
        "in_flight_calls": per.get(in_flight, 0),
        "duplicate_posts": len(posts) - len({p["channel"] for p in posts}),
        "posts": len(posts),
        "resumed_in_s": r.next_step_s,
    }


def _skipped(exc: MissingExtraError) -> LabResult:
    t = Table("DBOS port of the agent", ["engine", "result"])
    t.add("dbos", f"skipped: {exc}")
    return LabResult(
        tables=[t],
        facts={"skipped": str(exc)},
        answer=f"Not measured: the DBOS port needs the dbos package ({exc}).",
    )


@experiment(
    id="durable.port",
    seed_file=SEED_FILE,
    exercise="Hard 2",
    title="The agent ported to DBOS: kill -9 mid-run repeats no completed step's LLM call",
)
def port(ctx: LabContext) -> LabResult:
    try:
        dbos_module()
    except MissingExtraError as exc:
        return _skipped(exc)
    latency = 0.1 if ctx.quick else 0.2
    rng = random.Random(ctx.seed)
    points = (rng.choice(KILL_POINTS),) if ctx.quick else KILL_POINTS
    replies = REPLY_KILLS
    total = 2 * len(points) + len(replies)
    t = Table(
        "One agent run per row; its worker SIGKILLed with the step in flight, then restarted",
        [
            "engine",
            "kill during",
            "status",
            "recorded before kill",
            "calls per step (ledger)",
            "model calls",
            "repeated for recorded steps",
            "in-flight step calls",
            "duplicate posts",
            "restart -> next step (s)",
        ],
    )
    rows: list[tuple[str, str, dict[str, Any]]] = []
    for k in points:
        rows.append(("dbos", f"{k} (request)", _dbos_row(ctx, k, "request", latency)))
        ctx.progress(len(rows), total)
        rows.append(("surefoot", f"{k} (request)", _surefoot_row(ctx, k, latency)))
        ctx.progress(len(rows), total)
    for k in replies:
        rows.append(("dbos", f"{k} (reply)", _dbos_row(ctx, k, "reply", latency)))
        ctx.progress(len(rows), total)
    for engine, when, r in rows:
        t.add(
            engine,
            when,
            r["status"],
            ", ".join(r["journalled_before_kill"]) or "-",
            " ".join(f"{k}={v}" for k, v in r["calls_per_step"].items()),
            r["model_calls"],
            r["repeated_for_journalled_steps"],
            f"{r['in_flight']}={r['in_flight_calls']}",
            r["duplicate_posts"],
            "-" if r["resumed_in_s"] is None else round(r["resumed_in_s"], 2),
        )
    dbos_rows = [r for e, _, r in rows if e == "dbos"]
    facts: dict[str, Any] = {
        "kills": len(rows),
        "dbos": {when: r for e, when, r in rows if e == "dbos"},
        "surefoot": {when: r for e, when, r in rows if e == "surefoot"},
        "dbos_repeated_for_journalled_steps": sum(
            r["repeated_for_journalled_steps"] for r in dbos_rows
        ),
        "dbos_duplicate_posts": sum(r["duplicate_posts"] for r in dbos_rows),
        "dbos_all_succeeded": all(r["succeeded"] for r in dbos_rows),
    }
    return LabResult(
        tables=[t],
        facts=facts,
        answer=(
            "Ported to DBOS (model, tool and publish calls in steps, orchestration in the "
            "workflow), a worker SIGKILLed mid-run and restarted finishes the run with "
            f"{facts['dbos_repeated_for_journalled_steps']} repeated calls for steps DBOS had "
            "recorded, like surefoot's agent. The step in flight runs again in both; "
            "killed after its service answered, its call is paid twice (at-least-once "
            "steps), and the publish key (workflow id + step id) keeps the post single."
        ),
        params={
            "latency_s": latency,
            "kill_points": list(points),
            "reply_kills": list(replies),
            "engines": ["dbos (SQLite system database)", "surefoot (SQLite journal)"],
        },
    )
