"""Bytes journalled by an agent loop whose state is its whole message history, per turn.

The same n-turn conversation (a user message of about 200 characters and an assistant
reply of about 600 per turn, from a seeded word list) is run three ways, each on a fresh
SQLite file in one temporary folder:

* surefoot plain: ``App(value_chunks=None)``; a step gets the history and returns it plus
  the turn's two messages, so every step row holds the whole history (O(n²) bytes);
* surefoot chunked: the default ``App()``; step results of 8192 characters or more are
  stored as content-addressed chunk trees shared between the run's steps (linear bytes);
* LangGraph ``SqliteSaver``: a one-node graph looping n times over a state
  ``messages: Annotated[list, operator.add]`` (the node returns only the new messages, its
  best case), ``durability="sync"`` (one checkpoint per step, the durable setting).

Printed for n = 25, 50, 100, 200: the database file's bytes (after a WAL checkpoint, so
the WAL is in the file), the bytes of stored values (surefoot: step results, run arguments
and result, chunk data; LangGraph: checkpoint and metadata blobs, pending writes), bytes
per turn, each against surefoot chunked, and each case's growth from n to 2n (2x is
linear, 4x quadratic).

    .venv/bin/python benchmarks/bench_history.py [--turns 25,50,100,200] [--json out.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import operator
import random
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

from surefoot import durable

_TEXT = (
    "the agent reads a file then calls a tool and checks the result before it writes the "
    "answer back to the user with a short summary of what changed and why it matters"
)
WORDS = _TEXT.split()


def conversation(n: int, seed: int = 7) -> list[tuple[dict[str, str], dict[str, str]]]:
    """``n`` turns of (user message, assistant reply), the same for every case."""
    rng = random.Random(seed)

    def text(chars: int) -> str:
        out: list[str] = []
        while sum(len(w) + 1 for w in out) < chars:
            out.append(rng.choice(WORDS))
        return " ".join(out)

    return [
        ({"role": "user", "content": f"{i}: {text(200)}"},
         {"role": "assistant", "content": f"{i}: {text(600)}"})
        for i in range(n)
    ]  # fmt: skip


def file_bytes(path: Path) -> int:
    """The SQLite file's size with its WAL folded in."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        return int(pages) * int(size)
    finally:
        conn.close()


def _one(conn: sqlite3.Connection, sql: str) -> int:
    return int(conn.execute(sql).fetchone()[0] or 0)


def surefoot_run(d: Path, n: int, chunked: bool) -> dict[str, float]:
    """One n-turn run; bytes of the file and of the stored values."""
    path = d / f"sf-{'chunked' if chunked else 'plain'}-{n}.db"
    app = durable.App(f"sqlite:///{path}", **({} if chunked else {"value_chunks": None}))
    turns = conversation(n)

    @app.step
    def turn(history: list[dict[str, str]], i: int) -> list[dict[str, str]]:
        user, reply = turns[i]
        return [*history, user, reply]

    @app.workflow
    def chat(n: int) -> int:
        history: list[dict[str, str]] = []
        for i in range(n):
            history = turn(history, i)
        return len(history)

    t0 = time.perf_counter()
    assert app.start(chat, n, run_id="chat").result(timeout=600) == 2 * n
    seconds = time.perf_counter() - t0
    app.close()
    conn = sqlite3.connect(path)
    try:
        values = (
            _one(conn, "SELECT SUM(LENGTH(CAST(result AS BLOB))) FROM durable_steps")
            + _one(conn, "SELECT SUM(LENGTH(CAST(args AS BLOB))) FROM durable_runs")
            + _one(conn, "SELECT SUM(LENGTH(CAST(result AS BLOB))) FROM durable_runs")
            + _one(conn, "SELECT SUM(LENGTH(CAST(data AS BLOB))) FROM durable_chunks")
        )
    finally:
        conn.close()
    return {"file": file_bytes(path), "values": values, "seconds": seconds}


def langgraph_run(d: Path, n: int) -> dict[str, float]:
    """The same conversation as a LangGraph loop checkpointed by SqliteSaver."""
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph

    turns = conversation(n)

    class State(TypedDict):
        messages: Annotated[list[dict[str, str]], operator.add]
        turn: int

    def step(s: State) -> dict[str, Any]:
        user, reply = turns[s["turn"]]
        return {"messages": [user, reply], "turn": s["turn"] + 1}

    g = StateGraph(State)
    g.add_node("turn", step)
    g.add_edge(START, "turn")
    g.add_conditional_edges("turn", lambda s: "turn" if s["turn"] < n else END)
    path = d / f"lg-{n}.db"
    conn = sqlite3.connect(path, check_same_thread=False)
    graph = g.compile(checkpointer=SqliteSaver(conn))
    config: Any = {"configurable": {"thread_id": "chat"}, "recursion_limit": n + 10}
    t0 = time.perf_counter()
    out = graph.invoke({"messages": [], "turn": 0}, config, durability="sync")
    seconds = time.perf_counter() - t0
    assert len(out["messages"]) == 2 * n
    values = _one(
        conn, "SELECT SUM(LENGTH(checkpoint)) + SUM(LENGTH(metadata)) FROM checkpoints"
    ) + _one(conn, "SELECT SUM(LENGTH(value)) FROM writes")
    conn.close()
    return {"file": file_bytes(path), "values": values, "seconds": seconds}


CASES = ("surefoot plain", "surefoot chunked", "LangGraph SqliteSaver")


def measure(d: Path, ns: list[int]) -> dict[str, dict[int, dict[str, float]]]:
    res: dict[str, dict[int, dict[str, float]]] = {c: {} for c in CASES}
    for n in ns:
        res["surefoot plain"][n] = surefoot_run(d, n, chunked=False)
        res["surefoot chunked"][n] = surefoot_run(d, n, chunked=True)
        res["LangGraph SqliteSaver"][n] = langgraph_run(d, n)
    return res


def report(res: dict[str, dict[int, dict[str, float]]], ns: list[int]) -> None:
    base = res["surefoot chunked"]
    for key, title in (("file", "database file bytes"), ("values", "stored value bytes")):
        print(f"\n{title} (per turn; x surefoot chunked)")
        print(f"{'turns':<12}" + "".join(f"{c:>40}" for c in CASES))
        for n in ns:
            cells = []
            for c in CASES:
                v = res[c][n][key]
                cells.append(f"{v:,.0f} ({v / n:,.0f}/turn) {v / base[n][key]:.1f}x")
            print(f"{n:<12}" + "".join(f"{x:>40}" for x in cells))
        for a, b in itertools.pairwise(ns):
            growth = [f"{res[c][b][key] / res[c][a][key]:.2f}x" for c in CASES]
            print(f"{f'{a}->{b} grows':<12}" + "".join(f"{x:>40}" for x in growth))
    print("\nseconds per run (informational; the machine may be loaded)")
    for n in ns:
        print(f"{n:<12}" + "".join(f"{res[c][n]['seconds']:>40.2f}" for c in CASES))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", default="25,50,100,200")
    ap.add_argument("--dir", default=None, help="where the databases go (default: a temp dir)")
    ap.add_argument("--json", dest="json_path", default=None)
    args = ap.parse_args()
    ns = [int(x) for x in args.turns.split(",")]
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        res = measure(Path(tmp), ns)
    report(res, ns)
    if args.json_path:
        out = {c: {str(n): v for n, v in per.items()} for c, per in res.items()}
        Path(args.json_path).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
