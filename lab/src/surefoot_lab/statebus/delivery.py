"""Seed 000, Medium 1-3: back-off, per-agent partitions, dead letters and their redrive."""

from __future__ import annotations

import random
import uuid
from typing import Any

from surefoot.clock import FakeClock
from surefoot.statebus import Stream

from .._registry import NO_MODEL, LabContext, LabResult, Table, experiment
from . import messages, shared
from ._common import SEED_FILE, rounded
from .channel import Channel


@experiment(
    id="statebus.backoff",
    seed_file=SEED_FILE,
    exercise="Medium 1",
    title="Optimistic retries with and without a random back-off of 1–4 ticks",
)
def backoff(ctx: LabContext) -> LabResult:
    seeds = ctx.seed_list(5 if ctx.quick else 20)
    t = Table(
        f"optimistic, 3 findings per agent, mean of {len(seeds)} seeds",
        ["agents", "back-off", "retries", "model calls", "ticks", "ticks in back-off", "kept"],
    )
    facts: dict[str, Any] = {}
    for n in (6, 12):
        for b in (None, (1, 4)):
            m = shared.averaged("optimistic", agents=n, seeds=seeds, backoff=b)
            label = "none" if b is None else "1–4 ticks"
            t.add(
                n,
                label,
                rounded(m["retries"]),
                rounded(m["model_calls"]),
                rounded(m["ticks"]),
                rounded(m["backoff_ticks"]),
                rounded(m["kept"]),
            )
            facts[f"{n}_{'backoff' if b else 'none'}"] = m
    f6n, f6b = facts["6_none"], facts["6_backoff"]
    f12n, f12b = facts["12_none"], facts["12_backoff"]
    all_kept = all(m["lost"] == 0 for m in (f6n, f6b, f12n, f12b))
    kept = "Every finding is kept either way." if all_kept else "Some findings were lost."
    answer = (
        f"Without back-off an agent that loses the race re-reads at once and collides again: "
        f"{f6n['retries']:.1f} retries for 6 agents and {f12n['retries']:.1f} for 12. A random "
        f"wait of 1–4 ticks spreads the retries out: {f6b['retries']:.1f} and "
        f"{f12b['retries']:.1f} retries (and as many fewer model calls), at the price of more "
        f"ticks ({f6n['ticks']:.1f} → {f6b['ticks']:.1f} for 6 agents, {f12n['ticks']:.1f} → "
        f"{f12b['ticks']:.1f} for 12). {kept}"
    )
    return LabResult(tables=[t], facts=facts, answer=answer, params={"seeds": seeds})


@experiment(
    id="statebus.partition",
    seed_file=SEED_FILE,
    exercise="Medium 2",
    title="Per-agent report sections merged at the end, and where that fails",
)
def partition(ctx: LabContext) -> LabResult:
    seeds = ctx.seed_list(5 if ctx.quick else 20)
    agents = 6
    t = Table(
        f"{agents} agents × 3 findings, mean of {len(seeds)} seeds",
        ["policy", "kept", "conflicts", "retries", "model calls", "ticks"],
    )
    facts: dict[str, Any] = {}
    for p in ("optimistic", "partitioned"):
        m = shared.averaged(p, agents=agents, seeds=seeds)
        t.add(
            p,
            rounded(m["kept"]),
            rounded(m["conflicts"]),
            rounded(m["retries"]),
            rounded(m["model_calls"]),
            rounded(m["ticks"]),
        )
        facts[p] = m
    one = shared.run("partitioned", agents=agents, seed=ctx.seed)
    llm_merge = shared.run("partitioned", agents=agents, seed=ctx.seed, merge_with_model=True)
    assert one.merge is not None
    assert llm_merge.merge is not None
    mc = Table(
        "The merge step (deterministic: sections in agent order)",
        ["merge", "sections read", "writes", "model calls", "ticks", "items merged"],
    )
    for label, mg in (("concatenate", one.merge), ("concatenate + model summary", llm_merge.merge)):
        mc.add(label, mg.sections_read, mg.writes, mg.model_calls, mg.ticks, mg.items)
    a = Table(
        f"Where partitioning fails: {agents} agents claim 12 tasks, one agent per task "
        f"(mean of {len(seeds)} seeds)",
        ["policy", "claims", "tasks claimed twice", "duplicate work", "retries", "model calls"],
    )
    for p in ("partitioned", "optimistic"):
        rows = [shared.assign(p, agents, 12, s) for s in seeds]
        m = {k: sum(r[k] for r in rows) / len(rows) for k in rows[0]}
        a.add(
            p,
            rounded(m["claims"]),
            rounded(m["double_claimed"]),
            rounded(m["duplicate_work"]),
            rounded(m["retries"]),
            rounded(m["model_calls"]),
        )
        facts[f"assign_{p}"] = m
    facts["merge"] = {
        "sections_read": one.merge.sections_read,
        "writes": one.merge.writes,
        "model_calls": one.merge.model_calls,
        "ticks": one.merge.ticks,
    }
    facts["merge_with_model_calls"] = llm_merge.merge.model_calls
    part_kept = (
        "every finding is kept"
        if facts["partitioned"]["lost"] == 0
        else f"{facts['partitioned']['lost']:.1f} findings are lost"
    )
    answer = (
        f"With a section per agent there are {facts['partitioned']['conflicts']:.0f} conflicts "
        f"and {facts['partitioned']['retries']:.0f} retries (optimistic on one key: "
        f"{facts['optimistic']['retries']:.1f} retries); {part_kept}. The merge costs "
        f"one snapshot read of {one.merge.sections_read} sections, {one.merge.writes} write(s), "
        f"{one.merge.ticks} tick(s) and {one.merge.model_calls} model call(s); "
        f"{llm_merge.merge.model_calls} when the merge summarises. "
        "Partitioning is not possible when the state carries an invariant across sections: "
        "here 'each task is done by one agent'. Each agent only writes its own section, so "
        f"two agents that read before either wrote both take the same task "
        f"({facts['assign_partitioned']['double_claimed']:.1f} tasks claimed twice); the merge "
        "finds it after the work was paid for twice. A single versioned key refuses the second "
        f"claim ({facts['assign_optimistic']['double_claimed']:.0f} claimed twice). The same "
        "holds for budgets, counters and unique names."
    )
    return LabResult(
        tables=[t, mc, a], facts=facts, answer=answer, params={"agents": agents, "seeds": seeds}
    )


@experiment(
    id="statebus.dead-letters",
    seed_file=SEED_FILE,
    exercise="Medium 3",
    title="Dead letters at 40% loss, and a redrive that recovers them",
)
def dead_letters(ctx: LabContext) -> LabResult:
    seeds = ctx.seed_list(5 if ctx.quick else 20)
    n, ch = 100, Channel(loss=0.4)
    t = Table(
        f"deliver(idempotent, {n}, Channel(loss=0.4), max_attempts=5), per seed",
        [
            "seed",
            "sent",
            "dead letters",
            "of them applied (ack lost)",
            "missing",
            "missing after redrive",
            "repeated after redrive",
            "dead after redrive",
        ],
    )
    tot = {"dead": 0, "applied": 0, "missing": 0, "missing_after": 0, "repeated_after": 0}
    example = None
    for s in seeds:
        r = messages.deliver("idempotent", n, ch, s)
        rd = messages.redrive(r, ch, seed=s + 10_000)
        applied = sum(1 for d in r.dead_letters if d.effect_applied)
        t.add(
            s,
            r.sent,
            len(r.dead_letters),
            applied,
            r.missing,
            rd.missing,
            rd.repeated,
            len(rd.dead_letters),
        )
        tot["dead"] += len(r.dead_letters)
        tot["applied"] += applied
        tot["missing"] += r.missing
        tot["missing_after"] += rd.missing
        tot["repeated_after"] += rd.repeated
        if example is None and r.dead_letters:
            example = r.dead_letters[0]
    # The same on a real Stream: a worker that crashes before its ack 40% of the time.
    clock = FakeClock()
    url = ctx.db or ctx.sqlite_url("dead-letters.db")
    stream = Stream(url, f"tasks-{ctx.seed}-{uuid.uuid4().hex[:8]}", clock=clock)
    for i in range(100):
        stream.append({"task": i}, message_id=f"task-{i}")
    c = stream.consumer("worker", visibility_timeout=10.0, max_attempts=3)
    rng = random.Random(ctx.seed)
    handled: dict[str, int] = {}
    while True:
        batch = c.fetch(10)
        if not batch:
            if c.pending == 0:
                break
            clock.advance(11.0)
            continue
        for msg in batch:
            if rng.random() < 0.4:
                continue  # crashed before the ack: redelivered after the visibility timeout
            handled[msg.message_id] = handled.get(msg.message_id, 0) + 1
            c.ack(msg)
    dead = c.dead_letters()
    sd = Table(
        "Stream dead letters (100 tasks, max_attempts=3, 40% crash before ack)",
        ["seq", "message id", "reason", "attempts", "history"],
    )
    for d in dead:
        sd.add(
            d.seq,
            d.message_id,
            d.reason,
            d.attempts,
            ", ".join(f"#{h['attempt']}@{h['at'] - 1_700_000_000:.0f}s" for h in d.history),
        )
    redriven = c.redrive()
    for msg in c.fetch(100):  # the cause is fixed: a healthy worker handles them
        handled[msg.message_id] = handled.get(msg.message_id, 0) + 1
        c.ack(msg)
    dead_after = len(c.dead_letters())
    stream.close()
    k = len(seeds)
    reasons = sorted({d.reason for d in dead})
    attempts = sorted({d.attempts for d in dead})
    facts = {
        "mean_dead_letters": tot["dead"] / k,
        "mean_dead_applied": tot["applied"] / k,
        "mean_missing": tot["missing"] / k,
        "missing_after_redrive": tot["missing_after"],
        "repeated_after_redrive": tot["repeated_after"],
        "stream_dead": len(dead),
        "stream_redriven": redriven,
        "stream_handled": len(handled),
        "stream_dead_after": dead_after,
        "stream_dead_reasons": reasons,
        "stream_dead_attempts": attempts,
        "example": None
        if example is None
        else {
            "message": example.message,
            "reason": example.reason,
            "attempts": example.attempts,
            "history": example.history,
            "effect_applied": example.effect_applied,
        },
    }
    answer = (
        f"At 40% loss with max_attempts=5, {facts['mean_dead_letters']:.1f} of {n} messages end "
        f"in the dead-letter list on average; {facts['mean_dead_applied']:.1f} of them were in "
        f"fact applied (only acks were lost), the other {facts['mean_missing']:.1f} never "
        "arrived. The receiver (or an operator) should not drop them or blindly replay them: "
        "read the reason and the attempt history, fix the cause (here the link), then redrive "
        "them to an idempotent receiver, which applies the missing ones and skips the applied "
        f"ones. Redriven, missing fell to {tot['missing_after']} and repeated stayed at "
        f"{tot['repeated_after']} across {k} seeds. On a SQLite Stream, {len(dead)} of 100 tasks "
        f"became dead letters (reason {', '.join(reasons) or '-'}, "
        f"{'/'.join(map(str, attempts)) or '-'} deliveries each); redrive put {redriven} back "
        f"and {'all ' if len(handled) == 100 else ''}{len(handled)} of 100 tasks were handled."
    )
    return LabResult(
        tables=[t, sd],
        facts=facts,
        answer=answer,
        params={"n": n, "loss": 0.4, "max_attempts": 5, "seeds": seeds, "db": url},
        model=NO_MODEL,
    )
