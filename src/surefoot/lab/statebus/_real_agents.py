"""Seed 000, Hard 1: three real agent processes on a JSON file, a Store key and a Stream.

Hard 2 (resolvers) and Hard 3 (injection) are in ``surefoot.lab.statebus_trust``.
"""

from __future__ import annotations

from typing import Any

from ...statebus import run_real_agents, shared
from .._registry import LabContext, LabResult, Table, experiment
from ._common import SEED_FILE, _compare, _r


@experiment(
    id="statebus.real-agents",
    seed_file=SEED_FILE,
    exercise="Hard 1",
    title="Three real agent processes on one JSON file, one Store key and one Stream",
)
def real_agents(ctx: LabContext) -> LabResult:
    agents, items = 3, (4 if ctx.quick else 10)
    t = Table(
        f"{agents} OS processes × {items} findings (FakeLLM + 2–10 ms emulated model latency)",
        ["run", "how it writes", "produced", "kept", "lost", "retries", "model calls", "seconds"],
    )
    how = {
        "json": "read file, think, write file (no check)",
        "store": "Store key, write(expect=version)",
        "stream": "Stream.append(message_id, expect_last_seq)",
    }
    facts: dict[str, Any] = {}
    for i, mode in enumerate(("json", "store", "stream")):
        r = run_real_agents(
            mode, ctx.workdir, url=ctx.db, agents=agents, items=items, seed=ctx.seed
        )
        t.add(
            f"real: {mode}",
            how[mode],
            r.produced,
            r.kept,
            r.lost,
            r.retries,
            r.model_calls,
            round(r.seconds, 2),
        )
        facts[mode] = {
            "produced": r.produced,
            "kept": r.kept,
            "lost": r.lost,
            "retries": r.retries,
            "model_calls": r.model_calls,
            "dedup_hits": r.dedup_hits,
        }
        ctx.progress(i + 1, 4)
    seeds = ctx.seed_list(5 if ctx.quick else 20)
    for p, label in (("last_writer_wins", "json"), ("optimistic", "store")):
        m = shared.averaged(p, agents=agents, seeds=seeds, items=items)
        t.add(
            f"simulated: {p}",
            f"prediction for '{label}'",
            int(m["produced"]),
            _r(m["kept"]),
            _r(m["lost"]),
            _r(m["retries"]),
            _r(m["model_calls"]),
            "",
        )
        facts[f"sim_{p}"] = m
    ctx.progress(4, 4)
    j, s, st = facts["json"], facts["store"], facts["stream"]
    answer = (
        f"Plain read-modify-write on one JSON file lost {j['lost']} of {j['produced']} "
        f"findings with {j['retries']} retries and {j['model_calls']} model calls. With a "
        f"version check the Store key lost {s['lost']} with {s['retries']} retries and "
        f"{s['model_calls']} model calls, the Stream lost {st['lost']} with {st['retries']} "
        f"retries and {st['model_calls']} calls, and {st['dedup_hits']} of {agents} retried "
        "appends (same id, same payload) were recognised as duplicates. "
        + _compare(j["lost"], facts["sim_last_writer_wins"]["lost"], "lost findings (json)")
        + " "
        + _compare(s["retries"], facts["sim_optimistic"]["retries"], "retries (store)")
        + " The simulation counts ticks, not seconds, and one run of real processes depends "
        "on scheduling: read the two as the same order of magnitude, not the same number. "
        "Model: FakeLLM (a seeded fake, not a real LLM); the date is in the parameters."
    )
    return LabResult(
        tables=[t],
        facts=facts,
        answer=answer,
        params={
            "agents": agents,
            "items": items,
            "db": ctx.db or "sqlite (workdir)",
            "seeds": seeds,
        },
    )
