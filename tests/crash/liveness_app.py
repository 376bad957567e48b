"""The app of the liveness crash tests: one long workflow of short steps, run by real worker
processes with a lease far longer than the test (only liveness can explain a takeover)."""

from __future__ import annotations

import asyncio

from surefoot import durable

app = durable.App("sqlite://", lease=600.0, poll=0.05)


@app.step
async def tick(i: int) -> int:
    await asyncio.sleep(0.05)
    return i


@app.workflow
async def long(n: int) -> int:
    for i in range(n):
        await tick(i)
    return n
