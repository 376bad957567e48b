"""The workflows the conformance suite runs on every engine, registered on a given app.

Written once, as a user would: async steps and workflows, ``app.sleep``, ``app.wait_for``,
``asyncio.gather``, effects with keys and compensations. What each step received is
appended to ``calls`` (a list shared by the apps of one test, so a restarted worker's
calls are counted with the first one's).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from surefoot import durable
from surefoot.resilience import Backoff, RetryPolicy


@dataclass
class Finding:
    """A dataclass result, not registered with the codec: it comes back a Finding (by the
    step's return annotation), on replay from a journal as on Temporal."""

    topic: str
    score: float


class Flaky(Exception):
    """A step failure that the retry policy retries."""


def build(app: durable.App, calls: list[Any]) -> SimpleNamespace:
    """Register the suite's steps and workflows on ``app``; they append to ``calls``."""

    @app.step
    async def plan(q: str) -> list[str]:
        calls.append(("plan", q))
        return [f"{q}-a", f"{q}-b"]

    @app.step
    async def score(topic: str) -> Finding:
        calls.append(("score", topic))
        return Finding(topic, float(len(topic)))

    @app.step
    async def describe(f: Finding) -> str:
        calls.append(("describe", type(f).__name__))
        return f"{f.topic}={f.score:g}"

    quick = Backoff(base=0.01, cap=0.01, jitter="none")

    @app.step(retry=RetryPolicy(max_attempts=3, backoff=quick, retry_on=(Flaky,)))
    async def flaky(n: int) -> int:
        ctx = durable.current_run()
        calls.append(("flaky", ctx.attempt, ctx.key))
        if ctx.attempt < n:
            raise Flaky(f"attempt {ctx.attempt} of a step that needs {n}")
        return ctx.attempt

    @app.step(effect=True)
    async def send(text: str, *, key: str) -> str:
        calls.append(("send", key, durable.current_run().attempt))
        return f"sent {text} as {key}"

    def unbook(item: str, *, key: str, result: str) -> None:
        calls.append(("unbook", item, key, result))
        if item == "stuck":
            raise RuntimeError(f"cannot cancel {item}")

    @app.step(effect=True, compensate=unbook, compensate_retry=2)
    async def book(item: str, *, key: str) -> str:
        calls.append(("book", item, key))
        return f"booking {item}"

    @app.step
    async def fail(why: str) -> None:
        calls.append(("fail", why))
        raise ValueError(why)

    @app.workflow
    async def results(q: str) -> dict[str, Any]:
        topics = await plan(q)
        found = await score(topics[0])
        text = await describe(found)
        return {"topics": topics, "text": text, "score": found.score}

    @app.workflow
    async def replay(q: str) -> list[str]:
        topics = await plan(q)
        found = await score(topics[0])
        go = await app.wait_for("go", timeout=120)
        return [*topics, await describe(found), go]

    @app.workflow
    async def keys(text: str) -> list[str]:
        await plan(text)
        first = await send(text)
        second = await send(text + "!")
        return [first, second]

    @app.workflow
    async def retries(n: int) -> int:
        return int(await flaky(n))

    @app.workflow
    async def timer(seconds: float) -> str:
        before = await plan("before")
        await app.sleep(seconds)
        after = await plan("after")
        return f"{before[0]} {after[0]}"

    @app.workflow
    async def signals() -> list[Any]:
        first = await app.wait_for("note", timeout=60)
        second = await app.wait_for("note", timeout=1.5, default="no second note")
        return [first, second]

    @app.workflow
    async def typed_signal() -> str:
        got = await app.wait_for("finding", timeout=60, type=Finding)
        return f"{type(got).__name__} {got.topic}"

    @app.workflow
    async def saga(items: list[str]) -> str:
        for item in items:
            await book(item)
        await fail("the trip fell through")
        return "unreachable"

    @app.workflow
    async def fan_out(qs: list[str]) -> list[Any]:
        firsts = await asyncio.gather(*(plan(q) for q in qs))
        keyed = await asyncio.gather(send("x"), send("y"))
        return [list(f) for f in firsts] + keyed

    @app.workflow(name="versioned", version="1")
    async def versioned_v1(q: str) -> str:
        await app.wait_for("go", timeout=120)
        return f"v1 {(await plan(q))[0]}"

    @app.workflow(name="versioned", version="2")
    async def versioned_v2(q: str) -> str:
        await app.wait_for("go", timeout=120)
        return f"v2 {(await score(q)).topic}"

    @app.workflow
    async def clock_read() -> float:
        await book("seat")
        return time.time()  # not replayable: the clock belongs in a step

    return SimpleNamespace(**{k: v for k, v in locals().items() if k not in ("app", "calls")})


def build_v2_only(app: durable.App, calls: list[Any]) -> SimpleNamespace:
    """Only version 2 of ``versioned`` (a deploy that dropped version 1 too early)."""

    @app.step
    async def score(topic: str) -> Finding:
        calls.append(("score", topic))
        return Finding(topic, float(len(topic)))

    @app.workflow(name="versioned", version="2")
    async def versioned_v2(q: str) -> str:
        await app.wait_for("go", timeout=120)
        return f"v2 {(await score(q)).topic}"

    return SimpleNamespace(versioned_v2=versioned_v2)
