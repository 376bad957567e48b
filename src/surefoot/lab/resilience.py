"""Lab experiments for surefoot.resilience (seed 001), registered on import.

Each experiment answers one exercise's "Done when" with measured tables, using only the
public API. Every count is taken inside the fakes (FakeLLM, ``faults.wrap``, the fake
payment and tool services), never in the client. The model is the seeded FakeLLM.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
from collections.abc import Callable
from typing import Any

from .. import codec
from ..clock import FakeClock
from ..llm import FakeLLM
from ..resilience import (
    Backoff,
    CircuitBreaker,
    IdempotentExecutor,
    ProviderError,
    ReplyLostError,
    ResilientClient,
    RetryPolicy,
    classify,
    faults,
    retry_call,
)
from ._registry import LabContext, LabResult, Table, experiment

SEED_FILE = "001_d92b2f82bced6f8a.txt"
MSGS = [{"role": "user", "content": "Summarise the incident report in one line."}]


def _pct(x: float, digits: int = 2) -> str:
    return f"{100 * x:.{digits}f}%"


class _Reset(ConnectionResetError):
    """A connection reset, as the socket layer raises it."""


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
        ("connection reset", _Reset(104, "Connection reset by peer")),
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
    return LabResult(
        tables=[t],
        facts=facts,
        answer=(
            "Retry: 500, connection reset, 429 (after the 10 s it asks for). Do not retry: 401, "
            "422, and the 404 from a just-deployed tool endpoint — permanent by status; "
            "retrying within seconds hides a wrong route or unfinished rollout."
        ),
        params={"cases": len(cases)},
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
    t.add(1, _pct(exact_one), _pct(failed_one / runs), "1 − 0.98^15")
    t.add(attempts, _pct(exact_three, 4), _pct(failed_three / runs, 4), "1 − (1 − 0.02^3)^15")
    lib = Table(
        f"Through retry_call + faults.FailFraction ({lib_runs:,} runs)",
        ["attempts per call", "runs failed", "share", "calls received by the fake"],
    )
    lib.add(attempts, lib_failed, _pct(lib_failed / lib_runs, 3), svc.calls)
    return LabResult(
        tables=[t, lib],
        facts={
            "exact_one_attempt": exact_one,
            "exact_three_attempts": exact_three,
            "simulated_one_attempt": failed_one / runs,
            "simulated_three_attempts": failed_three / runs,
            "runs": runs,
            "library_runs": lib_runs,
            "library_failed_runs": lib_failed,
        },
        answer=(
            f"At least one failure: {_pct(exact_one, 1)} (about 26%). With three attempts per "
            f"call: {_pct(exact_three, 3)} (about 0.01%), confirmed by {runs:,} seeded runs."
        ),
        params={"p": p, "calls": calls, "attempts": attempts, "runs": runs},
    )


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
            _pct(rate, 1),
            _pct(1 - fraction**k, 1),
            round(calls / total, 3),
            round(waited / len(seeds), 1),
        )
        facts[str(k)] = {
            "success_rate": rate,
            "mean_attempts": calls / total,
            "expected": 1 - fraction**k,
        }
    return LabResult(
        tables=[t],
        facts=facts,
        answer=(
            f"Success rises from {_pct(facts['1']['success_rate'], 1)} (1 attempt) to "
            f"{_pct(facts['2']['success_rate'], 1)} (2) and {_pct(facts['4']['success_rate'], 1)} "
            f"(4) for {facts['4']['mean_attempts']:.2f} attempts per call on average."
        ),
        params={"fraction": fraction, "calls": n, "seeds": seeds},
    )


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
    for i in range(trials):
        c = FakeClock()
        durations = [rng.choice([0.1, 0.5, 3.0, 12.0, 40.0]) for _ in range(8)]
        slow_calls += sum(d > 2.0 for d in durations)
        deadline = rng.uniform(1, 30)
        tpa = rng.choice([None, 0.5, 2.0, 10.0])
        if tpa is not None and tpa >= deadline:
            tpa = None  # the deadline is the tighter limit then (and the policy would warn)
        inj = faults.chain(faults.Slow(durations), faults.FailFraction(0.4, 503, seed=i))
        s = faults.wrap(lambda: "ok", inj, clock=c)
        p = RetryPolicy(
            max_attempts=rng.randint(1, 8),
            backoff=Backoff(0.5, 8, "full"),
            deadline=deadline,
            timeout_per_attempt=tpa,
        )
        try:
            retry_call(s, policy=p, clock=c, rng=random.Random(i))
        except Exception:  # give-ups are expected; the clock is what we check
            pass
        ratio = c.elapsed / deadline
        worst = max(worst, ratio)
        over += c.elapsed > deadline + 1e-6
    b = Table(
        f"{trials} seeded trials: random slow calls, 40% 503s, random deadlines and timeouts",
        ["trials", "slow calls injected", "runs past the deadline", "worst elapsed / deadline"],
    )
    b.add(trials, slow_calls, over, round(worst, 6))
    return LabResult(
        tables=[a, b],
        facts={
            "slow_then_fast_attempts": svc.calls,
            "slow_then_fast_result": result,
            "first_error": type(events[0].error).__name__,
            "trials": trials,
            "runs_past_deadline": over,
            "worst_ratio": worst,
        },
        answer=(
            f"The slow-then-fast service succeeds on attempt {svc.calls} after a TimeoutError_ "
            f"at 1 s; in {trials} random trials no run passed its deadline "
            f"(worst elapsed/deadline {worst:.4f})."
        ),
        params={"trials": trials},
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
    return LabResult(
        tables=[t],
        facts={
            "effects": len(effects),
            "runs": [o["runs"] for o in outs],
            "replays": [o["replays"] for o in outs],
            "same_result": outs[0]["result"] == outs[1]["result"],
            "different_pids": outs[0]["pid"] != outs[1]["pid"],
            "effect_pid": int(effects[0]) if effects else None,
            "first_pid": outs[0]["pid"],
            "conflicts": [o["conflict"] for o in outs],
        },
        answer=(
            f"The action ran {len(effects)} time(s), in the first process; the restarted "
            "process returned the saved result without running it, and reusing the key "
            "with other arguments raised IdempotencyConflictError."
        ),
        params={"db": "sqlite:///<workdir>/keys.db"},
    )


def _counter(box: list[ResilientClient[str]]) -> Callable[[], int]:
    """Logical requests made so far by the client in ``box`` (bound after it is built)."""
    return lambda: box[0].requests


@experiment(
    id="resilience.resilient-client",
    seed_file=SEED_FILE,
    exercise="Hard 1",
    title="ResilientClient: 1,000 requests, primary down for 300–600, with and without breaker",
)
def resilient_client(ctx: LabContext) -> LabResult:
    n, down = (300, (90, 180)) if ctx.quick else (1_000, (300, 600))
    t = Table(
        f"{n} requests, one per simulated second; primary down for requests {down[0]}–{down[1]} "
        "(fails after 1 s); primary 0.1 s, backup 0.3 s; 3 attempts, full-jitter backoff 0.2–2 s",
        [
            "breaker",
            "succeeded",
            "sent to backup",
            "primary calls (counted in the fake)",
            "mean latency (s)",
            "mean latency in outage (s)",
        ],
    )
    facts: dict[str, Any] = {}
    for with_breaker in (False, True):
        clock = FakeClock()
        box: list[ResilientClient[str]] = []
        inj = faults.chain(
            faults.Outage(down[0], down[1], delay=0.9, counter=_counter(box)),
            faults.Slow(0.1),
        )
        primary = faults.wrap(lambda: "primary", inj, clock=clock)
        backup = faults.wrap(lambda: "backup", faults.Slow(0.3), clock=clock)
        breaker = (
            CircuitBreaker("primary", failure_threshold=5, reset_timeout=20, clock=clock)
            if with_breaker
            else None
        )
        client = ResilientClient(
            primary,
            backup,
            breaker=breaker,
            clock=clock,
            rng=random.Random(ctx.seed),
            policy=RetryPolicy(3, backoff=Backoff(0.2, 2.0, "full")),
        )
        box.append(client)
        lat: list[float] = []
        outage_lat: list[float] = []
        for i in range(1, n + 1):
            t0 = clock.monotonic()
            client.call()
            dt = clock.monotonic() - t0
            lat.append(dt)
            if down[0] <= i <= down[1]:
                outage_lat.append(dt)
            clock.advance(max(0.0, 1.0 - dt))
            if i % 100 == 0:
                ctx.progress(i + (n if with_breaker else 0), 2 * n)
        ok = client.primary_ok + client.backup_ok
        row = {
            "succeeded": ok,
            "backup": client.backup_ok,
            "primary_calls": primary.calls,
            "mean_latency": sum(lat) / n,
            "outage_latency": sum(outage_lat) / len(outage_lat),
        }
        facts["with_breaker" if with_breaker else "without_breaker"] = row
        t.add(
            "yes" if with_breaker else "no",
            ok,
            client.backup_ok,
            primary.calls,
            round(row["mean_latency"], 3),
            round(row["outage_latency"], 3),
        )
    w, wo = facts["with_breaker"], facts["without_breaker"]
    return LabResult(
        tables=[t],
        facts=facts,
        answer=(
            f"Both rows serve all {n} requests. The breaker cuts the primary's calls from "
            f"{wo['primary_calls']} to {w['primary_calls']} and the mean latency during the "
            f"outage from {wo['outage_latency']:.2f} s to {w['outage_latency']:.2f} s."
        ),
        params={"requests": n, "outage": list(down)},
    )


def _payment_service(clock: FakeClock) -> tuple[Any, dict[str, int]]:
    """A fake payment API with idempotency-key support; charges are counted inside it."""
    charges: dict[str, int] = {}
    keys = IdempotentExecutor("memory://", clock=clock)

    def charge_card(order: str, amount: int) -> dict[str, Any]:
        charges[order] = charges.get(order, 0) + 1
        return {"charge": f"ch_{order}_{charges[order]}", "amount": amount}

    def handle(order: str, amount: int, idempotency_key: str | None = None) -> dict[str, Any]:
        if idempotency_key is None:
            return charge_card(order, amount)
        return keys.run(idempotency_key, charge_card, order, amount)

    return handle, charges


@experiment(
    id="resilience.payments",
    seed_file=SEED_FILE,
    exercise="Hard 2",
    title="A lost reply end to end: keyless vs keyed payment client",
)
def payments(ctx: LabContext) -> LabResult:
    n = 100 if ctx.quick else 500
    rng = random.Random(ctx.seed)
    orders = [(f"order-{i:04d}", rng.randint(5, 500)) for i in range(n)]
    t = Table(
        f"{n} payments; the fake service drops the reply to the first request of each payment "
        "after charging; the client retries (3 attempts)",
        [
            "client",
            "payments",
            "requests received",
            "replies lost",
            "charges made",
            "double charges",
            "client saw success",
        ],
    )
    facts: dict[str, Any] = {}
    for keyed in (False, True):
        clock = FakeClock()
        handle, charges = _payment_service(clock)
        svc = faults.wrap(handle, faults.DropReply(first_per_key=True), clock=clock)
        policy = RetryPolicy(3, backoff=Backoff(0.1, 1.0, "full"))
        ok = 0
        for order, amount in orders:
            extra: dict[str, Any] = {"idempotency_key": f"pay:{order}"} if keyed else {}
            try:
                # key= names the payment for the fault injector only; it is not sent
                retry_call(
                    svc,
                    order,
                    amount,
                    policy=policy,
                    clock=clock,
                    rng=random.Random(ctx.seed),
                    key=order,
                    **extra,
                )
                ok += 1
            except ReplyLostError:
                pass
        doubles = sum(1 for c in charges.values() if c > 1)
        made = sum(charges.values())
        name = "with keys" if keyed else "without keys"
        t.add(name, n, svc.calls, svc.lost_replies, made, doubles, ok)
        facts["keyed" if keyed else "keyless"] = {
            "charges": made,
            "double_charges": doubles,
            "requests": svc.calls,
            "lost_replies": svc.lost_replies,
            "succeeded": ok,
        }
    return LabResult(
        tables=[t],
        facts=facts,
        answer=(
            f"Without keys every lost reply became a second charge "
            f"({facts['keyless']['double_charges']} of {n} payments double-charged); with a "
            f"key reused across retries there were {facts['keyed']['double_charges']} double "
            "charges: the service replayed the saved charge."
        ),
        params={"payments": n},
    )


class _Crash(Exception):
    """A simulated crash of the agent process."""


_STEPS = 6
_TOOL_STEPS = (2, 4)  # steps whose tool has a side effect (send an email, publish a post)


def _agent(
    run_id: str, path: Any, llm: FakeLLM, tool: Any, keyed: bool, crash: tuple[int, str] | None
) -> str:
    """Run (or resume) the agent loop, saving its messages after every step."""
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            state = codec.loads(f.read())
        step, messages = state["step"], state["messages"]
    else:
        step, messages = 0, [{"role": "user", "content": f"Research task {run_id}"}]
    while step < _STEPS:
        if crash == (step, "before"):
            raise _Crash(f"crash before step {step}")
        reply = llm.create(model="fake-1", messages=messages).choices[0].message.content
        messages.append({"role": "assistant", "content": reply})
        if step in _TOOL_STEPS:
            key = f"{run_id}:{step}" if keyed else None
            receipt = tool(f"{run_id}/{step}", reply[:24], idempotency_key=key)
            messages.append({"role": "tool", "content": json.dumps(receipt)})
        if crash == (step, "after"):
            raise _Crash(f"crash after step {step}'s effects, before saving")
        step += 1
        tmp = f"{path}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(codec.dumps({"step": step, "messages": messages}))
        os.replace(tmp, path)
    return str(messages[-1]["content"])


def _tool_service() -> tuple[Any, dict[str, int]]:
    """A fake tool with a side effect and idempotency-key support; effects counted inside."""
    effects: dict[str, int] = {}
    store = IdempotentExecutor("memory://")

    def send(target: str, body: str) -> dict[str, str]:
        effects[target] = effects.get(target, 0) + 1
        return {"sent": target, "n": str(effects[target])}

    def tool(target: str, body: str, idempotency_key: str | None = None) -> Any:
        if idempotency_key is None:
            return send(target, body)
        return store.run(idempotency_key, send, target, body)

    return tool, effects


@experiment(
    id="resilience.crash-resume",
    seed_file=SEED_FILE,
    exercise="Hard 3",
    title="An agent loop that crashes at a random step and resumes from its saved messages",
)
def crash_resume(ctx: LabContext) -> LabResult:
    runs = 100
    rng = random.Random(ctx.seed)
    crashes = [(rng.randrange(_STEPS), rng.choice(["before", "after"])) for _ in range(runs)]
    t = Table(
        f"{runs} runs of a {_STEPS}-step agent (tools with effects at steps "
        f"{', '.join(map(str, _TOOL_STEPS))}), one crash per run at a seeded step, resumed "
        "from the saved messages",
        [
            "tool keys",
            "runs matching the uncrashed answer",
            "effects expected",
            "effects made (counted in the tool)",
            "duplicate effects",
            "extra model calls",
        ],
    )
    facts: dict[str, Any] = {}
    for keyed in (True, False):
        tool, effects = _tool_service()
        ref_tool, _ = _tool_service()
        ref_llm = FakeLLM(seed=ctx.seed)
        ref_dir = ctx.workdir / f"ref-{keyed}"
        ref_dir.mkdir()
        llm = FakeLLM(seed=ctx.seed)
        run_dir = ctx.workdir / f"runs-{keyed}"
        run_dir.mkdir()
        matched = 0
        for i in range(runs):
            run_id = f"run-{i:03d}"
            expected = _agent(run_id, ref_dir / f"{run_id}.json", ref_llm, ref_tool, keyed, None)
            path = run_dir / f"{run_id}.json"
            try:
                _agent(run_id, path, llm, tool, keyed, crashes[i])
                raise AssertionError("the injected crash did not happen")  # pragma: no cover
            except _Crash:
                pass
            got = _agent(run_id, path, llm, tool, keyed, None)  # resume from the file
            matched += got == expected
            ctx.progress(i + 1 + (0 if keyed else runs), 2 * runs)
        expected_effects = runs * len(_TOOL_STEPS)
        made = sum(effects.values())
        dup = sum(c - 1 for c in effects.values() if c > 1)
        extra_calls = llm.calls - ref_llm.calls
        t.add(
            'f"{run_id}:{step}"' if keyed else "none",
            f"{matched}/{runs}",
            expected_effects,
            made,
            dup,
            extra_calls,
        )
        facts["keyed" if keyed else "keyless"] = {
            "matched": matched,
            "runs": runs,
            "effects_expected": expected_effects,
            "effects_made": made,
            "duplicates": dup,
            "extra_model_calls": extra_calls,
        }
    k = facts["keyed"]
    return LabResult(
        tables=[t],
        facts=facts,
        answer=(
            f'With keys f"{{run_id}}:{{step}}": {k["matched"]}/{runs} resumed runs equal the '
            f"uncrashed answer and the tools made exactly {k['effects_made']} of "
            f"{k['effects_expected']} effects; without keys the same crashes repeated "
            f"{facts['keyless']['duplicates']} effects."
        ),
        params={"runs": runs, "steps": _STEPS, "tool_steps": list(_TOOL_STEPS)},
    )
