"""The app of the schedule crash test, run in real worker processes.

A cron tick is a minute, too long for a test: every process of the test (the workers and
the test itself) reads a *scaled* clock, ``T0 + (time.time() - T0) * SPEED`` with ``T0``
and ``SPEED`` from the environment, so a tick passes every ``60 / SPEED`` real seconds
and all processes agree on which tick is due. Leases are given in that time too. Nothing
of a schedule's logic depends on the clock's speed: the tick is moved by compare-and-set
and its run id is keyed by the tick, whatever the time is.

Each tick's run records its step in a SQLite *ledger* (``SUREFOOT_LEDGER``), committed
before the step returns, so the counts survive a SIGKILL.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time

from surefoot import durable


class ScaledClock:
    """Wall time running ``SPEED`` times faster from ``T0`` (shared by every process)."""

    def __init__(self) -> None:
        self.t0 = float(os.environ.get("SUREFOOT_T0", "0") or time.time())
        self.speed = float(os.environ.get("SUREFOOT_SPEED", "1"))

    def now(self) -> float:
        return self.t0 + (time.time() - self.t0) * self.speed

    def monotonic(self) -> float:
        return time.monotonic() * self.speed

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds / self.speed)

    async def asleep(self, seconds: float) -> None:
        await asyncio.sleep(max(seconds, 0) / self.speed)


app = durable.App("sqlite://", lease=60.0, poll=0.05, clock=ScaledClock())


def ledger(kind: str, name: str) -> None:
    """Record one event (committed before returning)."""
    with sqlite3.connect(os.environ["SUREFOOT_LEDGER"], timeout=30, isolation_level=None) as c:
        c.execute("PRAGMA journal_mode=WAL")
        c.execute(
            "CREATE TABLE IF NOT EXISTS calls (id INTEGER PRIMARY KEY, kind TEXT, name TEXT, "
            "pid INTEGER)"
        )
        c.execute("INSERT INTO calls(kind, name, pid) VALUES (?, ?, ?)", (kind, name, os.getpid()))


@app.step
async def report() -> str:
    run_id = durable.current_run().run_id
    ledger("tick", run_id)
    await asyncio.sleep(0.02)
    return run_id


@app.workflow
async def ticker() -> str:
    return await report()


app.schedule("every-minute", ticker, cron="* * * * *", catchup="all")
