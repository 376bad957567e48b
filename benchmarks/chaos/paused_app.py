"""The durable app the paused-holder campaign runs in its worker processes.

Each execution of a step body is counted in a separate SQLite *ledger* (path in
``SUREFOOT_LEDGER``), committed before the body returns, with the worker, the run's epoch
as the worker saw it and the effect's idempotency key, so the counts survive a SIGKILL and
are taken outside the journal; the ledger applies each key once, as a service that
deduplicates by key would.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3

from surefoot import durable

app = durable.App("sqlite://", lease=1.0, poll=0.05)


def ledger(kind: str, name: str, key: str = "") -> bool:
    """Record one execution; for an effect, False when its key was applied before."""
    with sqlite3.connect(os.environ["SUREFOOT_LEDGER"], timeout=30, isolation_level=None) as c:
        c.execute("PRAGMA journal_mode=WAL")
        c.execute(
            "CREATE TABLE IF NOT EXISTS calls (id INTEGER PRIMARY KEY, kind TEXT, name TEXT, "
            "key TEXT, worker TEXT, applied INTEGER)"
        )
        c.execute("CREATE TABLE IF NOT EXISTS done (key TEXT PRIMARY KEY)")
        c.execute("BEGIN IMMEDIATE")
        fresh = True
        if key:
            fresh = c.execute("INSERT OR IGNORE INTO done(key) VALUES (?)", (key,)).rowcount == 1
        c.execute(
            "INSERT INTO calls(kind, name, key, worker, applied) VALUES (?, ?, ?, ?, ?)",
            (kind, name, key, os.environ.get("SUREFOOT_WORKER", ""), int(fresh)),
        )
        c.execute("COMMIT")
    return fresh


@app.step
async def slow(seconds: float) -> str:
    ledger("model", "slow")
    await asyncio.sleep(seconds)
    return "slow done"


@app.step(effect=True)
async def publish(text: str, *, key: str | None) -> str:
    return "published" if ledger("effect", "publish", key or "") else "deduplicated"


@app.workflow(version="1")
async def stuck(seconds: float) -> str:
    first = await slow(seconds)
    return await publish(first)
