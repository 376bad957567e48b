"""The app of the queue and child-run crash tests, run in real worker processes.

Each step records itself in a SQLite *ledger* (``SUREFOOT_LEDGER``), committed before
the step goes on, so the counts survive a SIGKILL and are read outside the workers.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3

from surefoot import durable

app = durable.App("sqlite://", lease=1.0, poll=0.05)
mail = app.queue("mail", concurrency=2)

DELAY = float(os.environ.get("SUREFOOT_STEP_DELAY", "0.3"))


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
async def send(i: int) -> int:
    ledger("enter", f"send{i}")
    await asyncio.sleep(DELAY)
    ledger("exit", f"send{i}")
    return i


@app.workflow
async def mailer(i: int) -> int:
    return await send(i)


@app.step
async def kid_work(x: int) -> int:
    ledger("kid", "kid_work")
    await asyncio.sleep(DELAY)
    return 3 * x


@app.workflow
async def kid(x: int) -> int:
    return await kid_work(x)


@app.step
async def after(v: int) -> int:
    ledger("parent", "after")
    return v + 1


@app.workflow
async def parent(x: int) -> int:
    return await after(await app.child(kid, x))


@app.step
async def old_tax(x: int) -> int:
    ledger("branch", "old")
    return x + 1


@app.step
async def new_tax(x: int) -> int:
    ledger("branch", "new")
    return x + 2


@app.step
async def receipt(t: int) -> int:
    ledger("receipt", "receipt")
    return t * 10


@app.workflow
async def order(x: int) -> int:
    t = await new_tax(x) if app.patched("tax-fix") else await old_tax(x)
    return await receipt(t)
