"""The 7-step agent ported to Temporal (seed 002, Hard 2), its worker, and its kill harness.

The port is the one the seed asks for: the model, tool and publish calls are activities
(``_temporal_activities``), the orchestration is the workflow function
(``_temporal_workflow.ResearchAgent``), the approval is the ``approve`` signal and the
publish is keyed ``workflow_id:activity_id``. The activities talk to surefoot's fake
services, so what the model, tools and publisher received is counted in the same ledger,
outside the worker, as for surefoot's own agent and the DBOS port.

A worker process (it serves until SIGTERM/SIGINT; a SIGKILLed one is simply started again)::

    python -m surefoot_lab.agent.port_temporal --address 127.0.0.1:7233 \
        --task-queue agent --ledger /tmp/ledger.db --sticky-timeout 1

:func:`kill_temporal_mid_run` runs one agent run against a :class:`~surefoot.engines.
temporal.DevServer`, SIGKILLs the worker (or the server) with a step in flight, restarts
it and reads back the ledger and the run's history. ``temporalio`` is imported lazily:
install ``surefoot[temporal]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from surefoot.engines.temporal import EXTRA, DevServer
from surefoot.errors import ConfigError, MissingExtraError

from ._ledger import Ledger
from ._services import AgentServices
from ._temporal_report import TemporalKillReport, build_report, timestamp
from ._workflow import APPROVE, STEPS

__all__ = [
    "DEFAULTS",
    "READY",
    "TUNED",
    "TemporalKillReport",
    "Tuning",
    "kill_temporal_mid_run",
    "main",
    "parser",
    "temporalio_module",
]

READY = "surefoot-temporal-worker polling"
"""What a worker prints once it polls its task queue."""


@dataclass(frozen=True, slots=True)
class Tuning:
    """How a run's activities and its worker are set up for failure detection.

    Attributes:
        name: a label for tables. start_to_close_s: each attempt's limit.
        heartbeat_s: the activities' heartbeat timeout (None: no heartbeats).
        sticky_timeout_s: the worker's ``sticky_queue_schedule_to_start_timeout`` (None:
            the SDK's default, 10 s): how long a workflow task waits on a dead worker's
            sticky queue before any worker may take it.
    """

    name: str
    start_to_close_s: float
    heartbeat_s: float | None
    sticky_timeout_s: float | None


DEFAULTS = Tuning("no heartbeat, sticky 10 s (defaults)", 10.0, None, None)
"""Temporal's defaults, with the start-to-close timeout every activity must have (10 s)."""

TUNED = Tuning("heartbeat 1 s, sticky 1 s", 30.0, 1.0, 1.0)
"""Heartbeats every 0.1 s against a 1 s timeout, and a 1 s sticky-queue timeout."""


def temporalio_module() -> Any:
    """The ``temporalio`` package.

    Raises:
        MissingExtraError: ``temporalio`` is not installed (``pip install 'surefoot[temporal]'``).
    """
    try:
        import temporalio.client
        import temporalio.worker
    except ImportError:
        raise MissingExtraError(EXTRA, "the Temporal port of the agent") from None
    return temporalio


# -- the worker process ---------------------------------------------------------------------


def sandbox_runner() -> Any:
    """Temporal's workflow sandbox, with surefoot's own modules passed through.

    The workflow module sits in ``surefoot_lab.agent``, whose package imports the rest of
    surefoot (the provider adapters resolve paths at import time, which the sandbox refuses);
    surefoot holds no workflow state, so it is imported once, outside the sandbox.
    """
    from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

    restrictions = SandboxRestrictions.default.with_passthrough_modules("surefoot")
    return SandboxedWorkflowRunner(restrictions=restrictions)


def parser() -> argparse.ArgumentParser:
    """The command line of a Temporal agent worker."""
    p = argparse.ArgumentParser(prog="python -m surefoot_lab.agent.port_temporal")
    p.add_argument("--address", required=True, help="the Temporal frontend, host:port")
    p.add_argument("--task-queue", required=True, help="the task queue to poll")
    p.add_argument("--ledger", required=True, help="the fake services' ledger file")
    p.add_argument("--namespace", default="default", help="the Temporal namespace")
    p.add_argument("--seed", type=int, default=0, help="the FakeLLM's seed")
    p.add_argument("--latency", type=float, default=0.0, help="service latency (s)")
    p.add_argument("--reply-latency", type=float, default=0.0, help="reply latency (s)")
    p.add_argument(
        "--sticky-timeout",
        type=float,
        default=None,
        help="sticky_queue_schedule_to_start_timeout in s (default: the SDK's 10 s)",
    )
    return p


async def _serve(a: argparse.Namespace) -> None:
    from temporalio.client import Client
    from temporalio.worker import Worker

    from ._temporal_activities import AgentActivities
    from ._temporal_workflow import ResearchAgent

    client = await Client.connect(a.address, namespace=a.namespace)
    acts = AgentActivities(
        lambda: AgentServices(
            a.ledger, seed=a.seed, latency=a.latency, reply_latency=a.reply_latency
        )
    )
    extra: dict[str, Any] = {}
    if a.sticky_timeout is not None:
        extra["sticky_queue_schedule_to_start_timeout"] = timedelta(seconds=a.sticky_timeout)
    worker = Worker(
        client,
        task_queue=a.task_queue,
        workflows=[ResearchAgent],
        activities=acts.all(),
        workflow_runner=sandbox_runner(),
        graceful_shutdown_timeout=timedelta(seconds=2),
        **extra,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with worker:
        print(READY, a.task_queue, flush=True)
        await stop.wait()


def main(argv: list[str] | None = None) -> int:
    """Run a Temporal agent worker until SIGTERM/SIGINT; the exit status.

    Raises:
        MissingExtraError: ``temporalio`` is not installed.
    """
    a = parser().parse_args(argv)
    temporalio_module()
    asyncio.run(_serve(a))
    return 0


# -- the kill harness (runs in the lab's process; the agent runs in the worker process) -----


class _Worker:
    """The worker process of one kill run; only its own pid is ever signalled."""

    def __init__(self, argv: list[str], log: Path) -> None:
        self.argv, self.log = argv, log
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = 0

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT)
        self.started += 1

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
            self.kill()


async def _until(cond: Callable[[], Awaitable[bool]], timeout: float, what: str) -> None:
    """Poll the async ``cond()`` every 10 ms until it is true.

    Raises:
        TimeoutError: it was not true within ``timeout`` seconds (``what`` says what).
    """
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if await cond():
                return
        except Exception:  # the server may be restarting: ask again
            pass
        await asyncio.sleep(0.01)
    raise TimeoutError(f"waited {timeout:g} s for {what}")


def kill_temporal_mid_run(
    server: DevServer,
    ledger_path: str | os.PathLike[str],
    *,
    kill_at: str = "read",
    target: str = "worker",
    window: str = "request",
    tuning: Tuning = TUNED,
    run_id: str = "temporal-k9",
    seed: int = 0,
    latency: float = 0.1,
    reply_latency: float = 0.0,
    server_down_s: float = 1.0,
    timeout: float = 90.0,
) -> TemporalKillReport:
    """Run one agent run on ``server`` in a worker process, SIGKILL it mid-run, restart it.

    ``window="request"`` kills half a service latency after ``kill_at``'s activity started
    (the service has not acted); ``"reply"`` kills once the service received its request
    (give a ``reply_latency``). With ``kill_at="approve"`` the run is killed while it waits
    for the signal, which is then sent while no worker runs. ``target="server"`` SIGKILLs
    the Temporal server instead and restarts it on its file and port ``server_down_s``
    later; the worker keeps running. Otherwise the approval is sent right after the start.

    Args:
        server: a started dev server (restarted in place when it is the target).
        ledger_path: the fake services' ledger file.
        kill_at: a step of ``STEPS`` after ``plan``. target: ``"worker"`` or ``"server"``.
        window: ``"request"`` or ``"reply"`` (ignored for ``approve``).
        tuning: heartbeat and sticky-queue settings (:data:`TUNED` or :data:`DEFAULTS`).
        run_id: the workflow id (and task queue). seed: the FakeLLM's seed.
        latency / reply_latency: the fake services' delays in seconds.
        timeout: seconds allowed for each phase (reaching the kill, finishing the run).

    Raises:
        ConfigError: an unknown step, target or window.
        MissingExtraError: ``temporalio`` is not installed.
        TimeoutError: a phase took longer than ``timeout``.
    """
    if kill_at not in STEPS[1:] or target not in ("worker", "server"):
        raise ConfigError(
            f"kill_at must be one of {list(STEPS[1:])} and target 'worker' or 'server', "
            f"got {kill_at!r}, {target!r}"
        )
    if window not in ("request", "reply"):
        raise ConfigError(f"window must be 'request' or 'reply', got {window!r}")
    if target == "server" and kill_at == APPROVE:
        raise ConfigError("kill the server with an activity in flight, not during approve")
    temporalio_module()
    return asyncio.run(
        _kill_run(
            server,
            Path(ledger_path),
            kill_at=kill_at,
            target=target,
            window="wait" if kill_at == APPROVE else window,
            tuning=tuning,
            run_id=run_id,
            seed=seed,
            latency=latency,
            reply_latency=reply_latency,
            server_down_s=server_down_s,
            timeout=timeout,
        )
    )


async def _kill_run(
    server: DevServer,
    ledger_path: Path,
    *,
    kill_at: str,
    target: str,
    window: str,
    tuning: Tuning,
    run_id: str,
    seed: int,
    latency: float,
    reply_latency: float,
    server_down_s: float,
    timeout: float,
) -> TemporalKillReport:
    from temporalio.api.enums.v1 import PendingActivityState
    from temporalio.client import Client

    from ._temporal_workflow import AgentInput, Approval, CallTimeouts, ResearchAgent

    ledger = Ledger(ledger_path)
    argv = [sys.executable, "-m", __name__, "--address", server.address]
    argv += ["--task-queue", run_id, "--ledger", os.fspath(ledger_path), "--seed", str(seed)]
    argv += ["--latency", str(latency), "--reply-latency", str(reply_latency)]
    if tuning.sticky_timeout_s is not None:
        argv += ["--sticky-timeout", str(tuning.sticky_timeout_s)]
    worker = _Worker(argv, Path(os.fspath(ledger_path) + ".worker.log"))
    approval = Approval(approved=True, by="auto", signal_id=f"{APPROVE}:auto")
    client = await Client.connect(server.address)
    inp = AgentInput(
        question="why is the sky blue?",
        timeouts=CallTimeouts(tuning.start_to_close_s, tuning.heartbeat_s),
    )

    def received() -> set[str]:
        return {"publish" if c["service"] == "publish" else c["step"] for c in ledger.calls(run_id)}

    async def started_at() -> float | None:
        """When ``kill_at``'s activity attempt started (Unix s), or None if it has not."""
        d = await handle.describe()
        for pa in d.raw_description.pending_activities:
            if (
                pa.activity_type.name == kill_at
                and pa.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
            ):
                return timestamp(pa.last_started_time)
        return None

    async def requested() -> bool:
        """The service has received ``kill_at``'s request."""
        return kill_at in received()

    seen_start: list[float] = []

    async def begun() -> bool:
        """``kill_at``'s attempt has started (its start time kept: the attempt may finish
        before a second look, under load)."""
        at = await started_at()
        if at is not None:
            seen_start.append(at)
        return at is not None

    async def waiting() -> bool:
        """The run has finished ``draft`` and its workflow task: it waits for approve."""
        if "draft" not in received():
            return False
        kinds = [e.WhichOneof("attributes") async for e in handle.fetch_history_events()]
        done = "activity_task_completed_event_attributes"
        last = max((i for i, k in enumerate(kinds) if k == done), default=len(kinds))
        return "workflow_task_completed_event_attributes" in kinds[last:]

    try:
        worker.start()
        handle = await client.start_workflow(ResearchAgent.run, inp, id=run_id, task_queue=run_id)
        if kill_at != APPROVE:
            await handle.signal(ResearchAgent.approve, approval)
        if window == "wait":
            await _until(waiting, timeout, "the run to wait for its approval")
            await asyncio.sleep(max(latency / 2, 0.05))
        elif window == "reply":
            await _until(requested, timeout, f"{kill_at}'s request")
        else:
            await _until(begun, timeout, f"{kill_at} to start")
            at = seen_start[-1]
            await asyncio.sleep(max(at + latency / 2 - time.time(), 0.0))
        killed = time.time()
        if target == "server":
            server.kill()
            await asyncio.sleep(server_down_s)
            server.start()
        else:
            worker.kill()
            if window == "wait":
                await handle.signal(ResearchAgent.approve, approval)
            worker.start()
        await asyncio.wait_for(_result(handle), timeout)
        finished = time.time()
        desc = await handle.describe()
        status = desc.status.name if desc.status is not None else "?"
        events = [e async for e in handle.fetch_history_events()]
    except BaseException:
        ledger.close()
        raise
    finally:
        worker.stop()
    return build_report(
        ledger,
        events,
        run_id=run_id,
        kill_at=kill_at,
        target=target,
        window=window,
        tuning=tuning.name,
        status=status,
        killed=killed,
        finished=finished,
        restarts=worker.started - 1,
    )


async def _result(handle: Any) -> Any:
    """The workflow's result, asking again while the server restarts."""
    from temporalio.service import RPCError

    while True:
        try:
            return await handle.result()
        except RPCError:  # the server is down or restarting
            await asyncio.sleep(0.1)


if __name__ == "__main__":
    sys.exit(main())
