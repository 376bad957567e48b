"""The app the crash tests run in real worker processes.

Every model call and effect is counted in a separate SQLite *ledger* file (path in
``SUREFOOT_LEDGER``), written and committed before the call returns, so counts survive a
SIGKILL of the worker and are taken outside the worker's journal.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3

from surefoot import durable

app = durable.App("sqlite://", lease=1.0, poll=0.05)

STEP_DELAY = float(os.environ.get("SUREFOOT_STEP_DELAY", "0.1"))


def ledger(kind: str, name: str, key: str = "") -> bool:
    """Record one call; for effects with a key, return False if the key was seen (dedup)."""
    path = os.environ["SUREFOOT_LEDGER"]
    with sqlite3.connect(path, timeout=30, isolation_level=None) as c:
        c.execute("PRAGMA journal_mode=WAL")
        c.execute("PRAGMA synchronous=FULL")
        c.execute(
            "CREATE TABLE IF NOT EXISTS calls (id INTEGER PRIMARY KEY, kind TEXT, name TEXT, "
            "key TEXT, pid INTEGER)"
        )
        c.execute("CREATE TABLE IF NOT EXISTS done (key TEXT PRIMARY KEY)")
        c.execute("BEGIN IMMEDIATE")
        c.execute(
            "INSERT INTO calls(kind, name, key, pid) VALUES (?, ?, ?, ?)",
            (kind, name, key, os.getpid()),
        )
        fresh = True
        if key:
            fresh = c.execute("INSERT OR IGNORE INTO done(key) VALUES (?)", (key,)).rowcount == 1
        c.execute("COMMIT")
    return fresh


@app.step
async def think(i: int) -> str:
    ledger("model", f"think{i}")
    await asyncio.sleep(STEP_DELAY)
    return f"thought {i}"


@app.step
async def slow(seconds: float) -> str:
    ledger("model", "slow")
    await asyncio.sleep(seconds)
    return "slow done"


@app.step(effect=True)
async def publish(text: str, *, key: str | None) -> str:
    fresh = ledger("effect", "publish", key or "")
    return "published" if fresh else "deduplicated"


@app.workflow(version="1")
async def agent(n: int) -> str:
    out = [await think(i) for i in range(n)]
    return await publish(" / ".join(out))


@app.workflow(version="1")
async def stuck(seconds: float) -> str:
    first = await slow(seconds)
    return await publish(first)
