"""Durable experiments, Medium 2 to Hard 3: versions, timers, chaos with real workers, sagas."""

from __future__ import annotations

import threading
import time
from typing import Any

from surefoot.clock import Clock, FakeClock, SystemClock
from surefoot.durable import App, Worker
from surefoot.errors import RunFailedError

from .._registry import FAKE_MODEL, LabContext, LabResult, Table, experiment
from ..agent import AgentServices, approve, build_agent, start_agent
from ..agent.chaos import ChaosConfig, run_chaos
from ._common import SEED_FILE, agent_on_journal, tasks_on, wait_until


@experiment(
    id="durable.versions",
    seed_file=SEED_FILE,
    exercise="Medium 2",
    title="Runs finish on the version they began with; stranded and mismatched runs are visible",
)
def versions(ctx: LabContext) -> LabResult:
    clock = FakeClock()
    url = ctx.sqlite_url("versions.db")
    ledger = str(ctx.workdir / "versions-ledger.db")

    def deploy(wid: str, vs: tuple[str, ...], edited: bool = False) -> tuple[App, Any]:
        app = App(url, clock=clock, poll=0.01, worker_id=wid)
        return app, build_agent(
            app, AgentServices(ledger, clock=clock), versions=vs, edited_v1=edited
        )

    def suspended(app: App, rid: str) -> bool:
        return wait_until(lambda: app.show(rid).run.status == "sleeping", 30)

    d1, w1 = deploy("deploy-1", ("1",))
    start_agent(d1, w1["1"], "old question", run_id="r-old", auto_approve=False)
    suspended(d1, "r-old")
    d1.close()
    d2, w2 = deploy("deploy-2", ("1", "2"))
    start_agent(d2, w2["2"], "new question", run_id="r-new").result(timeout=30)
    approve(d2, "r-old")
    d2.resume("r-old").result(timeout=30)
    t = Table("Runs across a deploy of version 2", ["run", "version", "status", "steps"])
    for rid in ("r-old", "r-new"):
        det = d2.show(rid)
        t.add(rid, det.run.version, det.run.status, " ".join(s.name for s in det.steps))
    # a v1 run that only a v2-only worker could pick up
    start_agent(d2, w2["1"], "waiting question", run_id="r-stranded", auto_approve=False)
    suspended(d2, "r-stranded")
    d3, _ = deploy("deploy-3", ("2",))
    approve(d3, "r-stranded")
    picked = Worker(d3).run_once(timeout=10)
    stranded = d3.show("r-stranded")
    # the same label, edited in place: replay meets another step
    start_agent(d2, w2["1"], "edited question", run_id="r-edited", auto_approve=False)
    suspended(d2, "r-edited")
    d4, _ = deploy("deploy-4", ("1",), edited=True)
    approve(d4, "r-edited")
    try:
        d4.resume("r-edited").result(timeout=30)
        mismatch: Any = None
    except RunFailedError as exc:
        mismatch = exc.error
    edited = d4.show("r-edited")
    t2 = Table(
        "Runs no worker can finish as they are",
        ["run", "status", "stranded", "what the journal says"],
    )
    t2.add(
        "r-stranded",
        stranded.run.status,
        stranded.stranded,
        f"version {stranded.run.version}; the v2-only worker claimed {picked} runs",
    )
    t2.add("r-edited", edited.run.status, edited.stranded, (mismatch or {}).get("message", "-"))
    for a in (d2, d3, d4):
        a.close()
    return LabResult(
        tables=[t, t2],
        facts={
            "r_old_steps": t.rows[0][3].split(),
            "r_new_steps": t.rows[1][3].split(),
            "versions": {r[0]: r[1] for r in t.rows},
            "statuses": {r[0]: r[2] for r in t.rows},
            "stranded_status": stranded.run.status,
            "stranded": stranded.stranded,
            "v2_worker_claimed": picked,
            "edited_status": edited.run.status,
            "mismatch": mismatch,
        },
        answer=_versions_answer(
            t, stranded.stranded, stranded.run.status, picked, edited, mismatch
        ),
    )


def _versions_answer(
    t: Table, stranded: bool, stranded_status: str, picked: int, edited: Any, mismatch: Any
) -> str:
    """Say what the versions table shows, read from its rows, not assumed."""
    (_, v_old, st_old, steps_old), (_, v_new, st_new, steps_new) = t.rows[0], t.rows[1]
    mtype = str((mismatch or {}).get("type", "no error")).rsplit(".", 1)[-1]
    return (
        f"r-old began on version 1 and ended {st_old} on version {v_old} after version 2 "
        f"was deployed ({'with' if 'fact_check' in steps_old else 'without'} fact_check); "
        f"r-new ran version {v_new} and ended {st_new} "
        f"({'with' if 'fact_check' in steps_new else 'without'} fact_check). A version-1 run "
        f"offered only to a v2 worker was claimed {picked} times, stayed {stranded_status} "
        f"and is {'flagged' if stranded else 'not flagged'} stranded. Code edited under the "
        f"same label ended {edited.run.status} with {mtype}."
    )


@experiment(
    id="durable.timers",
    seed_file=SEED_FILE,
    exercise="Medium 3",
    title="Runs suspended at a durable timer hold no worker, thread or coroutine",
)
def timers(ctx: LabContext) -> LabResult:
    n = 20 if ctx.quick else 200
    delay = 1.0
    clock: Clock = FakeClock() if ctx.quick else SystemClock()
    app = App(ctx.sqlite_url("timers.db"), clock=clock, poll=0.01, worker_id="lab-timers")
    services = AgentServices(str(ctx.workdir / "timers-ledger.db"), clock=clock)

    @app.step
    async def follow_up(question: str) -> str:
        return await services.ask(question, "follow_up", f"Any news on {question}?")

    @app.workflow
    async def remind(question: str) -> str:
        await app.sleep(delay)
        return await follow_up(question)

    for i in range(n):
        app.enqueue(remind, f"q{i}", run_id=f"t{i}")
    worker = Worker(app, concurrency=n)
    first = worker.run_once(timeout=60)  # each run starts, reaches the timer and lets go
    threads_sleeping = threading.active_count()
    sleeping = app.list_runs(status="sleeping", limit=n)
    held = sum(1 for r in sleeping if r.owner is not None)
    tasks = tasks_on(app)
    in_memory = len(app.executor.active)
    wake = max(r.wake_at or 0.0 for r in sleeping) if sleeping else 0.0
    succeeded_sleeping = len(app.list_runs(status="succeeded", limit=n))
    early = worker.run_once(timeout=10)  # before the deadline: nothing to claim
    sleeping_early = len(app.list_runs(status="sleeping", limit=n))
    in_memory_early = len(app.executor.active)
    tasks_early = tasks_on(app)
    threads_early = threading.active_count()
    succeeded_early = len(app.list_runs(status="succeeded", limit=n))
    if isinstance(clock, FakeClock):
        clock.advance(delay)
    else:
        time.sleep(max(wake - clock.now(), 0.0))
    claimed = worker.run_once(timeout=60)
    resumed_at = clock.now()
    done = app.list_runs(status="succeeded", limit=n)
    t = Table(
        f"{n} runs, each `await app.sleep({delay})` then one model call "
        f"({'FakeClock' if ctx.quick else 'real seconds'})",
        [
            "moment",
            "sleeping runs",
            "runs in memory",
            "coroutines on loop",
            "threads",
            "runs claimed",
            "succeeded",
        ],
    )
    t.add(
        "all suspended at the timer",
        len(sleeping),
        in_memory,
        tasks,
        threads_sleeping,
        first,
        succeeded_sleeping,
    )
    t.add(
        "before the deadline",
        sleeping_early,
        in_memory_early,
        tasks_early,
        threads_early,
        early,
        succeeded_early,
    )
    t.add(
        "after the deadline",
        len(app.list_runs(status="sleeping", limit=n)),
        len(app.executor.active),
        tasks_on(app),
        threading.active_count(),
        claimed,
        len(done),
    )
    app.close()
    services.ledger.close()
    facts: dict[str, Any] = {
        "runs": n,
        "claimed_to_start": first,
        "sleeping": len(sleeping),
        "lease_held_while_sleeping": held,
        "in_memory_while_sleeping": in_memory,
        "tasks_while_sleeping": tasks,
        "succeeded_while_sleeping": succeeded_sleeping,
        "in_memory_before_deadline": in_memory_early,
        "tasks_before_deadline": tasks_early,
        "claimed_before_deadline": early,
        "succeeded_before_deadline": succeeded_early,
        "claimed_after_deadline": claimed,
        "succeeded": len(done),
        "late_by_s": max(resumed_at - wake, 0.0),
    }
    held_nothing = held == 0 and in_memory == 0 and tasks == 0
    return LabResult(
        tables=[t],
        facts=facts,
        answer=(
            f"{len(sleeping)} of {n} runs journalled their wake time and slept; while they "
            + (
                "slept they held no lease, no coroutine and no run in memory"
                if held_nothing
                else f"slept they held {held} leases, {tasks} coroutines and {in_memory} "
                "runs in memory"
            )
            + f". Before the deadline the worker claimed {early} runs; once the clock "
            f"passed it, one claim round took {claimed} and {len(done)} of {n} succeeded."
        ),
        params={"delay_s": delay, "clock": type(clock).__name__},
    )


def _chaos_config(ctx: LabContext, name: str, real: bool) -> ChaosConfig:
    if real:  # bounded: every agent step that asks the model is a real call
        return ChaosConfig(
            db=ctx.sqlite_url(f"{name}.db"),
            ledger=str(ctx.workdir / f"{name}-ledger.db"),
            runs=4,
            workers=2,
            concurrency=2,
            latency=0.0,
            reply_latency=0.0,
            seed=ctx.seed,
            kill_every=(1.0, 3.0),
            max_kills=6,
            kill_in_flight_first=True,
            time_limit=300.0,
            lease=10.0,  # a model call may take seconds on a loaded machine
            logdir=str(ctx.workdir),
        )
    return ChaosConfig(
        db=ctx.db or ctx.sqlite_url(f"{name}.db"),
        ledger=str(ctx.workdir / f"{name}-ledger.db"),
        runs=10 if ctx.quick else 200,
        workers=2,
        concurrency=4 if ctx.quick else 16,
        latency=0.03 if ctx.quick else 0.02,
        reply_latency=0.03 if ctx.quick else 0.02,
        seed=ctx.seed,
        kill_every=(0.2, 0.6),
        max_kills=6 if ctx.quick else 60,
        kill_in_flight_first=ctx.quick,  # a quick run always sees a kill mid-run
        time_limit=30.0 if ctx.quick else 50.0,
        logdir=str(ctx.workdir),
    )


def _chaos_table(title: str, model: str, rep: Any, rows: Table | None = None) -> Table:
    t = rows or Table(
        title,
        [
            "model",
            "strategy",
            "completed",
            "model calls/run",
            "tokens/run",
            "USD/run",
            "duplicate posts",
            "repeated model calls",
            "repeated after journalled",
            "SIGKILLs",
            "seconds",
        ],
    )
    for r in rep.results:
        t.add(
            model,
            r.strategy,
            f"{r.completed}/{r.runs}",
            round(r.model_calls_per_run, 3),
            round(r.tokens_per_run, 1),
            round(r.cost_per_run, 6),
            r.duplicate_effects,
            r.repeated_model_calls,
            "n/a" if r.repeated_after_journal is None else r.repeated_after_journal,
            rep.kills,
            round(rep.elapsed, 1),
        )
    return t


def _chaos_facts(rep: Any) -> dict[str, Any]:
    facts: dict[str, Any] = {
        "kills": rep.kills,
        "timed_out": rep.timed_out,
        "elapsed_s": rep.elapsed,
    }
    for r in rep.results:
        facts[r.strategy] = {
            "runs": r.runs,
            "completed": r.completed,
            "completion_rate": r.completion_rate,
            "model_calls_per_run": r.model_calls_per_run,
            "tokens_per_run": r.tokens_per_run,
            "cost_per_run": r.cost_per_run,
            "duplicates": r.duplicate_effects,
            "repeated_model_calls": r.repeated_model_calls,
            "repeated_after_journal": r.repeated_after_journal,
        }
    return facts


def _chaos_sentence(rep: Any) -> str:
    return (
        " ".join(
            f"{r.strategy}: {r.completed}/{r.runs} runs completed, "
            f"{r.repeated_model_calls} repeated model calls"
            + (
                ""
                if r.repeated_after_journal is None
                else f" ({r.repeated_after_journal} for steps already journalled)"
            )
            + (
                ", never posted twice."
                if r.duplicate_effects == 0
                else f", {r.duplicate_effects} duplicate posts."
            )
            for r in rep.results
        )
        + f" ({rep.kills} SIGKILLs.)"
    )


@experiment(
    id="durable.chaos",
    seed_file=SEED_FILE,
    exercise="Hard 1",
    title="Real workers SIGKILLed at random during real agent runs: restart vs journal",
    real_llm=True,
)
def chaos(ctx: LabContext) -> LabResult:
    cfg = _chaos_config(ctx, "chaos", real=False)
    rep = run_chaos(cfg, progress=ctx.progress)
    t = _chaos_table(
        f"{cfg.runs} runs per strategy, {cfg.workers} workers, {rep.kills} SIGKILLs in "
        f"{rep.elapsed:.1f} s{' (time limit hit)' if rep.timed_out else ''}",
        "FakeLLM",
        rep,
    )
    facts = _chaos_facts(rep)
    answer = _chaos_sentence(rep)
    params = rep.params
    model = FAKE_MODEL
    if ctx.llm is not None:
        rcfg = _chaos_config(ctx, "chaos-llm", real=True)
        with ctx.llm.exported():  # the workers' AgentServices ask the real model
            real = run_chaos(rcfg, progress=ctx.progress)
        t.title += (
            f"; then {rcfg.runs} runs per strategy on {ctx.llm.model} (max_tokens "
            f"{ctx.llm.max_tokens}), {real.kills} SIGKILLs in {real.elapsed:.1f} s"
            + (" (time limit hit)" if real.timed_out else "")
        )
        _chaos_table("", ctx.llm.model, real, t)
        facts["llm"] = _chaos_facts(real)
        answer = (
            f"FakeLLM: {answer} On the real model {ctx.llm.model} "
            f"({rcfg.runs} runs per strategy, every plan/summarize/draft step a real call): "
            + _chaos_sentence(real)
            + " Tokens per run: "
            + ", ".join(f"{r.strategy} {r.tokens_per_run:.0f}" for r in real.results)
            + f"; {real.elapsed:.0f} s in all."
        )
        params = {**params, "llm_runs": real.params}
        model = f"{FAKE_MODEL}, and {ctx.llm.label}"
    return LabResult(tables=[t], facts=facts, answer=answer, params=params, model=model)


@experiment(
    id="durable.saga",
    seed_file=SEED_FILE,
    exercise="Hard 3",
    title="A compensation that fails for good: needs_attention with an audit of what was undone",
)
def saga(ctx: LabContext) -> LabResult:
    app, svc, wfs = agent_on_journal(
        ctx, "saga", fail_publish={"newsletter"}, fail_unpublish={"blog"}
    )
    channels = ["blog", "social", "newsletter"]
    try:
        start_agent(app, wfs["1"], "q", run_id="s1", channels=channels).result(timeout=30)
    except RunFailedError:
        pass
    before = app.show("s1")
    audit = Table(
        "Audit log of run s1 (as `surefoot runs show s1` prints it)",
        ["#", "actor", "action", "detail"],
    )
    channel_of = {p["id"]: p["channel"] for p in svc.ledger.posts("s1")}
    where = {s.pos: channel_of.get(s.result, "?") for s in before.steps if s.name == "publish"}

    def names(entries: list[dict[str, Any]]) -> str:
        return (
            ", ".join(f"{e['step']} {where.get(e['pos'], '?')} (step {e['pos']})" for e in entries)
            or "-"
        )

    for a in before.audit:
        d = a.detail if isinstance(a.detail, dict) else {}
        text = (
            f"undone: {names(d.get('undone', []))}; not undone: {names(d['not_undone'])}"
            if "not_undone" in d
            else names([d]) + (f": {d['error']}" if "error" in d else "")
            if "step" in d
            else str(a.detail)
        )
        audit.add(a.seq, a.actor, a.action, text)
    live_before = [p["channel"] for p in svc.ledger.posts("s1") if p["removed_at"] is None]
    attention: dict[str, Any] = next(
        (a.detail for a in before.audit if a.action == "needs_attention"), {}
    )
    svc.fail_unpublish.clear()  # the fix: the blog's API is back
    try:
        app.retry("s1", reason="blog API fixed").result(timeout=30)
    except RunFailedError:
        pass
    after = app.show("s1")
    final: dict[str, Any] = next(
        (
            a.detail
            for a in reversed(after.audit)
            if isinstance(a.detail, dict) and "not_undone" in a.detail
        ),
        {},
    )
    unpublish_refused = len(svc.ledger.calls("s1", service="unpublish_refused"))
    live_after = [p["channel"] for p in svc.ledger.posts("s1") if p["removed_at"] is None]
    t = Table(
        "Publishing to blog, social, newsletter; newsletter refuses; unpublish of blog fails",
        ["moment", "status", "posts still live", "undone", "not undone"],
    )
    t.add(
        "after the failure",
        before.run.status,
        ", ".join(live_before) or "-",
        names(attention.get("undone", [])),
        names(attention.get("not_undone", [])),
    )
    t.add(
        "after the fix and `runs retry`",
        after.run.status,
        ", ".join(live_after) or "-",
        names(final.get("undone", [])),
        names(final.get("not_undone", [])),
    )
    app.close()
    svc.ledger.close()
    return LabResult(
        tables=[t, audit],
        facts={
            "status_before": before.run.status,
            "status_after": after.run.status,
            "live_before": live_before,
            "live_after": live_after,
            "undone": attention.get("undone", []),
            "not_undone": attention.get("not_undone", []),
            "undone_after": final.get("undone", []),
            "not_undone_after": final.get("not_undone", []),
            "unpublish_refused": unpublish_refused,
            "audit_actions": [a.action for a in after.audit],
        },
        answer=(
            f"The run stopped {before.run.status} after the newsletter refused the post; "
            f"undone: {names(attention.get('undone', []))}; not undone: "
            f"{names(attention.get('not_undone', []))} (the blog's unpublish was refused "
            f"{unpublish_refused} times). After the fix, `surefoot runs retry` ended the run "
            f"{after.run.status} with {len(live_after)} posts still live "
            f"(undone: {names(final.get('undone', []))})."
        ),
    )
