"""The 7-step agent ported to DBOS (seed 002, Hard 2's second peer), and its worker process.

The seed asks for a Temporal port: that is ``port_temporal``, on a real dev server. DBOS is
measured beside it because it has the same model on a SQLite system database: the workflow
function is the orchestration (Temporal's workflow), each ``@DBOS.step`` is an activity. The
model, tool and publish calls live in steps; the workflow only sequences them and waits for
the ``approve`` message (Temporal: a signal). The fake services and their ledger are
surefoot's (``AgentServices``, ``Ledger``), so what the services received is counted outside
the worker exactly as for surefoot's agent.

A worker process::

    python -m surefoot_lab.agent.port_dbos --sysdb sqlite:////tmp/dbos.db \
        --ledger /tmp/ledger.db --start r-1 --question "why is the sky blue?"

launches DBOS (which recovers this executor's pending workflows), starts run ``r-1`` if
asked (and sends its approval at once), then serves until SIGTERM/SIGINT. Restart it
without ``--start`` after a SIGKILL and DBOS resumes the run from its recorded steps.
``dbos`` is imported lazily: install the lab's ``dbos`` extra (``pip install './lab[dbos]'``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

from surefoot.errors import ConfigError

from .._extras import missing_extra
from ._ledger import Ledger
from ._services import AgentServices
from ._workflow import APPROVE, STEPS

__all__ = [
    "APP_NAME",
    "APP_VERSION",
    "EXECUTOR_ID",
    "READY",
    "STEP_NAMES",
    "WORKFLOW_NAME",
    "PortKillReport",
    "dbos_module",
    "kill_dbos_mid_run",
    "main",
    "parser",
    "register",
]

APP_NAME = "surefoot-agent-port"
"""The DBOS application name the worker runs under."""

APP_VERSION = "surefoot-port-1"
"""A fixed application version, so a restarted worker recovers runs its predecessor began."""

WORKFLOW_NAME = "surefoot_research_agent"
"""The agent workflow's registered DBOS name."""

EXECUTOR_ID = "surefoot-port-worker"
"""The worker's default DBOS executor id; launch recovers only this executor's runs."""

READY = "surefoot-port-worker launched"
"""What a worker prints once DBOS has launched (and started its recovery)."""

STEP_NAMES = {"DBOS.recv": APPROVE}
"""DBOS's own step names mapped to the agent's step names (others are used as they are)."""

_REGISTERED: dict[str, Any] = {}
_F = TypeVar("_F", bound=Callable[..., Any])


def _typed(decorator: Any) -> Callable[[_F], _F]:
    """A DBOS decorator, typed: it returns a function of the same signature."""
    return cast(Callable[[_F], _F], decorator)


def dbos_module() -> Any:
    """The ``dbos`` package.

    Raises:
        MissingExtraError: ``dbos`` is not installed (the lab's ``dbos`` extra).
    """
    try:
        import dbos
    except ImportError:
        raise missing_extra("dbos", "the DBOS port of the agent") from None
    return dbos


def register(services: Callable[[], AgentServices]) -> Any:
    """Register the agent's steps and workflow with DBOS (once per process); the workflow.

    Call before ``DBOS.launch()``. The workflow is ``agent(question, run, approval_timeout)``
    and returns ``{"status": "published"|"rejected", ...}`` like surefoot's agent.

    Args:
        services: a zero-argument factory for the fake services, called on first use.

    Raises:
        MissingExtraError: ``dbos`` is not installed.
    """
    if "workflow" in _REGISTERED:
        return _REGISTERED["workflow"]
    DBOS = dbos_module().DBOS
    held: list[AgentServices] = []

    def svc() -> AgentServices:
        if not held:
            held.append(services())
        return held[0]

    @_typed(DBOS.step(name="plan"))
    async def plan(run: str, question: str) -> list[str]:
        """Activity (model): turn the question into search queries."""
        text = await svc().ask(run, "plan", f"Plan web searches for: {question}")
        words = text.rstrip(".").split()
        return [" ".join(words[i : i + 3]) for i in range(0, min(len(words), 6), 3)] or [question]

    @_typed(DBOS.step(name="search"))
    async def search(run: str, queries: list[str]) -> list[str]:
        """Activity (tool read): find documents for the queries."""
        return await svc().search(run, queries)

    @_typed(DBOS.step(name="read"))
    async def read(run: str, doc_ids: list[str]) -> list[str]:
        """Activity (tool read): fetch the documents' text."""
        return await svc().read(run, doc_ids)

    @_typed(DBOS.step(name="summarize"))
    async def summarize(run: str, question: str, texts: list[str]) -> str:
        """Activity (model): summarize what was read."""
        prompt = f"Question: {question}\nSources:\n" + "\n".join(texts) + "\nSummarize."
        return await svc().ask(run, "summarize", prompt)

    @_typed(DBOS.step(name="draft"))
    async def draft(run: str, question: str, summary: str) -> str:
        """Activity (model): write the answer."""
        return await svc().ask(run, "draft", f"Answer {question!r} from: {summary}")

    @_typed(DBOS.step(name="publish"))
    async def publish(run: str, text: str, channel: str) -> int:
        """Activity (effect): publish, keyed by workflow id and step id (stable on replay)."""
        key = f"{DBOS.workflow_id}:{DBOS.step_id}:{channel}"
        return await svc().publish(run, channel, text, key)

    @_typed(DBOS.workflow(name=WORKFLOW_NAME))
    async def agent(question: str, run: str, approval_timeout: float = 60.0) -> dict[str, Any]:
        """The orchestration: five activities, a wait for ``approve``, then publish."""
        queries = await plan(run, question)
        docs = await search(run, queries)
        texts = await read(run, docs)
        summary = await summarize(run, question, texts)
        text = await draft(run, question, summary)
        approval = await DBOS.recv_async(APPROVE, timeout_seconds=approval_timeout)
        if not isinstance(approval, dict) or not approval.get("approved"):
            return {"status": "rejected", "draft": text, "approval": approval}
        post = await publish(run, text, "blog")
        return {"status": "published", "posts": [post], "draft": text, "by": approval.get("by")}

    _REGISTERED["workflow"] = agent
    return agent


def parser() -> argparse.ArgumentParser:
    """The command line of a DBOS agent worker."""
    p = argparse.ArgumentParser(prog="python -m surefoot_lab.agent.port_dbos")
    p.add_argument("--sysdb", required=True, help="DBOS system database URL (sqlite:///…)")
    p.add_argument("--ledger", required=True, help="the fake services' ledger file")
    p.add_argument("--start", default=None, help="start this run id after launch")
    p.add_argument("--question", default="why is the sky blue?", help="the run's question")
    p.add_argument("--no-approve", action="store_true", help="do not auto-approve --start")
    p.add_argument("--executor-id", default=EXECUTOR_ID, help="DBOS executor id")
    p.add_argument("--seed", type=int, default=0, help="the FakeLLM's seed")
    p.add_argument("--latency", type=float, default=0.0, help="service latency (s)")
    p.add_argument("--reply-latency", type=float, default=0.0, help="reply latency (s)")
    return p


async def _serve(a: argparse.Namespace) -> None:
    DBOS = dbos_module().DBOS
    agent = register(
        lambda: AgentServices(
            a.ledger, seed=a.seed, latency=a.latency, reply_latency=a.reply_latency
        )
    )
    DBOS(
        config={
            "name": APP_NAME,
            "system_database_url": a.sysdb,
            "application_version": APP_VERSION,
            "executor_id": a.executor_id,
            "log_level": "WARNING",
            "notification_listener_polling_interval_sec": 0.05,
        }
    )
    DBOS.launch()  # re-enqueues this executor's PENDING workflows: the recovery
    print(READY, a.executor_id, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        if a.start:
            with dbos_module().SetWorkflowID(a.start):
                await DBOS.start_workflow_async(agent, a.question, a.start)
            if not a.no_approve:
                await DBOS.send_async(
                    a.start,
                    {"approved": True, "by": "auto"},
                    topic=APPROVE,
                    idempotency_key=f"{a.start}:approve:auto",
                )
        await stop.wait()
    finally:
        DBOS.destroy(workflow_completion_timeout_sec=0)


def main(argv: list[str] | None = None) -> int:
    """Run a DBOS agent worker until SIGTERM/SIGINT; the exit status.

    Raises:
        MissingExtraError: ``dbos`` is not installed.
    """
    a = parser().parse_args(argv)
    dbos_module()
    asyncio.run(_serve(a))
    return 0


# -- the kill harness (runs in the lab's process; the agent runs in worker processes) ------


@dataclass(frozen=True, slots=True)
class PortKillReport:
    """One DBOS agent run whose worker was SIGKILLed mid-run and restarted.

    Attributes:
        kill_at: the step meant to be in flight at the kill. window: ``"request"`` (killed
            half a service latency after the previous step was recorded) or ``"reply"``
            (killed after the service received ``kill_at``'s call, before the reply).
        status: the DBOS workflow status at the end (``SUCCESS`` when it completed).
        journalled_before_kill: steps DBOS had recorded as completed when the kill came.
        calls_per_step: requests the services received per step (``publish``: publish
            requests), counted in the ledger outside the worker.
        model_calls: model calls received for the run.
        repeated_for_journalled: calls beyond the first for steps recorded before the
            kill (the Done-when figure: must be 0).
        repeated_after_journal: model calls received after their step's completion was
            recorded (0 unless a recorded step ran again).
        in_flight: the first step not recorded at the kill; in_flight_calls: its requests.
        posts / duplicate_posts: posts created, and those beyond the first.
        recovered_in_s: seconds from starting the new worker to the run's next recorded
            step (includes the worker's start-up and DBOS's launch).
        orphaned_steps / orphaned_status: with ``restart_as``, steps recorded and the
            run's status while only a worker with another executor id was running.
    """

    kill_at: str
    window: str
    status: str
    journalled_before_kill: list[str]
    calls_per_step: dict[str, int]
    model_calls: int
    repeated_for_journalled: int
    repeated_after_journal: int
    in_flight: str
    in_flight_calls: int
    posts: int
    duplicate_posts: int
    recovered_in_s: float | None
    orphaned_steps: int | None = None
    orphaned_status: str | None = None


class _Worker:
    """The DBOS worker process of one kill run; only its own pid is ever signalled."""

    def __init__(self, argv: list[str], log: Path) -> None:
        self.argv, self.log = argv, log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, extra: list[str]) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                self.argv + extra, stdout=out, stderr=subprocess.STDOUT, env=dict(os.environ)
            )

    def launched(self) -> int:
        """How many times a worker of this run has printed that DBOS launched."""
        try:
            return self.log.read_text(errors="replace").count(READY)
        except FileNotFoundError:
            return 0

    def kill(self) -> None:
        p = self.proc
        if p is not None and p.poll() is None:
            os.kill(p.pid, signal.SIGKILL)
        if p is not None:
            p.wait(timeout=10)

    def stop(self) -> None:
        p = self.proc
        if p is None or p.poll() is not None:
            return
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(p.pid, signal.SIGKILL)
            p.wait(timeout=10)


def _until(cond: Callable[[], bool], timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


def kill_dbos_mid_run(
    sysdb_path: str | os.PathLike[str],
    ledger_path: str | os.PathLike[str],
    *,
    kill_at: str = "read",
    window: str = "request",
    run_id: str = "port-k9",
    seed: int = 0,
    latency: float = 0.1,
    reply_latency: float = 0.0,
    timeout: float = 60.0,
    restart_as: str | None = None,
    orphan_wait: float = 3.0,
) -> PortKillReport:
    """Run one DBOS agent run in a worker process, SIGKILL it mid-run, restart it, measure.

    ``window="request"`` kills half a service latency after every step before ``kill_at``
    was recorded by DBOS (the same rule as surefoot's ``chaos.kill_mid_run``);
    ``window="reply"`` kills as soon as the services received ``kill_at``'s request, so
    the step has paid for its call but DBOS has not recorded it (give a ``reply_latency``).
    The restarted worker is given no run to start: DBOS's launch recovers it.

    Args:
        sysdb_path: the DBOS system database file (SQLite; created by the worker).
        ledger_path: the fake services' ledger file.
        kill_at: a step of ``STEPS`` other than ``plan`` (``approve`` only with "request").
        window: ``"request"`` or ``"reply"``.
        run_id: the workflow id. seed: the FakeLLM's seed.
        latency / reply_latency: the fake services' delays in seconds.
        timeout: seconds allowed for each phase (reaching the kill, finishing the run).
        restart_as: first restart the worker under this other executor id (a replacement
            machine) for ``orphan_wait`` seconds after its DBOS launched, then restart it
            under the original id.

    Raises:
        ConfigError: an unknown step or window.
        MissingExtraError: ``dbos`` is not installed.
    """
    if kill_at not in STEPS[1:] or window not in ("request", "reply"):
        raise ConfigError(
            f"kill_at must be one of {list(STEPS[1:])} and window 'request' or 'reply', "
            f"got {kill_at!r}, {window!r}"
        )
    if window == "reply" and kill_at == APPROVE:
        raise ConfigError("the approve wait calls no service: kill it with window='request'")
    dbos = dbos_module()
    url = "sqlite:///" + os.fspath(sysdb_path)
    ledger = Ledger(ledger_path)
    argv = [sys.executable, "-m", "surefoot_lab.agent.port_dbos", "--sysdb", url]
    argv += ["--ledger", os.fspath(ledger_path), "--seed", str(seed)]
    argv += ["--latency", str(latency), "--reply-latency", str(reply_latency)]
    worker = _Worker(argv, Path(os.fspath(ledger_path) + ".worker.log"))
    client: list[Any] = []

    def steps() -> list[dict[str, Any]]:
        try:  # the worker creates the system database; until then there is nothing to read
            if not client:
                client.append(dbos.DBOSClient(system_database_url=url))
            rows = client[0].list_workflow_steps(run_id, load_output=False)
        except Exception:
            return []
        return [r for r in rows if r["completed_at_epoch_ms"] is not None]

    def done() -> list[str]:
        return [STEP_NAMES.get(r["function_name"], r["function_name"]) for r in steps()]

    def received() -> set[str]:
        return {"publish" if c["service"] == "publish" else c["step"] for c in ledger.calls(run_id)}

    def status() -> str:
        try:
            return str(client[0].retrieve_workflow(run_id).get_status().status) if client else "?"
        except Exception:
            return "?"

    marks = set(STEPS[: STEPS.index(kill_at)])
    recovered: float | None = None
    orphaned: tuple[int | None, str | None] = (None, None)
    try:
        worker.start(["--start", run_id])
        if window == "request":
            _until(lambda: marks <= set(done()), timeout)
            time.sleep(latency / 2)
        else:
            _until(lambda: kill_at in received(), timeout)
        journalled = [s for s in done() if s in STEPS]
        worker.kill()
        n = len(steps())
        if restart_as is not None:
            launches = worker.launched()
            worker.start(["--executor-id", restart_as])
            _until(lambda: worker.launched() > launches, timeout)
            time.sleep(orphan_wait)
            orphaned = (len(steps()) - n, status())
            worker.stop()
        restarted = time.monotonic()
        worker.start([])
        if _until(lambda: len(steps()) > n or status() == "SUCCESS", timeout):
            recovered = time.monotonic() - restarted
        _until(lambda: status() in ("SUCCESS", "ERROR", "CANCELLED"), timeout)
        final = status()
    finally:
        worker.stop()
        if client:
            client[0].destroy()
    calls = ledger.calls(run_id)
    per_step = {
        s: sum(1 for c in calls if (c["service"] == s if s == "publish" else c["step"] == s))
        for s in ("plan", "search", "read", "summarize", "draft", "publish")
    }
    finished = {
        STEP_NAMES.get(r["function_name"], r["function_name"]): r["completed_at_epoch_ms"] / 1000
        for r in _final_steps(dbos, url, run_id)
    }
    late = sum(
        1
        for c in calls
        # DBOS records whole milliseconds: a call in the same millisecond is the original
        if c["service"] == "model" and c["at"] > finished.get(c["step"], float("inf")) + 0.001
    )
    posts = ledger.posts(run_id)
    in_flight = next((s for s in STEPS if s not in journalled), "-")
    ledger.close()
    return PortKillReport(
        kill_at=kill_at,
        window=window,
        status=final,
        journalled_before_kill=journalled,
        calls_per_step=per_step,
        model_calls=sum(1 for c in calls if c["service"] == "model"),
        repeated_for_journalled=sum(max(per_step.get(s, 1) - 1, 0) for s in journalled),
        repeated_after_journal=late,
        in_flight=in_flight,
        in_flight_calls=per_step.get(in_flight, 0),
        posts=len(posts),
        duplicate_posts=sum(n - 1 for n in Counter(p["channel"] for p in posts).values()),
        recovered_in_s=recovered,
        orphaned_steps=orphaned[0],
        orphaned_status=orphaned[1],
    )


def _final_steps(dbos: Any, url: str, run_id: str) -> list[dict[str, Any]]:
    client = dbos.DBOSClient(system_database_url=url)
    try:
        rows = client.list_workflow_steps(run_id, load_output=False)
    finally:
        client.destroy()
    return [r for r in rows if r["completed_at_epoch_ms"] is not None]


if __name__ == "__main__":
    sys.exit(main())
