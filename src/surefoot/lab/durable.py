"""Lab experiments for surefoot.durable (seed 002), registered on import.

Every experiment runs the 7-step agent (``surefoot.durable.agent``) on the seeded FakeLLM
and fake tools whose ledger counts what they receive, so costs and duplicate effects are
counted by the services, not by the code under test. In-process experiments use a
``FakeClock``; ``durable.kill9`` and ``durable.chaos`` use real worker processes and SIGKILL.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from ..clock import Clock, FakeClock, SystemClock
from ..durable import POINTS, App, CrashPlan, SimulatedCrash, Worker
from ..durable.agent import STEPS, AgentServices, approve, build_agent, start_agent
from ..durable.agent.chaos import ChaosConfig, kill_mid_run, run_chaos
from ..errors import RunFailedError
from ._registry import LabContext, LabResult, Table, experiment

SEED_FILE = "002_91829255f3db9460.txt"
STRATEGIES = ("restart", "journal", "journal_keys")


def _agent(
    ctx: LabContext,
    name: str,
    *,
    clock: Clock | None = None,
    versions: tuple[str, ...] = ("1",),
    **svc: Any,
) -> tuple[App, AgentServices, dict[str, Any]]:
    clock = clock if clock is not None else FakeClock()
    app = App(ctx.sqlite_url(f"{name}.db"), clock=clock, poll=0.01, worker_id=f"lab-{name}")
    services = AgentServices(str(ctx.workdir / f"{name}-ledger.db"), clock=clock, **svc)
    return app, services, build_agent(app, services, versions=versions)


def _until(cond: Callable[[], bool], timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


def _crash_points() -> list[tuple[str, str]]:
    """Every (step, point) a crash can hit: pure steps before/after, the effect at all four."""
    out = []
    for step in STEPS:
        if step == "approve":
            continue  # a wait journals no result of its own to lose
        pts = POINTS if step == "publish" else ("before_step", "after_journal")
        out += [(step, p) for p in pts]
    return out


@experiment(
    id="durable.strategies",
    seed_file=SEED_FILE,
    exercise="Easy 1",
    title="Cost and duplicate effects of restart, journal and journal_keys under random crashes",
)
def strategies(ctx: LabContext) -> LabResult:
    seeds = ctx.seed_list(1 if ctx.quick else 3)
    n = 8 if ctx.quick else 30
    pairs = _crash_points()
    summary = Table(
        f"Each run crashes once at a seeded random point, then resumes ({n} runs x "
        f"{len(seeds)} seeds per strategy; no crash costs 3 model calls and 1 post)",
        [
            "strategy",
            "runs",
            "model calls/run",
            "tokens/run",
            "USD/run",
            "extra model calls",
            "duplicate posts",
            "completed",
        ],
    )
    by_point = Table(
        "Extra model calls / duplicate posts by crash point (same crash sequence per strategy)",
        ["crash at", "crashes", *STRATEGIES],
        note="before_effect fires only where an intent row is written (journal_keys); under "
        "restart and journal those runs did not crash.",
    )
    facts: dict[str, Any] = {"cost": {}, "duplicates": {}, "extra_model_calls": {}}
    points: dict[tuple[str, str], dict[str, list[int]]] = {}
    total = len(seeds) * len(STRATEGIES) * n
    done = 0
    for strategy in STRATEGIES:
        calls = tokens = dups = extra = completed = 0
        cost = 0.0
        for seed in seeds:
            rng = random.Random(seed)
            app, svc, wfs = _agent(ctx, f"strat-{strategy}-{seed}", seed=seed)
            for i in range(n):
                step, point = rng.choice(pairs)
                rid = f"{strategy}-{seed}-{i}"
                app.crash = CrashPlan(point, step=step)
                try:
                    start_agent(
                        app, wfs["1"], f"question {i}", run_id=rid, strategy=strategy
                    ).result(timeout=30)
                except SimulatedCrash:
                    pass
                app.crash = None
                app.resume(rid).result(timeout=30)
                completed += 1
                t = svc.ledger.totals([rid])
                calls += t.model_calls
                tokens += t.tokens
                cost += t.cost
                dups += t.duplicate_posts
                extra += t.repeated_model_calls
                cell = points.setdefault((step, point), {}).setdefault(strategy, [0, 0])
                cell[0] += t.repeated_model_calls
                cell[1] += t.duplicate_posts
                done += 1
                ctx.progress(done, total)
            app.close()
            svc.ledger.close()
        runs = n * len(seeds)
        summary.add(
            strategy,
            runs,
            round(calls / runs, 3),
            round(tokens / runs, 1),
            round(cost / runs, 6),
            extra,
            dups,
            completed,
        )
        facts["cost"][strategy] = {
            "model_calls_per_run": calls / runs,
            "tokens_per_run": tokens / runs,
            "usd_per_run": cost / runs,
        }
        facts["duplicates"][strategy] = dups
        facts["extra_model_calls"][strategy] = extra
    crashes: dict[tuple[str, str], int] = {}
    for seed in seeds:
        rng = random.Random(seed)
        for _ in range(n):
            k = rng.choice(pairs)
            crashes[k] = crashes.get(k, 0) + 1
    for key in sorted(points, key=lambda k: (STEPS.index(k[0]), POINTS.index(k[1]))):
        cells = [f"{points[key][s][0]} / {points[key][s][1]}" for s in STRATEGIES]
        by_point.add(f"{key[0]}:{key[1]}", crashes[key], *cells)
    return LabResult(
        tables=[summary, by_point],
        facts=facts,
        answer=(
            "restart pays for every model call before the crash again and repeats the post "
            "when the crash falls after it; journal replays journalled steps for free but "
            "repeats the post when the crash falls between the effect and its journal row; "
            "journal_keys adds an intent row and the key f'{run_id}:{step}', so the "
            "publisher deduplicates the retry: no duplicate posts, and only the step in "
            "flight is ever paid twice."
        ),
        params={"seeds": seeds, "runs_per_seed": n, "crash_points": len(pairs)},
    )


@experiment(
    id="durable.window",
    seed_file=SEED_FILE,
    exercise="Easy 2",
    title="Crash after the effect, before its journal row: a duplicate without the key, none with",
)
def window(ctx: LabContext) -> LabResult:
    t = Table(
        "Crash at after_effect on publish, then resume",
        [
            "strategy",
            "publisher dedups keys",
            "key passed",
            "publish requests",
            "posts",
            "duplicate posts",
        ],
    )
    facts: dict[str, Any] = {}
    for strategy, honour in (("journal", True), ("journal_keys", True), ("journal_keys", False)):
        name = f"window-{strategy}-{honour}"
        app, svc, wfs = _agent(ctx, name, honour_keys=honour)
        app.crash = CrashPlan("after_effect", step="publish")
        try:
            start_agent(app, wfs["1"], "q", run_id="w", strategy=strategy).result(timeout=30)
        except SimulatedCrash:
            pass
        app.crash = None
        app.resume("w").result(timeout=30)
        tot = svc.ledger.totals(["w"])
        key = app.show("w").steps[-1].attempts
        t.add(
            strategy,
            honour,
            "yes" if strategy == "journal_keys" else "no",
            tot.publish_calls,
            tot.posts,
            tot.duplicate_posts,
        )
        facts[f"{strategy}{'' if honour else '_service_ignores_keys'}"] = {
            "publish_calls": tot.publish_calls,
            "posts": tot.posts,
            "duplicates": tot.duplicate_posts,
            "publish_attempts": key,
        }
        app.close()
        svc.ledger.close()
    return LabResult(
        tables=[t],
        facts=facts,
        answer=(
            "Without a key the resumed publish creates a second post; with the key the "
            "publisher sees the same key twice and returns the first post. The key only "
            "helps if the receiving service deduplicates by it (last row)."
        ),
    )


@experiment(
    id="durable.effects",
    seed_file=SEED_FILE,
    exercise="Easy 3",
    title="Each agent step as pure, effect or wait, with compensation and key plan",
)
def effects(ctx: LabContext) -> LabResult:
    app, svc, wfs = _agent(ctx, "effects")
    specs = app.describe(wfs["1"])
    t = Table(
        "app.describe(research_agent) — read from the workflow's code, not typed by hand",
        ["step", "kind", "compensation", "idempotency key plan", "attempts"],
    )
    for s in specs:
        t.add(s.name, s.kind, s.compensate or "-", s.key_plan, s.retry)
    app.close()
    svc.ledger.close()
    effects_ = [s for s in specs if s.kind == "effect"]
    return LabResult(
        tables=[t],
        facts={
            "kinds": {s.name: s.kind for s in specs},
            "compensations": {s.name: s.compensate for s in effects_},
            "effects_without_key_plan": [
                s.name for s in effects_ if not (s.takes_key or s.idempotent)
            ],
        },
        answer=(
            "plan, summarize and draft (model calls) and search and read (tool reads) are "
            "pure: journalled, never recomputed. The approval is a wait. publish is the only "
            "effect: it is undone by unpublish and gets the key f'{run_id}:{step}', reused "
            "when it is resumed."
        ),
    )


def _kill9_one(ctx: LabContext, strategy: str, latency: float) -> dict[str, Any]:
    name = f"kill9-{strategy}"
    cfg = ChaosConfig(
        db=ctx.sqlite_url(f"{name}.db"),
        ledger=str(ctx.workdir / f"{name}-ledger.db"),
        latency=latency,
        reply_latency=0.0,
        lease=2.0,
        logdir=str(ctx.workdir),
    )
    r = kill_mid_run(cfg, strategy=strategy)
    return {
        "status": r.status,
        "journalled_before_kill": r.journalled_before_kill,
        "calls_per_step": r.calls_per_step,
        "model_calls": r.model_calls,
        "repeated_for_journalled_steps": r.repeated_after_journal,
        "resumed_in_s": r.next_step_s,
    }


@experiment(
    id="durable.kill9",
    seed_file=SEED_FILE,
    exercise="Medium 1",
    title="A worker SIGKILLed mid-run and restarted redoes no journalled step",
)
def kill9(ctx: LabContext) -> LabResult:
    latency = 0.1 if ctx.quick else 0.3
    t = Table(
        "One agent run; SIGKILL to the worker during step 3 (read); worker restarted",
        [
            "strategy",
            "status",
            "journalled before kill",
            "calls per step (ledger)",
            "model calls",
            "repeated for journalled steps",
            "restart -> next step (s)",
        ],
    )
    facts: dict[str, Any] = {}
    for strategy in ("journal_keys", "restart"):
        r = _kill9_one(ctx, strategy, latency)
        facts[strategy] = r
        t.add(
            strategy,
            r["status"],
            ", ".join(r["journalled_before_kill"]) or "-",
            " ".join(f"{k}={v}" for k, v in r["calls_per_step"].items()),
            r["model_calls"],
            r["repeated_for_journalled_steps"] if strategy != "restart" else "n/a",
            "n/a (no journal)" if r["resumed_in_s"] is None else round(r["resumed_in_s"], 2),
        )
    return LabResult(
        tables=[t],
        facts=facts,
        answer=(
            "With the SQLite journal the restarted worker replays plan and search from the "
            "journal (one call each in the ledger) and runs only the step that was in "
            "flight again; restart calls plan and search a second time."
        ),
        params={"latency_s": latency, "lease_s": 2.0},
    )


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
        return _until(lambda: app.show(rid).run.status == "sleeping", 30)

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
        answer=(
            "r-old began on version 1 and finished on it after version 2 was deployed, while "
            "r-new ran version 2 (with fact_check). A version-1 run offered only to a v2 "
            "worker stays sleeping and is flagged stranded. Code edited under the same label "
            "stops at the first different step with StepMismatchError and waits in "
            "needs_attention."
        ),
    )


def _tasks_on(app: App) -> int:
    """Coroutines alive on the app's event loop (besides the one counting)."""

    async def count() -> int:
        return len(asyncio.all_tasks()) - 1

    return asyncio.run_coroutine_threadsafe(count(), app.executor.loop()).result(10)


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
    worker.run_once(timeout=60)
    threads_sleeping = threading.active_count()
    sleeping = app.list_runs(status="sleeping", limit=n)
    held = sum(1 for r in sleeping if r.owner is not None)
    tasks = _tasks_on(app)
    in_memory = len(app.executor.active)
    wake = max(r.wake_at or 0.0 for r in sleeping) if sleeping else 0.0
    early = worker.run_once(timeout=10)  # before the deadline: nothing to claim
    sleeping_early = len(app.list_runs(status="sleeping", limit=n))
    threads_early = threading.active_count()
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
    t.add("all suspended at the timer", len(sleeping), in_memory, tasks, threads_sleeping, 0, 0)
    t.add("before the deadline", sleeping_early, 0, 0, threads_early, early, 0)
    t.add(
        "after the deadline",
        len(app.list_runs(status="sleeping", limit=n)),
        len(app.executor.active),
        _tasks_on(app),
        threading.active_count(),
        claimed,
        len(done),
    )
    app.close()
    services.ledger.close()
    return LabResult(
        tables=[t],
        facts={
            "runs": n,
            "sleeping": len(sleeping),
            "lease_held_while_sleeping": held,
            "in_memory_while_sleeping": in_memory,
            "tasks_while_sleeping": tasks,
            "claimed_before_deadline": early,
            "claimed_after_deadline": claimed,
            "succeeded": len(done),
            "late_by_s": max(resumed_at - wake, 0.0),
        },
        answer=(
            f"All {n} runs journalled their wake time and let go: no lease, no coroutine "
            "and no worker slot while they slept, and the worker had nothing to claim "
            "before the deadline. Once the clock passed it, one claim resumed them all."
        ),
        params={"delay_s": delay, "clock": type(clock).__name__},
    )


@experiment(
    id="durable.chaos",
    seed_file=SEED_FILE,
    exercise="Hard 1",
    title="Real workers SIGKILLed at random during real agent runs: restart vs journal",
)
def chaos(ctx: LabContext) -> LabResult:
    seed = ctx.seed
    cfg = ChaosConfig(
        db=ctx.db or ctx.sqlite_url("chaos.db"),
        ledger=str(ctx.workdir / "chaos-ledger.db"),
        runs=10 if ctx.quick else 200,
        workers=2,
        concurrency=4 if ctx.quick else 16,
        latency=0.03 if ctx.quick else 0.02,
        reply_latency=0.03 if ctx.quick else 0.02,
        seed=seed,
        kill_every=(0.2, 0.6),
        max_kills=6 if ctx.quick else 60,
        kill_in_flight_first=ctx.quick,  # a quick run always sees a kill mid-run
        time_limit=30.0 if ctx.quick else 50.0,
        logdir=str(ctx.workdir),
    )
    rep = run_chaos(cfg, progress=ctx.progress)
    t = Table(
        f"{cfg.runs} runs per strategy, {cfg.workers} workers, {rep.kills} SIGKILLs in "
        f"{rep.elapsed:.1f} s{' (time limit hit)' if rep.timed_out else ''}",
        [
            "strategy",
            "completed",
            "model calls/run",
            "tokens/run",
            "USD/run",
            "duplicate posts",
            "repeated model calls",
            "repeated after journalled",
        ],
    )
    facts: dict[str, Any] = {
        "kills": rep.kills,
        "timed_out": rep.timed_out,
        "elapsed_s": rep.elapsed,
    }
    for r in rep.results:
        t.add(
            r.strategy,
            f"{r.completed}/{r.runs}",
            round(r.model_calls_per_run, 3),
            round(r.tokens_per_run, 1),
            round(r.cost_per_run, 6),
            r.duplicate_effects,
            r.repeated_model_calls,
            "n/a" if r.repeated_after_journal is None else r.repeated_after_journal,
        )
        facts[r.strategy] = {
            "runs": r.runs,
            "completed": r.completed,
            "completion_rate": r.completion_rate,
            "model_calls_per_run": r.model_calls_per_run,
            "cost_per_run": r.cost_per_run,
            "duplicates": r.duplicate_effects,
            "repeated_model_calls": r.repeated_model_calls,
            "repeated_after_journal": r.repeated_after_journal,
        }
    return LabResult(
        tables=[t],
        facts=facts,
        answer=(
            "Every kill costs restart the model calls its runs had already made, and a "
            "post when the kill falls after publish; journal repeats only the steps in "
            "flight but can still post twice; journal_keys repeats only steps in flight and "
            "never posts twice. No strategy repeats a model call whose result was journalled."
        ),
        params=rep.params,
    )


@experiment(
    id="durable.saga",
    seed_file=SEED_FILE,
    exercise="Hard 3",
    title="A compensation that fails for good: needs_attention with an audit of what was undone",
)
def saga(ctx: LabContext) -> LabResult:
    app, svc, wfs = _agent(ctx, "saga", fail_publish={"newsletter"}, fail_unpublish={"blog"})
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
        "after the fix and `runs retry`", after.run.status, ", ".join(live_after) or "-", "all", "-"
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
            "audit_actions": [a.action for a in after.audit],
        },
        answer=(
            "The newsletter refused the post, so the run rolled back: social was unpublished "
            "but unpublishing the blog failed three times, and the run stopped in "
            "needs_attention with an audit entry listing what was undone and what was not. "
            "After the fix, `surefoot runs retry` resumed the rollback where it stopped."
        ),
    )
