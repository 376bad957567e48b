"""Durable experiments, Easy 1 to Medium 1: what each strategy costs and what a crash repeats."""

from __future__ import annotations

import random
from typing import Any

from surefoot.durable import POINTS, CrashPlan, SimulatedCrash

from .._registry import NO_MODEL, LabContext, LabResult, Table, experiment
from ..agent import STEPS, start_agent
from ..agent.chaos import ChaosConfig, kill_mid_run
from ._common import SEED_FILE, STRATEGIES, agent_on_journal, crash_points


@experiment(
    id="durable.strategies",
    seed_file=SEED_FILE,
    exercise="Easy 1",
    title="Cost and duplicate effects of restart, journal and journal_keys under random crashes",
)
def strategies(ctx: LabContext) -> LabResult:
    seeds = ctx.seed_list(1 if ctx.quick else 3)
    n = 8 if ctx.quick else 30
    pairs = crash_points()
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
        "Extra model calls / duplicate posts / runs that crashed, by crash point "
        "(same crash sequence per strategy)",
        ["crash at", "crashes planned", *STRATEGIES],
    )
    facts: dict[str, Any] = {
        "cost": {},
        "duplicates": {},
        "extra_model_calls": {},
        "crashed": {s: 0 for s in STRATEGIES},
    }
    points: dict[tuple[str, str], dict[str, list[int]]] = {}
    total = len(seeds) * len(STRATEGIES) * n
    done = 0
    for strategy in STRATEGIES:
        calls = tokens = dups = extra = completed = 0
        cost = 0.0
        for seed in seeds:
            rng = random.Random(seed)
            app, svc, wfs = agent_on_journal(ctx, f"strat-{strategy}-{seed}", seed=seed)
            for i in range(n):
                step, point = rng.choice(pairs)
                rid = f"{strategy}-{seed}-{i}"
                app.crash = CrashPlan(point, step=step)
                crashed = 0
                try:
                    start_agent(
                        app, wfs["1"], f"question {i}", run_id=rid, strategy=strategy
                    ).result(timeout=30)
                except SimulatedCrash:
                    crashed = 1
                app.crash = None
                app.resume(rid).result(timeout=30)
                completed += 1
                t = svc.ledger.totals([rid])
                calls += t.model_calls
                tokens += t.tokens
                cost += t.cost
                dups += t.duplicate_posts
                extra += t.repeated_model_calls
                cell = points.setdefault((step, point), {}).setdefault(strategy, [0, 0, 0])
                cell[0] += t.repeated_model_calls
                cell[1] += t.duplicate_posts
                cell[2] += crashed
                facts["crashed"][strategy] += crashed
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
    never: list[str] = []  # (point: strategies) where a planned crash never fired
    for key in sorted(points, key=lambda k: (STEPS.index(k[0]), POINTS.index(k[1]))):
        cells = [
            f"{points[key][s][0]} / {points[key][s][1]} / {points[key][s][2]}" for s in STRATEGIES
        ]
        by_point.add(f"{key[0]}:{key[1]}", crashes[key], *cells)
        quiet = [s for s in STRATEGIES if points[key][s][2] == 0]
        if quiet:
            never.append(f"{key[0]}:{key[1]} under {', '.join(quiet)}")
    facts["crash_never_fired"] = never
    by_point.note = (
        "A planned crash fires only if the run reaches that point; it never fired at "
        + "; ".join(never)
        + " (those runs ran through)."
        if never
        else "Every planned crash fired."
    )
    return LabResult(
        tables=[summary, by_point],
        facts=facts,
        answer=(
            "Each strategy, after one crash per run: "
            + "; ".join(
                f"{st} paid {facts['cost'][st]['model_calls_per_run']:.3g} model calls/run "
                f"({facts['extra_model_calls'][st]} repeated) and "
                + (
                    "never posted twice"
                    if facts["duplicates"][st] == 0
                    else f"posted twice {facts['duplicates'][st]} times"
                )
                for st in STRATEGIES
            )
            + ". Crashes that fired per strategy (of "
            + f"{n * len(seeds)} planned): "
            + ", ".join(f"{st} {facts['crashed'][st]}" for st in STRATEGIES)
            + "."
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
        app, svc, wfs = agent_on_journal(ctx, name, honour_keys=honour)
        keys_seen: list[str | None] = []
        real_publish = svc.publish

        async def publish(
            run: str,
            channel: str,
            content: str,
            key: str | None,
            _p: Any = real_publish,
            _seen: list[str | None] = keys_seen,
        ) -> int:
            _seen.append(key)  # what the publisher received, not what the strategy implies
            return int(await _p(run, channel, content, key))

        svc.publish = publish  # type: ignore[method-assign]
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
            "yes" if keys_seen and all(k is not None for k in keys_seen) else "no",
            tot.publish_calls,
            tot.posts,
            tot.duplicate_posts,
        )
        facts[f"{strategy}{'' if honour else '_service_ignores_keys'}"] = {
            "publish_calls": tot.publish_calls,
            "posts": tot.posts,
            "duplicates": tot.duplicate_posts,
            "publish_attempts": key,
            "keys_received": keys_seen,
        }
        app.close()
        svc.ledger.close()
    return LabResult(
        tables=[t],
        facts=facts,
        answer=" ".join(
            f"{label}: {facts[k]['publish_calls']} publish requests "
            f"({'with' if any(facts[k]['keys_received']) else 'without'} a key), "
            f"{facts[k]['posts']} posts, "
            + (
                "no duplicate."
                if facts[k]["duplicates"] == 0
                else f"{facts[k]['duplicates']} duplicate."
            )
            for k, label in (
                ("journal", "journal"),
                ("journal_keys", "journal_keys"),
                ("journal_keys_service_ignores_keys", "journal_keys, service ignores keys"),
            )
        )
        + _key_sentence(facts),
    )


def _key_sentence(facts: dict[str, Any]) -> str:
    """What the key did, from the duplicates measured with and without a deduplicating service."""
    keyed = facts["journal_keys"]["duplicates"]
    ignored = facts["journal_keys_service_ignores_keys"]["duplicates"]
    if keyed == 0 and ignored > 0:
        return (
            f" The same key sent to a service that ignores it still gave {ignored} duplicate: "
            "the key helped only where the service deduplicated by it."
        )
    return (
        f" With the key: {keyed} duplicate(s) at a deduplicating service, {ignored} at one "
        "that ignores it."
    )


@experiment(
    id="durable.effects",
    seed_file=SEED_FILE,
    exercise="Easy 3",
    title="Each agent step as pure, effect or wait, with compensation and key plan",
)
def effects(ctx: LabContext) -> LabResult:
    app, svc, wfs = agent_on_journal(ctx, "effects")
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
            "Read from the workflow's code: "
            + ", ".join(f"{s.name} is {s.kind}" for s in specs)
            + ". "
            + (
                " ".join(
                    f"{s.name} is undone by {s.compensate or 'nothing'} and its key plan "
                    f"is {s.key_plan}."
                    for s in effects_
                )
                or "No step is an effect."
            )
        ),
        model=NO_MODEL,
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
        answer=" ".join(
            f"{st}: the restarted run ended {facts[st]['status']}; the ledger counted "
            + ", ".join(
                f"{step}={facts[st]['calls_per_step'].get(step, 0)}" for step in ("plan", "search")
            )
            + " calls"
            + (
                ""
                if st == "restart"
                else f" and {facts[st]['repeated_for_journalled_steps']} repeated calls for "
                "steps journalled before the kill"
            )
            + "."
            for st in ("journal_keys", "restart")
        ),
        params={"latency_s": latency, "lease_s": 2.0},
    )
