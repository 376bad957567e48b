"""Workers: claim runs under a lease, execute them, renew the lease, take over dead ones.

Claiming is one conditional ``UPDATE … RETURNING`` in a ``BEGIN IMMEDIATE`` transaction:
pending runs, sleeping runs whose timer is due (or whose signal arrived), and running runs
whose lease expired, of the workflow versions this worker has registered. The epoch goes
up by one on each claim, so the previous holder's writes are refused from then on. Many
worker processes can share one SQLite file.

While idle, a worker on a journal that can be woken (``journal.waking``: SQLite's file
watch, PostgreSQL's ``LISTEN/NOTIFY``) blocks on it instead of sleeping its poll interval;
polling stays the fallback (timers, expired leases, a lost notification). Every
notification names the run it made claimable, with its workflow version and queue, and
every idle worker hears it; only one of them claims at once: of the live workers that serve
that workflow version (read every ``PEERS_EVERY`` seconds; live: advertised, and holding
its liveness lock), the one that ranks first for that run id (rendezvous hashing). A worker
that does not serve the run (another workflow, or a queue it does not declare) never claims
for it. The others claim at their next poll, and a worker whose slots are all taken when it
is picked claims as soon as one frees. Without this, a new run woke every idle worker and
all of them claimed (80% of claims came back empty with 4 workers). On such a journal a
freed slot claims at once only when the last claim filled every free slot (there may be
more queued) or the run that freed it suspended (it may be due at once); otherwise new work
is announced.

Liveness: a serving worker holds a lock that dies with its process (a file locked with
``flock`` next to a SQLite database, a session-level advisory lock on PostgreSQL). An idle
worker looks every ``LIVENESS_EVERY`` seconds for runs whose lease is unexpired but whose holder's
lock is free, and takes them over at once (``journal.liveness.claim_orphans``), fenced by the epoch
as any takeover; runs in the named queues it declares through the queue's claim, which
counts them as executing nowhere and keeps the queue's limits. A hung but living holder
keeps its lock: its runs wait for the lease.

When the journal is out of reach after it started (``StoreUnavailableError`` and other
storage errors), the worker backs off with ``surefoot.resilience.Backoff`` and keeps trying
until it is stopped, logging once when the outage starts and once when it ends; the runs it
held are fenced by their epoch as usual.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import logging
import random
import threading
import time

from ..errors import ConfigError, StoreUnavailableError
from ..resilience import Backoff
from ..storage.liveness import Serving
from ..storage.runs import ENDED
from ..storage.waking import Waking
from ._app import App
from ._retention import Retention, prune_runs

__all__ = ["Worker"]

log = logging.getLogger("surefoot.durable")

OUTAGE_BACKOFF = Backoff(0.5, 30.0, "full")
"""The default back-off between claims while the journal is out of reach."""

LIVENESS_EVERY = 0.2
"""Seconds between an idle worker's looks for runs whose holder's process died."""

PEERS_EVERY = 1.0
"""Seconds between a worker's reads of which workers serve now (for its wake-ups)."""

_SLICE = 0.5  # seconds: the longest a wait blocks before checking ``stop`` again

# The journal is out of reach (server gone, file locked past the busy timeout, disk
# error); a newer schema or a bad URL are not outages and still end the worker.
_UNAVAILABLE: tuple[type[BaseException], ...] = (StoreUnavailableError,)


def _report(fut: concurrent.futures.Future[str]) -> None:
    """A run's execution raised instead of reaching a status: say so, keep working."""
    if not fut.cancelled() and fut.exception() is not None:
        log.error("a run's execution failed", exc_info=fut.exception())


class Worker:
    """Runs an app's runs until stopped.

    Args:
        app: the app whose workflows this worker runs (its lease, clock and worker id).
        concurrency: runs executed at once.
        backoff: the waits between claims while the journal is unavailable (default
            ``OUTAGE_BACKOFF``: 0.5 s doubling to 30 s, full jitter).
        rng: the randomness for that jitter (default ``random.Random()``; seed it in tests).
        retention: prune finished runs by this policy every ``retention.every`` seconds
            (see ``App.prune``); None keeps every run.

    Attributes:
        completed: executions ``run_once`` waited out.
        claims / empty_claims: claims this worker sent to the journal, and how many of
            them took no run.
        outages: times the journal became unavailable (one log line each, and one when
            it came back). failed_claims: claims that failed during outages.

    Raises:
        ConfigError: concurrency < 1.
    """

    def __init__(
        self,
        app: App,
        *,
        concurrency: int = 8,
        backoff: Backoff | None = None,
        rng: random.Random | None = None,
        retention: Retention | None = None,
    ) -> None:
        if concurrency < 1:
            raise ConfigError(f"concurrency must be >= 1, got {concurrency!r}")
        self.app = app
        self.concurrency = concurrency
        self.completed = 0
        self.outages = 0
        self.failed_claims = 0
        self.backoff = backoff or OUTAGE_BACKOFF
        self.rng = rng or random.Random()
        self._futures: set[concurrent.futures.Future[str]] = set()
        self._run_ids: dict[concurrent.futures.Future[str], str] = {}
        self._recovered = False
        self._freed = threading.Event()  # an execution ended: a slot is free
        self._looked = 0.0  # when this worker last looked for dead holders' runs
        self.claims = 0
        self.empty_claims = 0
        self._more = True  # the last claim filled every free slot: more may be queued
        self._peers: dict[str, Serving] = {}
        self._peers_at = -PEERS_EVERY
        self.retention = retention
        self._pruned_at: float | None = None

    def _recover_own(self) -> int:
        """Take back runs this worker id held before a restart (no need to wait the lease)."""
        app = self.app
        n = 0
        app.journal  # noqa: B018 - a worker opens its journal (makes it, unless create=False)
        for info in app.list_runs(status="running", limit=10_000):
            if info.owner != app.worker_id or info.run_id in app.executor.active:
                continue
            if app.registry.get(info.workflow, info.version) is None:
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
                reason="restarted",
            )
            for run_id, epoch in got:
                fut = app.executor.submit(run_id, epoch)
                self._run_ids[fut] = run_id
                self._futures.add(fut)
                n += 1
        return n

    def claim(self) -> int:
        """Claim as many runs as there are free slots and start them; return how many."""
        app = self.app
        if not self._recovered:
            self._recovered = True
            self._recover_own()
        self._futures = {f for f in self._futures if not f.done()}
        self._run_ids = {f: r for f, r in self._run_ids.items() if not f.done()}
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
        got += app.registry.queues.claim(  # named queues, under their limits
            app.journal.queues,
            app.worker_id,
            now=now,
            lease_until=now + app.lease,
            workflows=app.registered(),
            free=free - len(got),
        )
        got += self._claim_orphans(free - len(got))
        self.claims += 1
        self.empty_claims += not got
        self._more = len(got) >= free
        self._housekeep()
        for run_id, epoch in got:
            fut = app.executor.submit(run_id, epoch)
            fut.add_done_callback(_report)
            fut.add_done_callback(self._ended)
            self._run_ids[fut] = run_id
            self._futures.add(fut)
        return len(got)

    def _ended(self, fut: concurrent.futures.Future[str]) -> None:
        """An execution ended: a slot is free. A run that suspended may be due at once (its
        signal came while it ran): then the next claim must not wait for a notification."""
        if fut.cancelled() or fut.exception() is not None or fut.result() not in ENDED:
            self._more = True
        self._freed.set()

    def _housekeep(self) -> None:
        """A worker's chores on each claim: fire due schedules; prune when it is time."""
        app = self.app
        if app.registry.schedules:
            app.fire_schedules()
        policy = self.retention
        if policy is not None:
            now = app.clock.now()
            if self._pruned_at is None or now - self._pruned_at >= policy.every:
                self._pruned_at = now
                prune_runs(app.journal.pruning, policy, now=now, pruned=app.tokens.drop_runs)

    def _claim_orphans(self, free: int) -> list[tuple[str, int]]:
        """Runs whose holder's process died, at most every ``LIVENESS_EVERY`` seconds."""
        app = self.app
        liveness = app.journal.liveness
        if liveness is None or free <= 0 or not app.serving:
            return []
        t = time.monotonic()
        if t - self._looked < LIVENESS_EVERY:
            return []
        self._looked = t
        now = app.clock.now()
        return liveness.claim_orphans(
            app.worker_id,
            now=now,
            lease_until=now + app.lease,
            workflows=app.registered(),
            limit=free,
            queues=app.registry.queues.worker_limits(),
        )

    def in_flight(self) -> list[str]:
        """The ids of the runs this worker claimed and is still executing, sorted.

        After ``run`` returns (stopped, or idle) these are the runs it leaves holding a
        lease: any worker takes them over once the lease expires, and a worker restarted
        with the same worker id takes them back at once.
        """
        return sorted(r for f, r in list(self._run_ids.items()) if not f.done())

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
        """Claim and execute runs until ``stop`` is set (or idle for ``idle_exit`` seconds).

        The journal is opened (and migrated) first: an error there (a file that is not a
        database, a newer schema, a bad URL, a server that does not answer) is raised at
        once. An outage after that does not end the loop: claims back off (``backoff``)
        until the journal answers again, ``stop`` is set, or ``idle_exit`` seconds pass
        with nothing executing.

        Raises:
            StoreUnavailableError / SchemaVersionError / ConfigError: the journal cannot
                be opened.
        """
        app = self.app
        stop = stop or threading.Event()
        # Start-up is not an outage: a file that is not a database, a schema from a newer
        # surefoot, a bad URL or a server that never answered end the worker here, with the
        # error, instead of being retried forever.
        wake = app.journal.waking
        if wake is not None:
            wake.wait_for_work(0.0)  # LISTEN before the first claim: nothing falls in between
        app.serving = True
        failures = 0
        down_since = 0.0
        try:
            app.executor.loop()  # starts the heartbeat, which also announces this worker
            app.executor.announce()
        except _UNAVAILABLE as exc:
            failures, down_since = self._down(exc), time.monotonic()
            wake = None
        idle_since = time.monotonic()
        try:
            while not stop.is_set():
                try:
                    got = self.claim()
                except _UNAVAILABLE as exc:
                    if failures == 0:
                        self._down(exc)
                        down_since = time.monotonic()
                    failures += 1
                    self.failed_claims += 1
                    if any(not f.done() for f in self._futures):
                        idle_since = time.monotonic()
                    pause = self.backoff.wait(failures, self.rng)
                    if idle_exit is not None:  # an outage is idle time too
                        left = idle_since + idle_exit - time.monotonic()
                        if left <= 0:
                            return
                        pause = min(pause, left)
                    stop.wait(pause)
                    continue
                if failures:
                    log.warning(
                        "worker %s: the journal %s answers again after %.1f s (%d failed "
                        "claims); resuming",
                        app.worker_id,
                        app.url,
                        time.monotonic() - down_since,
                        failures,
                    )
                    failures = 0
                    if wake is None:
                        wake = app.journal.waking
                busy = any(not f.done() for f in self._futures)
                if got or busy:
                    idle_since = time.monotonic()
                elif idle_exit is not None and time.monotonic() - idle_since >= idle_exit:
                    return
                if got and self._more and len(self._futures) < self.concurrency:
                    continue
                self._pause(stop, wake)
        finally:
            app.serving = False
            app.executor.withdraw()

    def _down(self, exc: BaseException) -> int:
        """Log the start of an outage (once per outage)."""
        self.outages += 1
        log.warning(
            "worker %s: the journal %s is unavailable (%s); backing off (%s) until it answers",
            self.app.worker_id,
            self.app.url,
            exc,
            self.backoff,
        )
        return 1

    def _pause(self, stop: threading.Event, wake: Waking | None) -> None:
        """Wait up to the poll interval for new work, a freed slot or ``stop``.

        With ``wake`` (``journal.waking``) a wake-up ends the wait at once; the wait is cut
        in slices of at most ``_SLICE`` seconds so ``stop`` and freed slots are noticed
        while the poll interval is long.
        """
        deadline = time.monotonic() + self.app.poll
        while not stop.is_set():
            if self._freed.is_set():
                if wake is None or self._more:
                    break  # a slot is free and there may be work queued
                self._freed.clear()  # new work is announced: wait for it (or the poll)
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if wake is not None:
                try:
                    if wake.wait_for_work(min(left, _SLICE)) and self._picked(wake):
                        if len(self._futures) < self.concurrency:
                            break
                        self._more = True  # picked while full: claim when a slot frees
                except _UNAVAILABLE:
                    wake = None  # the next claim finds out and backs off
            else:
                self._freed.wait(min(left, 0.05))  # and look at ``stop`` again
        self._freed.clear()

    def _picked(self, wake: Waking) -> bool:
        """Is this worker the one to claim at once for the runs just announced?

        For each run named, the candidates are the live workers that serve its workflow
        version and, for a run in a named queue, take part in that queue
        (``journal.liveness.serving``: advertised, and holding their liveness lock);
        the one ranking first (the highest hash of worker id and run id) claims it. A run
        this worker does not serve (another workflow, or a queue it does not declare) is
        never its to claim. A run named without its workflow (an older surefoot's
        notification) ranks the workers sharing a workflow with this one; with no run
        named at all, every worker claims, as before.
        """
        ids = wake.woken_for()
        if not ids:
            return True
        app = self.app
        t = time.monotonic()
        liveness = app.journal.liveness
        if t - self._peers_at >= PEERS_EVERY and liveness is not None:
            self._peers_at = t
            try:
                self._peers = liveness.serving(now=app.clock.now())
            except _UNAVAILABLE:
                self._peers = {}
        me = app.worker_id
        mine = set(app.registered())
        for run_id, workflow, queue in ids:
            if workflow is not None and workflow not in mine:
                continue  # another workflow's run: its workers are told too
            if queue is not None and queue not in app.registry.queues:
                continue  # a queue whose limits this worker does not take part in
            peers = {
                w
                for w, served in self._peers.items()
                if (
                    workflow in served.workflows
                    if workflow is not None
                    else served.workflows & mine
                )
                and (queue is None or (served.queues is not None and queue in served.queues))
            }
            peers.add(me)
            if max(peers, key=lambda w: _rank(w, run_id)) == me:
                return True
        return False


def _rank(worker_id: str, run_id: str) -> bytes:
    """Rendezvous hashing: the worker with the highest rank for a run claims it."""
    return hashlib.blake2b(f"{worker_id}\0{run_id}".encode(), digest_size=8).digest()
