"""``durable.frameworks``' peers: the same PydanticAI agent under ``DBOSDurability`` and
``TemporalDurability``, in real worker processes SIGKILLed at random.

Each engine gets what surefoot gets: the runs handed to the engine first (DBOS: enqueued on a
queue with a ``DBOSClient``; Temporal: started on a task queue of a dev server this module
starts on loopback), two worker processes, kills drawn by ``_kill_fleet.kill_at_random`` with
the same seed, each killed worker restarted at once under its id (DBOS recovers a dead
worker's runs only under its executor id). What the agent's services received is read from
its ledger; when the engine recorded each model response is read from the engine's own
store (DBOS: ``list_workflow_steps``; Temporal: the run's history), to count requests
repeated after their response was recorded.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
import time
from pathlib import Path
from typing import Any

from surefoot.errors import MissingExtraError

from ..agent.chaos import ChaosConfig, WorkerProcesses
from ..agent.pydantic_ai_trip import read_ledger
from ._kill_fleet import KillSchedule, kill_at_random, ledger_figures, repeated_after_recorded

__all__ = ["dbos_kill_runs", "dbos_missing", "temporal_kill_runs", "temporal_missing"]

DBOS_ENDED = frozenset({"SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"})
TASK_QUEUE = "lab-trips"


def dbos_missing() -> str | None:
    """Why the DBOS row cannot run here (None when it can)."""
    for mod, extra in (
        ("dbos", "the lab's `dbos` extra"),
        ("pydantic_ai", "surefoot[pydantic-ai]"),
    ):
        if importlib.util.find_spec(mod) is None:
            return f"{mod} is not installed ({extra})"
    return None


def temporal_missing() -> str | None:
    """Why the Temporal row cannot run here (None when it can)."""
    if importlib.util.find_spec("temporalio") is None:
        return "temporalio is not installed (surefoot[temporal])"
    if importlib.util.find_spec("pydantic_ai") is None:
        return "pydantic_ai is not installed (surefoot[pydantic-ai])"
    try:
        from surefoot.engines.temporal import find_temporal_binary

        find_temporal_binary()
    except MissingExtraError as exc:
        return str(exc)
    return None


def _fleet(workdir: Path, ledger: Path, delay: float, llm: Any, argv: Any) -> WorkerProcesses:
    wp = WorkerProcesses(ChaosConfig(db="-", ledger=str(ledger), worker_cmd=argv), workdir)
    wp.env.update(SUREFOOT_LAB_PAI_LEDGER=str(ledger), SUREFOOT_LAB_PAI_DELAY=str(delay))
    if llm is not None:
        wp.env.update(SUREFOOT_LAB_LLM_URL=llm.base_url, SUREFOOT_LAB_LLM_MODEL=llm.model)
    return wp


def _await_line(wp: WorkerProcesses, wid: str, text: str, timeout: float) -> bool:
    """Wait until worker ``wid`` printed ``text`` (False: it exited, or ``timeout`` passed)."""
    log = wp.logdir / f"{wid}.log"
    end = time.monotonic() + timeout
    while time.monotonic() < end and wp.procs[wid].poll() is None:
        if log.exists() and text in log.read_text(errors="replace"):
            return True
        time.sleep(0.05)
    return False


def _figures(
    ledger: Path, ids: list[str], statuses: dict[str, str], done: str, recorded: Any
) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for s in statuses.values():
        counts[s] = counts.get(s, 0) + 1
    return {
        "runs": len(ids),
        "completed": counts.get(done, 0),
        "statuses": counts,
        **ledger_figures(ledger, ids),
        "repeated_after_journal": repeated_after_recorded(read_ledger(ledger), recorded),
    }


def dbos_kill_runs(
    workdir: Path, *, runs: int, schedule: KillSchedule, delay: float, llm: Any = None
) -> dict[str, Any]:
    """``runs`` agent runs enqueued for two DBOS workers (SQLite system database), killed
    at random; what the ledger and DBOS's steps say."""
    from dbos import DBOSClient

    from ..agent._dbos_trip import APP_NAME, APP_VERSION, QUEUE, READY, WORKFLOW

    url = f"sqlite:///{workdir / 'frameworks-dbos.db'}"
    ledger = workdir / "frameworks-dbos-ledger.jsonl"
    ids = [f"r{i}" for i in range(runs)]

    def argv(wid: str) -> list[str]:
        return [
            sys.executable, "-m", "surefoot_lab.agent._dbos_trip", "--sysdb", url,
            "--ledger", str(ledger), "--executor-id", wid, "--delay", str(delay),
        ]  # fmt: skip

    wp = _fleet(workdir, ledger, delay, llm, argv)
    wids = ["dbos-w0", "dbos-w1"]
    t0 = time.monotonic()
    wp.start(wids[0])  # the first worker creates the system database (a client cannot)
    if not _await_line(wp, wids[0], READY, schedule.start_limit):
        wp.stop_all()
        raise TimeoutError(f"the DBOS worker did not start: see {workdir / (wids[0] + '.log')}")
    started = time.monotonic() - t0
    client = DBOSClient(system_database_url=url, application_name=APP_NAME)
    try:
        for rid in ids:
            client.enqueue(
                {
                    "queue_name": QUEUE,
                    "workflow_name": WORKFLOW,
                    "workflow_id": rid,
                    "app_version": APP_VERSION,
                },
                rid,
            )

        def statuses() -> dict[str, str]:
            rows = client.list_workflows(workflow_ids=ids, load_input=False, load_output=False)
            return {r.workflow_id: str(r.status) for r in rows}

        def ended() -> int:
            return sum(1 for s in statuses().values() if s in DBOS_ENDED)

        timing = kill_at_random(wp, wids, ledger, ended, runs, schedule)
        timing["startup_s"] = round(timing["startup_s"] + started, 2)
        recorded: dict[str, list[float | None]] = {}
        for rid in ids:
            steps = client.list_workflow_steps(rid, load_output=False)
            model = [s for s in steps if "request" in s["function_name"]]
            recorded[rid] = [
                None if s["completed_at_epoch_ms"] is None else s["completed_at_epoch_ms"] / 1000
                for s in model
            ]
        final = statuses()
    finally:
        client.destroy()
    out = _figures(ledger, ids, final, "SUCCESS", recorded)
    return {**out, **timing, "worker_starts": wp.started}


def temporal_kill_runs(
    workdir: Path, *, runs: int, schedule: KillSchedule, delay: float, llm: Any = None
) -> dict[str, Any]:
    """``runs`` agent runs started on a Temporal dev server (started here, stopped by pid)
    for two worker processes, killed at random; what the ledger and the histories say."""
    from temporalio.client import Client

    from surefoot.engines.temporal import DevServer

    from ..agent._temporal_trip import WORKFLOW

    ledger = workdir / "frameworks-temporal-ledger.jsonl"
    ids = [f"r{i}" for i in range(runs)]
    server = DevServer(workdir / "frameworks-temporal.db")
    loop = asyncio.new_event_loop()
    try:
        t_server = time.monotonic()
        server.start()
        server_s = time.monotonic() - t_server

        def argv(wid: str) -> list[str]:
            return [
                sys.executable, "-m", "surefoot_lab.agent._temporal_trip",
                "--address", server.address, "--task-queue", TASK_QUEUE,
            ]  # fmt: skip

        wp = _fleet(workdir, ledger, delay, llm, argv)
        client = loop.run_until_complete(Client.connect(server.address))
        for rid in ids:
            loop.run_until_complete(
                client.start_workflow(WORKFLOW, rid, id=rid, task_queue=TASK_QUEUE)
            )

        async def statuses() -> dict[str, str]:
            out = {}
            for rid in ids:
                d = await client.get_workflow_handle(rid).describe()
                out[rid] = d.status.name if d.status is not None else "?"
            return out

        last = [0.0, 0]

        def ended() -> int:  # describing every run is slow: at most every 0.25 s
            if time.monotonic() - last[0] >= 0.25:
                s = loop.run_until_complete(statuses())
                last[:] = [time.monotonic(), sum(1 for v in s.values() if v != "RUNNING")]
            return int(last[1])

        wids = ["temporal-w0", "temporal-w1"]
        timing = kill_at_random(wp, wids, ledger, ended, runs, schedule)
        final = loop.run_until_complete(statuses())
        history = {rid: loop.run_until_complete(_history(client, rid)) for rid in ids}
        recorded = {rid: h[0] for rid, h in history.items()}
    finally:
        loop.close()
        server.stop()
    out = _figures(ledger, ids, final, "COMPLETED", recorded)
    return {
        **out,
        **timing,
        "server_start_s": round(server_s, 2),
        "worker_starts": wp.started,
        "retried_attempts": sum(h[1] for h in history.values()),
    }


async def _history(client: Any, run_id: str) -> tuple[list[float | None], int]:
    """From the run's history: when the server recorded each model-request activity's
    completion (epoch seconds; None: never completed), in the order the activities were
    scheduled; and the activity attempts beyond the first (a retry after a heartbeat or
    start-to-close timeout: a dead worker's, or a live one too slow to heartbeat)."""
    model: set[int] = set()
    done: dict[int, float] = {}
    retried = 0
    async for e in client.get_workflow_handle(run_id).fetch_history_events():
        kind = e.WhichOneof("attributes")
        if kind == "activity_task_scheduled_event_attributes":
            if "model" in e.activity_task_scheduled_event_attributes.activity_type.name:
                model.add(e.event_id)
        elif kind == "activity_task_started_event_attributes":
            retried += max(e.activity_task_started_event_attributes.attempt - 1, 0)
        elif kind == "activity_task_completed_event_attributes":
            a = e.activity_task_completed_event_attributes
            done[a.scheduled_event_id] = e.event_time.seconds + e.event_time.nanos / 1e9
    return [done.get(i) for i in sorted(model)], retried
