"""Workers: claim runs under a lease, execute them, renew the lease, take over dead ones.

Claiming is one conditional ``UPDATE … RETURNING`` in a ``BEGIN IMMEDIATE`` transaction:
pending runs, sleeping runs whose timer is due (or whose signal arrived), and running runs
whose lease expired, of the workflow versions this worker has registered. The epoch goes
up by one on each claim, so the previous holder's writes are refused from then on. Many
worker processes can share one SQLite file.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time

from ..errors import ConfigError
from ._app import App

__all__ = ["Worker"]

log = logging.getLogger("surefoot.durable")


def _report(fut: concurrent.futures.Future[str]) -> None:
    """A run's execution raised instead of reaching a status: say so, keep working."""
    if not fut.cancelled() and fut.exception() is not None:
        log.error("a run's execution failed", exc_info=fut.exception())


class Worker:
    """Runs an app's runs until stopped.

    Args:
        app: the app whose workflows this worker runs (its lease, clock and worker id).
        concurrency: runs executed at once.

    Raises:
        ConfigError: concurrency < 1.
    """

    def __init__(self, app: App, *, concurrency: int = 8) -> None:
        if concurrency < 1:
            raise ConfigError(f"concurrency must be >= 1, got {concurrency!r}")
        self.app = app
        self.concurrency = concurrency
        self.completed = 0
        self._futures: set[concurrent.futures.Future[str]] = set()
        self._recovered = False

    def _recover_own(self) -> int:
        """Take back runs this worker id held before a restart (no need to wait the lease)."""
        app = self.app
        n = 0
        for info in app.list_runs(status="running", limit=10_000):
            if info.owner != app.worker_id or info.run_id in app.executor.active:
                continue
            if (info.workflow, info.version) not in app._workflows:
                continue
            now = app.clock.now()
            got = app.journal.claim(
                app.worker_id,
                now=now,
                lease_until=now + app.lease,
                workflows=[],
                limit=1,
                run_id=info.run_id,
                force=True,
            )
            for run_id, epoch in got:
                self._futures.add(app.executor.submit(run_id, epoch))
                n += 1
        return n

    def claim(self) -> int:
        """Claim as many runs as there are free slots and start them; return how many."""
        app = self.app
        if not self._recovered:
            self._recovered = True
            self._recover_own()
        self._futures = {f for f in self._futures if not f.done()}
        free = self.concurrency - len(self._futures)
        if free <= 0:
            return 0
        now = app.clock.now()
        got = app.journal.claim(
            app.worker_id,
            now=now,
            lease_until=now + app.lease,
            workflows=app.registered(),
            limit=free,
        )
        for run_id, epoch in got:
            fut = app.executor.submit(run_id, epoch)
            fut.add_done_callback(_report)
            self._futures.add(fut)
        return len(got)

    def run_once(self, timeout: float | None = None) -> int:
        """Claim what is claimable now, wait for those executions to end; return how many.

        Each execution ends when its run succeeds, fails, suspends or needs attention.
        """
        n = self.claim()
        done, _ = concurrent.futures.wait(self._futures, timeout=timeout)
        for f in done:
            f.result()  # surface a SimulatedCrash or a bug
            self.completed += 1
        self._futures -= done
        return n

    def run(self, stop: threading.Event | None = None, *, idle_exit: float | None = None) -> None:
        """Claim and execute runs until ``stop`` is set (or idle for ``idle_exit`` seconds)."""
        app = self.app
        stop = stop or threading.Event()
        app.serving = True
        app.executor.loop()  # starts the heartbeat, which also announces this worker
        app._on_beat()
        idle_since = time.monotonic()
        wake = getattr(app.journal, "wait_for_work", None)
        try:
            while not stop.is_set():
                got = self.claim()
                busy = any(not f.done() for f in self._futures)
                if got or busy:
                    idle_since = time.monotonic()
                elif idle_exit is not None and time.monotonic() - idle_since >= idle_exit:
                    return
                if got and len(self._futures) < self.concurrency:
                    continue
                if wake is not None and not busy:
                    wake(app.poll)  # PostgreSQL: woken by NOTIFY instead of polling blind
                else:
                    stop.wait(app.poll)
        finally:
            app.serving = False
