"""A worker process for the agent: ``python -m surefoot_lab.agent.worker --db URL …``.

It builds a ``durable.App`` on the journal URL, registers the agent (both versions) with
services that record into ``--ledger``, and runs a ``durable.Worker`` until SIGTERM/SIGINT
(or ``--idle-exit`` seconds with nothing to do). The chaos harness starts these and kills
them with SIGKILL; a worker restarted with the same ``--worker-id`` takes its runs back at
once, any other worker after their lease expires.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Any

from surefoot.durable import App, Worker

from ._services import AgentServices
from ._workflow import build_agent

__all__ = ["main", "parser"]


def parser() -> argparse.ArgumentParser:
    """The command line of an agent worker."""
    p = argparse.ArgumentParser(prog="python -m surefoot_lab.agent.worker")
    p.add_argument("--db", required=True, help="journal URL (sqlite:///runs.db, postgresql://…)")
    p.add_argument("--ledger", required=True, help="the fake services' ledger file")
    p.add_argument("--worker-id", default=None, help="name in leases (default host:pid)")
    p.add_argument("--concurrency", type=int, default=16, help="runs executed at once")
    p.add_argument("--lease", type=float, default=2.0, help="lease seconds")
    p.add_argument("--poll", type=float, default=0.05, help="seconds between claims when idle")
    p.add_argument("--seed", type=int, default=0, help="the FakeLLM's seed")
    p.add_argument("--latency", type=float, default=0.0, help="service latency (s)")
    p.add_argument("--reply-latency", type=float, default=0.0, help="reply latency (s)")
    p.add_argument("--idle-exit", type=float, default=None, help="exit after idle seconds")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run a worker until stopped; the exit status."""
    a = parser().parse_args(argv)
    app = App(a.db, lease=a.lease, poll=a.poll, worker_id=a.worker_id)
    services = AgentServices(
        a.ledger,
        seed=a.seed,
        clock=app.clock,
        latency=a.latency,
        reply_latency=a.reply_latency,
    )
    build_agent(app, services, versions=("1", "2"))
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        Worker(app, concurrency=a.concurrency).run(stop, idle_exit=a.idle_exit)
    finally:
        app.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
