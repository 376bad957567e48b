"""The ledger: what the fake outside services received, kept outside the worker.

Model calls, tool reads, publishes and unpublishes are recorded by the fake services at
the moment they *receive* a request, in a SQLite file of their own (WAL, many processes).
A worker killed with SIGKILL cannot take the ledger with it, so duplicates and repeated
model calls are counted outside the process that made them.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from surefoot.errors import ConfigError
from surefoot.storage.sqlite import SQLiteDB

__all__ = ["Ledger", "LedgerTotals"]

_MIGRATIONS = [
    """
    CREATE TABLE agent_calls (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run TEXT NOT NULL,
        service TEXT NOT NULL,
        step TEXT NOT NULL,
        tokens INTEGER NOT NULL DEFAULT 0,
        cost REAL NOT NULL DEFAULT 0,
        at REAL NOT NULL,
        pid INTEGER NOT NULL
    );
    CREATE INDEX agent_calls_run ON agent_calls(run, service, step);
    CREATE TABLE agent_posts (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run TEXT NOT NULL,
        channel TEXT NOT NULL,
        key TEXT UNIQUE,
        content TEXT NOT NULL,
        at REAL NOT NULL,
        removed_at REAL
    );
    CREATE INDEX agent_posts_run ON agent_posts(run, channel)
    """
]


@dataclass(frozen=True, slots=True)
class LedgerTotals:
    """What the services received, summed over some runs.

    Attributes:
        runs: runs seen by any service. model_calls / tokens / cost: model calls received,
            priced tokens and their USD price. tool_calls: search and read requests.
        publish_calls: publish requests received. posts: posts actually created (effects).
        duplicate_posts: posts beyond the first per run and channel (duplicate effects).
        removed: posts taken down by ``unpublish``. repeated_model_calls: model calls
            beyond the first per run and step.
        calls_by_step: model and tool calls per step name.
    """

    runs: int
    model_calls: int
    tokens: int
    cost: float
    tool_calls: int
    publish_calls: int
    posts: int
    duplicate_posts: int
    removed: int
    repeated_model_calls: int
    calls_by_step: dict[str, int] = field(default_factory=dict)


class Ledger:
    """A SQLite file where the fake services record what they receive.

    Args:
        path: the ledger file (created if absent). Give every process the same path.

    Raises:
        ConfigError: an empty path.
        StoreUnavailableError: the file cannot be used.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        text = os.fspath(path)
        if not text:
            raise ConfigError("the ledger needs a file path, got ''")
        self.path = text
        # NORMAL survives a killed process (only power loss can drop the last commits),
        # and keeps the fakes from dominating the cost of the runs they measure.
        self.db = SQLiteDB(text, synchronous="NORMAL")
        self.db.migrate("agent_ledger", _MIGRATIONS)

    def close(self) -> None:
        """Close this process's connections."""
        self.db.close()

    # -- what the services call ---------------------------------------------------------

    def record(
        self, run: str, service: str, step: str, *, at: float, tokens: int = 0, cost: float = 0.0
    ) -> None:
        """Record one request received by ``service`` for ``step`` of ``run``."""
        with self.db.write() as c:
            c.execute(
                "INSERT INTO agent_calls(run, service, step, tokens, cost, at, pid) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (run, service, step, tokens, cost, at, os.getpid()),
            )

    def publish(self, run: str, channel: str, content: str, key: str | None, *, at: float) -> int:
        """Create a post (once per ``key`` when a key is given); return its id."""
        with self.db.write() as c:
            c.execute(
                "INSERT INTO agent_calls(run, service, step, at, pid) VALUES (?, ?, ?, ?, ?)",
                (run, "publish", channel, at, os.getpid()),
            )
            row = c.execute(
                "INSERT INTO agent_posts(run, channel, key, content, at) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT(key) DO NOTHING RETURNING id",
                (run, channel, key, content, at),
            ).fetchone()
            if row is None:  # the key was seen before: the same post, not a new one
                row = c.execute("SELECT id FROM agent_posts WHERE key = ?", (key,)).fetchone()
        return int(row[0])

    def unpublish(self, run: str, channel: str, post_id: int, *, at: float) -> bool:
        """Take a post down; False if it was already down (or never existed)."""
        with self.db.write() as c:
            c.execute(
                "INSERT INTO agent_calls(run, service, step, at, pid) VALUES (?, ?, ?, ?, ?)",
                (run, "unpublish", channel, at, os.getpid()),
            )
            cur = c.execute(
                "UPDATE agent_posts SET removed_at = ? WHERE id = ? AND removed_at IS NULL",
                (at, post_id),
            )
        return cur.rowcount == 1

    # -- what the lab reads ---------------------------------------------------------------

    def calls(self, run: str | None = None, service: str | None = None) -> list[dict[str, Any]]:
        """Every request received (oldest first), optionally for one run or service."""
        sql = "SELECT run, service, step, tokens, cost, at, pid FROM agent_calls"
        where, params = [], []
        if run is not None:
            where.append("run = ?")
            params.append(run)
        if service is not None:
            where.append("service = ?")
            params.append(service)
        if where:
            sql += " WHERE " + " AND ".join(where)
        cols = ("run", "service", "step", "tokens", "cost", "at", "pid")
        rows = self.db.conn().execute(sql + " ORDER BY id", params).fetchall()
        return [dict(zip(cols, r, strict=True)) for r in rows]

    def posts(self, run: str | None = None) -> list[dict[str, Any]]:
        """Every post created (oldest first), with ``removed_at`` when taken down."""
        sql = "SELECT id, run, channel, key, content, at, removed_at FROM agent_posts"
        params: list[Any] = []
        if run is not None:
            sql += " WHERE run = ?"
            params.append(run)
        cols = ("id", "run", "channel", "key", "content", "at", "removed_at")
        rows = self.db.conn().execute(sql + " ORDER BY id", params).fetchall()
        return [dict(zip(cols, r, strict=True)) for r in rows]

    def totals(self, runs: list[str] | None = None) -> LedgerTotals:
        """Sum what was received for ``runs`` (all runs when None)."""
        keep = None if runs is None else set(runs)
        calls = [c for c in self.calls() if keep is None or c["run"] in keep]
        posts = [p for p in self.posts() if keep is None or p["run"] in keep]
        model = [c for c in calls if c["service"] == "model"]
        per_step = Counter((c["run"], c["step"]) for c in model)
        per_channel = Counter((p["run"], p["channel"]) for p in posts)
        by_step = Counter(c["step"] for c in calls if c["service"] in ("model", "tool"))
        return LedgerTotals(
            runs=len({c["run"] for c in calls}),
            model_calls=len(model),
            tokens=sum(c["tokens"] for c in model),
            cost=sum(c["cost"] for c in model),
            tool_calls=sum(1 for c in calls if c["service"] == "tool"),
            publish_calls=sum(1 for c in calls if c["service"] == "publish"),
            posts=len(posts),
            duplicate_posts=sum(n - 1 for n in per_channel.values()),
            removed=sum(1 for p in posts if p["removed_at"] is not None),
            repeated_model_calls=sum(n - 1 for n in per_step.values()),
            calls_by_step=dict(sorted(by_step.items())),
        )

    def __repr__(self) -> str:
        return f"Ledger({self.path!r})"
