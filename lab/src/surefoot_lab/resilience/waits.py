"""Seed 001 Easy 1-3: classify errors, the backoff waits, the odds of a retried call."""

from __future__ import annotations

import math
import random
from typing import Any

from surefoot.resilience import (
    Backoff,
    ProviderError,
    RetryPolicy,
    classify,
    faults,
    retry_call,
)

from .._registry import NO_MODEL, LabContext, LabResult, Table, experiment
from ._common import SEED_FILE, SocketReset, pct


@experiment(
    id="resilience.classify",
    seed_file=SEED_FILE,
    exercise="Easy 1",
    title="Sort the errors: retry or not, with one reason each",
)
def classify_errors(ctx: LabContext) -> LabResult:
    quota = {"error": {"code": "insufficient_quota", "message": "You exceeded your quota"}}
    cases: list[tuple[str, Any]] = [
        ("500", ProviderError(500)),
        ("401", ProviderError(401)),
        ("connection reset", SocketReset(104, "Connection reset by peer")),
        ("429 with Retry-After: 10", ProviderError(429, {"Retry-After": "10"})),
        ("422", ProviderError(422)),
        ("404 from a tool endpoint just deployed", ProviderError(404, body="no route /tools/v2")),
        ("503", 503),
        ("529 overloaded", 529),
        ("408", 408),
        ("400", 400),
        ("403", 403),
        ("429 insufficient_quota", ProviderError(429, body=quota)),
        ("503 with x-should-retry: false", ProviderError(503, {"x-should-retry": "false"})),
        ("read timeout", TimeoutError("read timed out")),
        ("ValueError (a bug)", ValueError("bad prompt template")),
    ]
    t = Table("Retry or not (surefoot.resilience.classify)", ["case", "retry?", "wait", "reason"])
    facts: dict[str, Any] = {"retry": {}, "after": {}}
    for name, x in cases:
        d = classify(x)
        wait = f"{d.after:g} s" if d.after is not None else "backoff" if d.retry else "-"
        t.add(name, "retry" if d.retry else "no", wait, d.reason)
        facts["retry"][name] = d.retry
        facts["after"][name] = d.after
    # the seed's six cases; the verdicts and the wait are read from the facts
    seed_cases = [
        "500",
        "401",
        "connection reset",
        "429 with Retry-After: 10",
        "422",
        "404 from a tool endpoint just deployed",
    ]

    def _named(name: str) -> str:
        after = facts["after"][name]
        return f"{name} (after the {after:g} s it asks for)" if after is not None else name

    yes = [_named(c) for c in seed_cases if facts["retry"][c]]
    no = [c for c in seed_cases if not facts["retry"][c]]
    return LabResult(
        tables=[t],
        facts=facts,
        answer=(
            f"Retry: {', '.join(yes) or 'none'}. Do not retry: {', '.join(no) or 'none'}."
            + (
                " The classifier treats the 404 from a just-deployed tool endpoint as "
                "permanent: retrying it within seconds would hide a wrong route or an "
                "unfinished rollout."
                if "404 from a tool endpoint just deployed" in no
                else " The classifier retries the 404 from a just-deployed tool endpoint."
            )
        ),
        params={"cases": len(cases)},
        model=NO_MODEL,
    )


@experiment(
    id="resilience.waits",
    seed_file=SEED_FILE,
    exercise="Easy 2",
    title="The waits before attempts 2..7 with base 0.5 s, cap 8 s, no jitter",
)
def waits(ctx: LabContext) -> LabResult:
    b = Backoff(0.5, 8.0, "none")
    ws = b.waits(6)
    t = Table("Backoff(0.5, 8, 'none').waits(6)", ["before attempt", "wait (s)", "cumulative (s)"])
    total = 0.0
    for i, w in enumerate(ws, start=2):
        total += w
        t.add(i, w, total)
    seed = ctx.seed
    draws = 2_000 if ctx.quick else 20_000
    j = Table(
        f"Mean total of the six waits by jitter ({draws} seeded draws, seed {seed})",
        ["jitter", "mean total (s)", "min (s)", "max (s)"],
    )
    means: dict[str, float] = {}
    for kind in ("none", "full", "equal", "decorrelated"):
        rng = random.Random(seed)
        jb = Backoff(0.5, 8.0, kind)
        totals = [sum(jb.waits(6, rng)) for _ in range(draws)]
        means[kind] = sum(totals) / draws
        j.add(kind, round(means[kind], 3), round(min(totals), 3), round(max(totals), 3))
    return LabResult(
        tables=[t, j],
        facts={"waits": ws, "total": sum(ws), "jitter_mean_totals": means},
        answer=(
            f"Waits {', '.join(f'{w:g}' for w in ws)} s; total {sum(ws):g} s if all six "
            "retries run."
        ),
        params={"base": 0.5, "cap": 8.0, "draws": draws},
        model=NO_MODEL,
    )


@experiment(
    id="resilience.odds",
    seed_file=SEED_FILE,
    exercise="Easy 3",
    title="One in five: the odds a 15-call run fails, with and without retries",
)
def odds(ctx: LabContext) -> LabResult:
    p, calls, attempts = 0.02, 15, 3
    exact_one = 1 - (1 - p) ** calls
    exact_three = 1 - (1 - p**attempts) ** calls
    runs = 200_000 if ctx.quick else 2_000_000
    rng = random.Random(ctx.seed)
    rand = rng.random
    failed_one = failed_three = 0
    for _ in range(runs):
        any_fail = any_fail3 = False
        for _ in range(calls):
            if rand() < p:
                any_fail = True
                if rand() < p and rand() < p:
                    any_fail3 = True
        failed_one += any_fail
        failed_three += any_fail3
    # the same question through the library: retry_call over a seeded 2% failure injector
    lib_runs = 2_000 if ctx.quick else 20_000
    svc = faults.wrap(lambda: "ok", faults.FailFraction(p, 503, seed=ctx.seed))
    policy = RetryPolicy(max_attempts=attempts, backoff=Backoff(0, 0, "none"))
    lib_failed = 0
    for _ in range(lib_runs):
        try:
            for _ in range(calls):
                retry_call(svc, policy=policy)
        except ProviderError:
            lib_failed += 1
    t = Table(
        f"A run of {calls} calls, each failing with p = {p}",
        ["attempts per call", "exact", f"simulated ({runs:,} runs)", "formula"],
    )
    t.add(1, pct(exact_one), pct(failed_one / runs), "1 − 0.98^15")
    t.add(attempts, pct(exact_three, 4), pct(failed_three / runs, 4), "1 − (1 − 0.02^3)^15")
    lib = Table(
        f"Through retry_call + faults.FailFraction ({lib_runs:,} runs)",
        ["attempts per call", "runs failed", "share", "calls received by the fake"],
    )
    lib.add(attempts, lib_failed, pct(lib_failed / lib_runs, 3), svc.calls)
    sim_one, sim_three = failed_one / runs, failed_three / runs

    def _agrees(exact: float, sim: float) -> bool:
        # within 4 standard errors of a binomial share over ``runs`` runs
        return abs(sim - exact) <= 4 * math.sqrt(exact * (1 - exact) / runs)

    agrees = _agrees(exact_one, sim_one) and _agrees(exact_three, sim_three)
    verdict = "agree with" if agrees else "do NOT agree with"
    return LabResult(
        tables=[t, lib],
        facts={
            "simulation_agrees": agrees,
            "exact_one_attempt": exact_one,
            "exact_three_attempts": exact_three,
            "simulated_one_attempt": failed_one / runs,
            "simulated_three_attempts": failed_three / runs,
            "runs": runs,
            "library_runs": lib_runs,
            "library_failed_runs": lib_failed,
        },
        answer=(
            f"At least one failure: {pct(exact_one, 1)} (about {round(100 * exact_one)}%). "
            f"With three attempts per call: {pct(exact_three, 3)} (about "
            f"{100 * exact_three:.2f}%). {runs:,} seeded runs measured {pct(sim_one, 1)} and "
            f"{pct(sim_three, 3)}, which {verdict} the formulas within 4 standard errors; "
            f"through retry_call, {lib_failed} of {lib_runs:,} runs failed."
        ),
        params={"p": p, "calls": calls, "attempts": attempts, "runs": runs},
        model=NO_MODEL,
    )
