"""Seed 001 Hard 1-3: a resilient client in an outage, keyed payments, crash and resume."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from typing import Any

from surefoot import codec
from surefoot.clock import FakeClock
from surefoot.llm import FakeLLM
from surefoot.resilience import (
    Backoff,
    CircuitBreaker,
    IdempotentExecutor,
    ReplyLostError,
    ResilientClient,
    RetryPolicy,
    faults,
    retry_call,
)

from .._registry import NO_MODEL, LabContext, LabResult, Table, experiment
from ._common import SEED_FILE


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
        # counted inside the fakes: effects are replies the primary/backup actually returned
        ok = primary.effects + backup.effects
        row = {
            "succeeded": ok,
            "backup": backup.effects,
            "backup_calls": backup.calls,
            "primary_calls": primary.calls,
            "mean_latency": sum(lat) / n,
            "outage_latency": sum(outage_lat) / len(outage_lat),
        }
        facts["with_breaker" if with_breaker else "without_breaker"] = row
        t.add(
            "yes" if with_breaker else "no",
            ok,
            backup.effects,
            primary.calls,
            round(row["mean_latency"], 3),
            round(row["outage_latency"], 3),
        )
    w, wo = facts["with_breaker"], facts["without_breaker"]
    served = (
        f"Both rows serve all {n} requests"
        if w["succeeded"] == wo["succeeded"] == n
        else f"Served {wo['succeeded']} of {n} requests without the breaker and "
        f"{w['succeeded']} with it"
    )
    verb = "cuts" if w["primary_calls"] < wo["primary_calls"] else "does not cut"
    return LabResult(
        tables=[t],
        facts=facts,
        answer=(
            f"{served} (counted in the primary and backup fakes). The breaker {verb} the "
            f"primary's calls: {wo['primary_calls']} without it, {w['primary_calls']} with it; "
            f"the mean latency during the outage is {wo['outage_latency']:.2f} s without and "
            f"{w['outage_latency']:.2f} s with it."
        ),
        params={"requests": n, "outage": list(down)},
        model=NO_MODEL,
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
    kl, ky = facts["keyless"], facts["keyed"]
    every = "every" if kl["double_charges"] == kl["lost_replies"] else "not every"
    replay = (
        "the service replayed the saved charge"
        if ky["double_charges"] == 0 and ky["charges"] == n
        else f"{ky['charges']} charges were made for {n} payments"
    )
    return LabResult(
        tables=[t],
        facts=facts,
        answer=(
            f"Without keys {every} lost reply became a second charge "
            f"({kl['lost_replies']} replies lost, {kl['double_charges']} of {n} payments "
            f"double-charged); with a key reused across retries there were "
            f"{ky['double_charges']} double charges: {replay}."
        ),
        params={"payments": n},
        model=NO_MODEL,
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
            f"uncrashed answer and the tools made "
            f"{'exactly ' if k['effects_made'] == k['effects_expected'] else ''}"
            f"{k['effects_made']} effects for {k['effects_expected']} expected; without keys "
            "the same crashes repeated "
            f"{facts['keyless']['duplicates']} effects."
        ),
        params={"runs": runs, "steps": _STEPS, "tool_steps": list(_TOOL_STEPS)},
    )
