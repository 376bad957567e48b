"""Seed 002, Hard 2: the 7-step agent ported to existing durable engines, under kill -9.

The port the seed asks for runs on a real Temporal dev server (``_temporal_rows``; the
workflow is the orchestration, the calls are activities, the approval is a signal), and a
second port on DBOS (same model: workflow = orchestration, steps = activities) on a SQLite
system database. Each runs in a real worker process, SIGKILLed mid-run at each step from
2 to 6 and restarted; Temporal's server is also SIGKILLed once and restarted on its file.
What the fake services received is counted in surefoot's ledger, outside the worker, for
both ports and for surefoot's own agent killed at the same point
(``chaos.kill_mid_run``), side by side.
"""

from __future__ import annotations

import random
import time
from typing import Any

from surefoot.durable import App
from surefoot.errors import MissingExtraError

from .._registry import FAKE_MODEL, NO_MODEL, LabContext, LabResult, Table, experiment
from ..agent import STEPS, AgentServices, Ledger, build_agent, start_agent
from ..agent.chaos import ChaosConfig, WorkerProcesses, kill_mid_run
from ..agent.port_dbos import PortKillReport, dbos_module, kill_dbos_mid_run
from ..agent.port_temporal import DEFAULTS, TUNED
from ._temporal_rows import skipped_reason, temporal_plan, temporal_rows, temporal_summary

SEED_FILE = "002_91829255f3db9460.txt"
KILL_POINTS = STEPS[1:6]
"""Steps 2..6 (search … approve): the step in flight when the worker is killed."""
REPLY_KILLS = ("summarize", "publish")
"""Steps killed after the service answered but before the engine recorded them."""
STEP_NAMES = {"signal:approve": "approve"}
"""surefoot's journal names mapped to the agent's step names."""


def _dbos_row(
    ctx: LabContext,
    kill_at: str,
    window: str,
    latency: float,
    *,
    replacement: str | None = None,
    wait: float = 0.0,
    name: str = "",
) -> dict[str, Any]:
    name = f"port-dbos{name and '-' + name}-{kill_at}-{window}" + (
        "-replaced" if replacement else ""
    )
    r: PortKillReport = kill_dbos_mid_run(
        ctx.workdir / f"{name}.db",
        ctx.workdir / f"{name}-ledger.db",
        kill_at=kill_at,
        window=window,
        run_id=name,
        seed=ctx.seed,
        latency=latency,
        reply_latency=0.0 if window == "request" else 3 * latency,
        restart_as=replacement,
        orphan_wait=wait,
    )
    return {
        "replacement": None
        if replacement is None
        else {
            "waited_s": wait,
            "steps_while_replacement_ran": r.orphaned_steps,
            "status_while_replacement_ran": r.orphaned_status,
            "status_after_original_id_restarted": r.status,
            "repeated_for_journalled_steps": r.repeated_for_journalled,
        },
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


def _surefoot_row(ctx: LabContext, kill_at: str, latency: float, name: str = "") -> dict[str, Any]:
    name = f"port-surefoot{name and '-' + name}-{kill_at}"
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


def _until(cond: Any, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.01)
    return bool(cond())


def _surefoot_replacement(ctx: LabContext, latency: float, lease: float) -> dict[str, Any]:
    """Kill worker w1 mid-run; start a worker with another id, w2; time its takeover."""
    name = "port-surefoot-replacement"
    cfg = ChaosConfig(
        db=ctx.sqlite_url(f"{name}.db"),
        ledger=str(ctx.workdir / f"{name}-ledger.db"),
        seed=ctx.seed,
        latency=latency,
        reply_latency=0.0,
        lease=lease,
        logdir=str(ctx.workdir),
    )
    app = App(cfg.db, lease=lease, worker_id="port-harness")
    ledger = Ledger(cfg.ledger)
    wf = build_agent(app, AgentServices(ledger))["1"]
    start_agent(app, wf, "why is the sky blue?", run_id=name, enqueue=True)
    workers = WorkerProcesses(cfg, ctx.workdir)

    def done() -> set[str]:
        return {st.name for st in app.show(name).steps if st.status == "done"}

    try:
        workers.start("w1")
        _until(lambda: {"plan", "search"} <= done(), 60)
        time.sleep(latency / 2)
        workers.kill("w1")
        t0 = time.monotonic()
        workers.start("w2")
        _until(lambda: app.show(name).run.status == "succeeded", 60)
        took = time.monotonic() - t0
    finally:
        workers.stop_all()
    status = app.show(name).run.status
    per_step = dict(ledger.totals([name]).calls_by_step)
    app.close()
    ledger.close()
    return {
        "lease_s": lease,
        "status": status,
        "finished_by_other_worker_in_s": round(took, 2),
        "calls_per_step": per_step,
    }


def _row_order(row: tuple[str, str, dict[str, Any]]) -> tuple[int, int, int]:
    """Rows killed at the same step side by side: request kills, reply kills, the rest."""
    engine, when, _ = row
    group = 0 if "(request)" in when or "(waiting)" in when else 1 if "(reply)" in when else 3
    if "[defaults]" in when:
        group = 2
    rank = {"dbos": 0, "surefoot": 1, "temporal": 2}[engine]
    return (group, STEPS.index(when.split()[0]), rank)


def _temporal_times(rows: dict[str, dict[str, Any]]) -> Table:
    """Temporal's resumption times, with and without heartbeats and a short sticky timeout."""
    t = Table(
        "Temporal: seconds from the SIGKILL (the worker restarted at once) to the run going on",
        [
            "kill during",
            "killed",
            "tuning",
            "in-flight step attempts",
            "kill -> next attempt starts",
            "kill -> the step after starts",
            "kill -> result",
        ],
    )

    def s(v: float | None) -> Any:
        return "-" if v is None else round(v, 2)

    for when, r in rows.items():
        t.add(
            when.split(" [")[0],
            r["target"],
            r["tuning"],
            "-" if r["in_flight"] == "approve" else r["in_flight_attempts"],
            s(r["resumed_in_s"]),
            s(r["next_step_in_s"]),
            s(r["result_in_s"]),
        )
    return t


def _replace(yes: bool, wait: float) -> dict[str, Any]:
    return {"replacement": "replacement-host", "wait": wait} if yes else {}


def _skipped(exc: MissingExtraError) -> LabResult:
    t = Table("DBOS port of the agent", ["engine", "result"])
    t.add("dbos", f"skipped: {exc}")
    return LabResult(
        tables=[t],
        facts={"skipped": str(exc)},
        answer=f"Not measured: the DBOS port needs the dbos package ({exc}).",
        model=NO_MODEL,
    )


def _temporal_answer(t: dict[str, Any], skipped: str | None) -> str:
    """Temporal's timings and server kill, formatted from the summary of its rows."""
    if skipped is not None:
        return f" Temporal: not measured ({skipped})."
    med, n = t["resumed_in_s_median"], t["resumed_kills"]
    times = ", ".join(
        f"{med[x.name]} s over {n[x.name]} kills with {x.name}"
        for x in (TUNED, DEFAULTS)
        if med[x.name] is not None
    )
    server = (
        "; its server SIGKILLed mid-activity and restarted on its file: the run "
        + ("completed" if t["server_kill_succeeded"] else "did not complete")
        + f", next activity {t['server_resumed_in_s']:.2f} s after the kill"
        if t["server_resumed_in_s"] is not None
        else ""
    )
    return (
        f" On Temporal the activity in flight ran again in {t['in_flight_reran']} of "
        f"{t['in_flight_rows']} kills (attempt 2); kill to the next activity attempt (after "
        f"the approval wait: publish), median {times}{server}."
    )


def _port_answer(
    rows: list[tuple[str, str, dict[str, Any]]],
    d_rep: dict[str, Any],
    s_rep: dict[str, Any],
    t_sum: dict[str, Any],
    t_skipped: str | None,
) -> str:
    """Say what the kill rows and the replacement worker showed, formatted from them."""
    parts = []
    engines = ("temporal", "dbos", "surefoot") if t_skipped is None else ("dbos", "surefoot")
    for engine in engines:
        mine = [r for e, _, r in rows if e == engine]
        ok = sum(1 for r in mine if r["succeeded"])
        rep = sum(r["repeated_for_journalled_steps"] for r in mine)
        dup = sum(r["duplicate_posts"] for r in mine)
        parts.append(
            f"{engine}: {ok} of {len(mine)} killed runs finished after a restart, with {rep} "
            "repeated calls for steps already recorded and "
            + ("no duplicate post" if dup == 0 else f"{dup} duplicate posts")
        )
    return (
        "Ported to Temporal (a dev server) and to DBOS (model, tool and publish calls in "
        "activities / steps, orchestration in the workflow; the model is the seeded FakeLLM) "
        "and SIGKILLed mid-run: "
        + "; ".join(parts)
        + ". The step in flight may run again in every engine (at-least-once calls)."
        + _temporal_answer(t_sum, t_skipped)
        + " A worker under "
        f"a new id: DBOS's run stayed {d_rep['status_while_replacement_ran']} "
        f"({d_rep['steps_while_replacement_ran']} steps recorded) until a worker under the "
        f"dead one's executor id was started; surefoot's run ended {s_rep['status']} on the "
        "other worker after the lease expired."
    )


REAL_KILLS = (("summarize", "request"), ("summarize", "reply"))
"""The real-model slice: the worker killed while the model call is in flight, and after
the model answered but before the engine recorded it (the call that is paid twice)."""


def _real_rows(ctx: LabContext) -> tuple[Table, dict[str, Any], str]:
    """DBOS and surefoot rows with the agent's model steps on ``ctx.llm`` (bounded)."""
    assert ctx.llm is not None
    t = Table(
        f"On the real model {ctx.llm.model}: one run per row, its worker SIGKILLed with the "
        "summarize step in flight (request) or after the model answered (reply)",
        [
            "engine",
            "kill during",
            "status",
            "model calls",
            "repeated for recorded steps",
            "in-flight step calls",
            "tokens",
            "duplicate posts",
            "seconds",
        ],
    )
    facts: dict[str, Any] = {}
    started = time.perf_counter()
    with ctx.llm.exported():
        for kill_at, window in REAL_KILLS:
            engines = ("dbos", "surefoot") if window == "request" else ("dbos",)
            for engine in engines:
                t0 = time.perf_counter()
                if engine == "dbos":
                    r = _dbos_row(ctx, kill_at, window, 0.05, name="llm")
                    run = f"port-dbos-llm-{kill_at}-{window}"
                else:
                    r = _surefoot_row(ctx, kill_at, 0.05, name="llm")
                    run = f"port-surefoot-llm-{kill_at}"
                r.pop("replacement", None)
                ledger = Ledger(str(ctx.workdir / f"{run}-ledger.db"))
                r["tokens"] = ledger.totals([run]).tokens
                ledger.close()
                secs = time.perf_counter() - t0
                t.add(
                    engine,
                    f"{kill_at} ({window})",
                    r["status"],
                    r["model_calls"],
                    r["repeated_for_journalled_steps"],
                    f"{r['in_flight']}={r['in_flight_calls']}",
                    r["tokens"],
                    r["duplicate_posts"],
                    round(secs, 1),
                )
                facts[f"{engine} {kill_at} ({window})"] = {**r, "seconds": secs}
    total = time.perf_counter() - started
    rows = list(facts.values())
    sentence = (
        f"On the real model {ctx.llm.model} ({len(rows)} runs, summarize killed in flight and "
        f"after its reply): {sum(r['model_calls'] for r in rows)} model calls, "
        f"{sum(r['repeated_for_journalled_steps'] for r in rows)} repeated for steps already "
        f"recorded, {sum(r['duplicate_posts'] for r in rows)} duplicate posts, "
        f"{sum(r['succeeded'] for r in rows)}/{len(rows)} runs succeeded, {total:.0f} s."
    )
    facts["seconds"] = total
    return t, facts, sentence


@experiment(
    id="durable.port",
    seed_file=SEED_FILE,
    exercise="Hard 2",
    title="The agent ported to Temporal and DBOS: kill -9 mid-run repeats no completed LLM call",
    real_llm=True,
)
def port(ctx: LabContext) -> LabResult:
    try:
        dbos_module()
    except MissingExtraError as exc:
        return _skipped(exc)
    latency = 0.05 if ctx.quick else 0.2
    wait, lease = (1.0, 1.0) if ctx.quick else (5.0, 2.0)
    rng = random.Random(ctx.seed)
    points = (rng.choice(KILL_POINTS),) if ctx.quick else KILL_POINTS
    replies = REPLY_KILLS
    t_skipped = skipped_reason()
    t_plan = [] if t_skipped is not None else temporal_plan(ctx, points)
    total = 2 * len(points) + len(replies) + len(t_plan)
    t = Table(
        "One agent run per row; its worker (once: Temporal's server) SIGKILLed with the step "
        "in flight, then restarted",
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
    # the replacement-machine case (below) runs separately, except in quick mode, where the
    # first kill point's run doubles as it: a worker under another id first, then the old
    d_rep: dict[str, Any] | None = None
    for k in points:
        d = _dbos_row(ctx, k, "request", latency, **_replace(ctx.quick and d_rep is None, wait))
        d_rep = d.pop("replacement") or d_rep
        rows.append(("dbos", f"{k} (request)", d))
        ctx.progress(len(rows), total)
        rows.append(("surefoot", f"{k} (request)", _surefoot_row(ctx, k, latency)))
        ctx.progress(len(rows), total)
    for k in replies:
        rows.append(("dbos", f"{k} (reply)", _dbos_row(ctx, k, "reply", latency)))
        ctx.progress(len(rows), total)
    if d_rep is None:
        d_rep = _dbos_row(ctx, "read", "request", latency, **_replace(True, wait))["replacement"]
        assert d_rep is not None
    s_rep = _surefoot_replacement(ctx, latency, lease)
    done = [len(rows)]

    def tick() -> None:
        done[0] += 1
        ctx.progress(done[0], total)

    t_rows, t_server = temporal_rows(ctx, t_plan, latency, tick) if t_plan else ({}, {})
    rows += [("temporal", when, r) for when, r in t_rows.items()]
    rows.sort(key=_row_order)
    ctx.progress(total, total)
    t2 = Table(
        "The worker's machine never comes back: a worker under another id is started instead",
        ["engine", "what the replacement worker did", "status"],
    )
    t2.add(
        "dbos",
        f"recorded {d_rep['steps_while_replacement_ran']} steps in {wait:g} s after its launch "
        "(launch recovers only its own executor id's runs)",
        f"{d_rep['status_while_replacement_ran']}; once a worker under the dead one's "
        f"executor id was started: {d_rep['status_after_original_id_restarted']}",
    )
    t2.add(
        "surefoot",
        f"took the run over after its lease expired ({s_rep['lease_s']:g} s lease) and "
        f"finished it {s_rep['finished_by_other_worker_in_s']} s after starting",
        s_rep["status"],
    )
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
    t_sum = temporal_summary(t_rows)
    facts: dict[str, Any] = {
        "kills": len(rows),
        "dbos": {when: r for e, when, r in rows if e == "dbos"},
        "surefoot": {when: r for e, when, r in rows if e == "surefoot"},
        "dbos_repeated_for_journalled_steps": sum(
            r["repeated_for_journalled_steps"] for r in dbos_rows
        ),
        "dbos_duplicate_posts": sum(r["duplicate_posts"] for r in dbos_rows),
        "dbos_all_succeeded": all(r["succeeded"] for r in dbos_rows),
        "replacement": {"dbos": d_rep, "surefoot": s_rep},
        "temporal": t_rows,
        "temporal_summary": t_sum,
        "temporal_server": t_server,
        "temporal_skipped": t_skipped,
    }
    tables = [t, _temporal_times(t_rows), t2] if t_rows else [t, t2]
    answer = _port_answer(rows, d_rep, s_rep, t_sum, t_skipped)
    model = FAKE_MODEL
    if ctx.llm is not None:
        rt, facts["llm"], sentence = _real_rows(ctx)
        tables.append(rt)
        answer = f"{answer} {sentence}"
        model = f"{model}, and {ctx.llm.label}"
    return LabResult(
        tables=tables,
        facts=facts,
        answer=answer,
        model=model,
        params={
            "latency_s": latency,
            "kill_points": list(points),
            "reply_kills": list(replies),
            "engines": [
                "temporal (dev server 1.9.1, SQLite file, WAL)",
                "dbos (SQLite system database)",
                "surefoot (SQLite journal)",
            ],
            "temporal_runs": [list(p) for p in t_plan],
            "temporal_tunings": {
                x.name: {"start_to_close_s": x.start_to_close_s, "heartbeat_s": x.heartbeat_s}
                for x in (TUNED, DEFAULTS)
            },
        },
    )
