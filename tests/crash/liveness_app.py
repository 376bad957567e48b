"""The app of the liveness crash tests: one long workflow of short steps, and a queue of
runs that call a service, run by real worker processes with a lease far longer than the
test (only liveness can explain a takeover)."""

from __future__ import annotations

import asyncio
import os
import sqlite3

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


# -- a named queue whose runs call a service; every call is recorded in a SQLite ledger
# (``SUREFOOT_LEDGER``), committed before the call goes on, so the counts survive a SIGKILL

mail = app.queue("mail", concurrency=2, worker_concurrency=1, rate=(8, 600.0))


def ledger(kind: str, name: str) -> None:
    """Record one event at the service (committed before returning)."""
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
    await asyncio.sleep(1.0)  # long enough that the test kills a worker inside it
    ledger("exit", f"send{i}")
    return i


@app.workflow
async def mailer(i: int) -> int:
    return await send(i)
