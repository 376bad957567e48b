"""Seed 001 Medium 1-3: retrying a FakeLLM, per-attempt timeouts, idempotency across processes."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
from typing import Any

from surefoot.clock import FakeClock
from surefoot.errors import TimeoutError_
from surefoot.llm import FakeLLM
from surefoot.resilience import (
    Backoff,
    ProviderError,
    RetryPolicy,
    faults,
    retry_call,
)

from .._registry import NO_MODEL, LabContext, LabResult, Table, experiment
from ._common import MSGS, SEED_FILE, pct


@experiment(
    id="resilience.llm-retry",
    seed_file=SEED_FILE,
    exercise="Medium 1",
    title="FakeLLM with seeded 503s under retry_call: success rate and attempts",
)
def llm_retry(ctx: LabContext) -> LabResult:
    fraction, n = 0.3, 200
    seeds = ctx.seed_list(3 if ctx.quick else 10)
    t = Table(
        f"{n} calls per seed, {int(fraction * 100)}% of requests fail with 503, "
        f"mean of {len(seeds)} seeds",
        ["max_attempts", "success rate", "expected 1−f^k", "mean attempts", "simulated wait (s)"],
    )
    facts: dict[str, Any] = {}
    for k in (1, 2, 4):
        ok = calls = 0
        waited = 0.0
        for s in seeds:
            clock = FakeClock()
            llm = FakeLLM(seed=s, clock=clock, failures=faults.FailFraction(fraction, 503, seed=s))
            policy = RetryPolicy(max_attempts=k, backoff=Backoff(0.5, 8, "full"))
            rng = random.Random(s)
            for _ in range(n):
                try:
                    retry_call(
                        llm.create,
                        model="fake-1",
                        messages=MSGS,
                        policy=policy,
                        clock=clock,
                        rng=rng,
                    )
                    ok += 1
                except ProviderError:
                    pass
            calls += llm.calls  # counted inside the fake
            waited += sum(clock.sleeps)
        total = n * len(seeds)
        rate = ok / total
        t.add(
            k,
            pct(rate, 1),
            pct(1 - fraction**k, 1),
            round(calls / total, 3),
            round(waited / len(seeds), 1),
        )
        facts[str(k)] = {
            "success_rate": rate,
            "mean_attempts": calls / total,
            "expected": 1 - fraction**k,
        }
    rates = [facts[k]["success_rate"] for k in ("1", "2", "4")]
    trend = "rises" if rates[0] < rates[1] < rates[2] else "does not rise steadily"
    return LabResult(
        tables=[t],
        facts=facts,
        answer=(
            f"Success {trend} from {pct(facts['1']['success_rate'], 1)} (1 attempt) to "
            f"{pct(facts['2']['success_rate'], 1)} (2) and {pct(facts['4']['success_rate'], 1)} "
            f"(4) for {facts['4']['mean_attempts']:.2f} attempts per call on average."
        ),
        params={"fraction": fraction, "calls": n, "seeds": seeds},
    )


class _CountSlow:
    """An injector wrapper, part of the fake: counts requests received with a long delay."""

    def __init__(self, inner: faults.Injector, over: float) -> None:
        self.inner = inner
        self.over = over
        self.slow = 0

    def plan(self, n: int, key: str | None = None) -> faults.Fault | None:
        f = self.inner.plan(n, key)
        if f is not None and f.delay > self.over:
            self.slow += 1
        return f


@experiment(
    id="resilience.timeouts",
    seed_file=SEED_FILE,
    exercise="Medium 2",
    title="Per-attempt timeouts on the fake clock, and a deadline that holds",
)
def timeouts(ctx: LabContext) -> LabResult:
    clock = FakeClock()
    svc = faults.wrap(lambda: "ok", faults.Slow([5.0, 0.2]), clock=clock)
    events: list[Any] = []
    policy = RetryPolicy(max_attempts=3, backoff=Backoff(0.5, 8, "none"), timeout_per_attempt=1.0)
    result = retry_call(svc, policy=policy, clock=clock, on_retry=events.append)
    a = Table(
        "Slow-then-fast service (5 s, then 0.2 s), timeout_per_attempt = 1 s, backoff 0.5 s",
        ["attempt", "outcome", "clock at the end (s)"],
    )
    a.add(1, type(events[0].error).__name__, events[0].elapsed)
    a.add(2, result, round(clock.elapsed, 3))
    trials = 300 if ctx.quick else 3_000
    rng = random.Random(ctx.seed)
    worst = 0.0
    over = 0
    slow_calls = 0
    outcomes = {"ok": 0, "ProviderError": 0, "TimeoutError_": 0}
    for i in range(trials):
        c = FakeClock()
        durations = [rng.choice([0.1, 0.5, 3.0, 12.0, 40.0]) for _ in range(8)]
        slow = _CountSlow(faults.Slow(durations), over=2.0)
        deadline = rng.uniform(1, 30)
        tpa = rng.choice([None, 0.5, 2.0, 10.0])
        if tpa is not None and tpa >= deadline:
            tpa = None  # the deadline is the tighter limit then (and the policy would warn)
        inj = faults.chain(slow, faults.FailFraction(0.4, 503, seed=i))
        s = faults.wrap(lambda: "ok", inj, clock=c)
        p = RetryPolicy(
            max_attempts=rng.randint(1, 8),
            backoff=Backoff(0.5, 8, "full"),
            deadline=deadline,
            timeout_per_attempt=tpa,
        )
        try:
            retry_call(s, policy=p, clock=c, rng=random.Random(i))
            outcomes["ok"] += 1
        except ProviderError:  # gave up on 503s
            outcomes["ProviderError"] += 1
        except TimeoutError_:  # gave up on timeouts or the deadline
            outcomes["TimeoutError_"] += 1
        slow_calls += slow.slow  # counted by the fake: slow requests that were received
        ratio = c.elapsed / deadline
        worst = max(worst, ratio)
        over += c.elapsed > deadline + 1e-6
    b = Table(
        f"{trials} seeded trials: random slow calls, 40% 503s, random deadlines and timeouts",
        [
            "trials",
            "slow calls received (> 2 s)",
            "succeeded",
            "gave up: ProviderError",
            "gave up: TimeoutError_",
            "runs past the deadline",
            "worst elapsed / deadline",
        ],
    )
    b.add(
        trials,
        slow_calls,
        outcomes["ok"],
        outcomes["ProviderError"],
        outcomes["TimeoutError_"],
        over,
        round(worst, 6),
    )
    first_at = events[0].elapsed
    passed = "no run passed its deadline" if over == 0 else f"{over} runs passed their deadline"
    return LabResult(
        tables=[a, b],
        facts={
            "slow_then_fast_attempts": svc.calls,
            "slow_then_fast_result": result,
            "first_error": type(events[0].error).__name__,
            "first_error_at": first_at,
            "trials": trials,
            "slow_calls": slow_calls,
            "outcomes": outcomes,
            "runs_past_deadline": over,
            "worst_ratio": worst,
        },
        answer=(
            f"The slow-then-fast service returns {result!r} on attempt {svc.calls} after a "
            f"{type(events[0].error).__name__} at {first_at:g} s; in {trials} random trials "
            f"{passed} (worst elapsed/deadline {worst:.4f}; {outcomes['ok']} succeeded, "
            f"{outcomes['ProviderError'] + outcomes['TimeoutError_']} gave up)."
        ),
        params={"trials": trials},
        model=NO_MODEL,
    )


_CHILD = textwrap.dedent(
    """
    import json, os, sys
    from surefoot.errors import IdempotencyConflictError
    from surefoot.resilience import IdempotentExecutor
    db, marker = sys.argv[1], sys.argv[2]

    def place_order(item, qty):
        with open(marker, "a") as f:
            f.write(f"{os.getpid()}\\n")
        return {"order_id": "ord-7f3a", "item": item, "qty": qty}

    ex = IdempotentExecutor(f"sqlite:///{db}")
    out = ex.run("order-42", place_order, "book", 2)
    try:
        ex.run("order-42", place_order, "book", 3)
        conflict = False
    except IdempotencyConflictError:
        conflict = True
    print(json.dumps({"pid": os.getpid(), "result": out, "runs": ex.runs,
                      "replays": ex.replays, "conflict": conflict}))
    """
)


@experiment(
    id="resilience.idempotency-sqlite",
    seed_file=SEED_FILE,
    exercise="Medium 3",
    title="Idempotency keys in SQLite survive a restart (a second process)",
)
def idempotency_sqlite(ctx: LabContext) -> LabResult:
    db = ctx.workdir / "keys.db"
    marker = ctx.workdir / "effects.txt"
    t = Table(
        f"Two processes, one after the other, on {db.name}: run('order-42', place_order)",
        ["process", "pid", "result", "action ran here", "replayed", "other args → conflict"],
    )
    outs = []
    for i in (1, 2):
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD, str(db), str(marker)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"child process {i} failed: {proc.stderr.strip()[-500:]}")
        out = json.loads(proc.stdout)
        outs.append(out)
        r = out["result"]
        t.add(
            f"{i} ({'first' if i == 1 else 'restart'})",
            out["pid"],
            f"{r['order_id']} {r['item']} ×{r['qty']}",
            out["runs"],
            out["replays"],
            out["conflict"],
        )
        ctx.progress(i, 2)
    effects = marker.read_text().split()
    effect_pid = int(effects[0]) if effects else None
    where = (
        "in the first process"
        if effect_pid == outs[0]["pid"]
        else f"in process {effect_pid} (not the first)"
    )
    replayed = outs[1]["runs"] == 0 and outs[1]["replays"] == 1
    n_conflicts = sum(o["conflict"] for o in outs)
    return LabResult(
        tables=[t],
        facts={
            "effects": len(effects),
            "runs": [o["runs"] for o in outs],
            "replays": [o["replays"] for o in outs],
            "same_result": outs[0]["result"] == outs[1]["result"],
            "different_pids": outs[0]["pid"] != outs[1]["pid"],
            "effect_pid": effect_pid,
            "first_pid": outs[0]["pid"],
            "conflicts": [o["conflict"] for o in outs],
        },
        answer=(
            f"The action ran {len(effects)} time(s), {where}; the restarted process "
            + (
                "returned the saved result without running it"
                if replayed
                else f"ran it {outs[1]['runs']} time(s) and replayed {outs[1]['replays']}"
            )
            + f", and reusing the key with other arguments raised IdempotencyConflictError "
            f"in {n_conflicts} of {len(outs)} processes."
        ),
        params={"db": "sqlite:///<workdir>/keys.db"},
        model=NO_MODEL,
    )
