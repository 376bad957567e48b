"""Executes runs: one event loop thread per app, a group-commit writer, lease heartbeats.

Async workflows run as tasks on the app's loop; sync workflows run in a thread pool and
journal directly; the :class:`~._writer.Writer` batches the step records of every run on
the loop. The executor is given what it needs: the registry (which workflow a run needs)
and a :class:`Host` (the journal and the settings, read live).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from .. import codec
from ..clock import Clock
from ..errors import (
    CorruptionError,
    EncodeError,
    LeaseLostError,
    StepMismatchError,
    UnsupportedTypeError,
)
from ..storage.journal import Journal
from ..storage.runs import RunRow, RunWrite
from ._context import (
    DOWN,
    JournalDown,
    NeedsAttention,
    RunState,
    Scope,
    Suspend,
    current,
    task_factory,
)
from ._crash import CrashPlan
from ._deadlines import deadline_audit
from ._handover import hold, take_from_dead_holder
from ._observe import RunObserver, enter_run, leave_run
from ._registry import Registry
from ._saga import compensate
from ._tokens import TokenHub
from ._types import TERMINAL, WAIT_SEP
from ._values import check_same
from ._writer import Writer

__all__ = ["Executor", "Host"]


class Host(Protocol):
    """What the executor reads from its app, at each use (``crash`` may change between runs)."""

    clock: Clock
    worker_id: str
    lease: float
    crash: CrashPlan | None
    max_claims: int
    serving: bool
    tokens: TokenHub

    @property
    def journal(self) -> Journal: ...

    def served_queues(self) -> list[str]:
        """The named queues this app takes part in (advertised with its workflows)."""
        ...


def _call_sync(scope: Scope, fn: Callable[..., Any], args: Any, kwargs: Any) -> Any:
    token = current.set(scope)
    traced = enter_run(scope.run)  # the pool thread does not inherit the run's span
    try:
        return fn(*args, **kwargs)
    finally:
        leave_run(traced)
        current.reset(token)


LIVE_LEASES = 3
"""A serving worker counts as live for this many of its own leases past its last heartbeat
(it beats every lease / 3, so a few missed beats under load do not read as dead)."""


class Executor:
    """Runs claimed runs for one app: a loop thread, a pool for sync workflows, heartbeats."""

    def __init__(self, registry: Registry, host: Host) -> None:
        self.registry = registry
        self.host = host
        self.active: dict[str, RunState] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self.writer: Writer | None = None
        self._stop_beat = threading.Event()
        self._beat_thread: threading.Thread | None = None
        self._held = False  # this app's liveness lock (see _handover.hold)

    # -- lifecycle ---------------------------------------------------------------------

    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                loop.set_task_factory(task_factory)  # type: ignore[arg-type]
                ready = threading.Event()

                def main() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                self._thread = threading.Thread(target=main, name="surefoot-durable", daemon=True)
                self._thread.start()
                # Heartbeats get their own thread: a step that blocks the loop (a sync call
                # in an async workflow) must not let the lease lapse.
                self._stop_beat = threading.Event()
                self._beat_thread = threading.Thread(
                    target=self._beats,
                    args=(self._stop_beat,),
                    name="surefoot-heartbeat",
                    daemon=True,
                )
                self._beat_thread.start()
                ready.wait()
                self.writer = Writer(self.host.journal.commit, self.active)
                self._pool = concurrent.futures.ThreadPoolExecutor(
                    max_workers=32, thread_name_prefix="surefoot-workflow"
                )
                self._loop = loop
            return self._loop

    def close(self) -> None:
        with self._lock:
            loop, thread, pool, writer = self._loop, self._thread, self._pool, self.writer
            beat, self._beat_thread = self._beat_thread, None
            self._loop = self._thread = self._pool = None
            self._stop_beat.set()
        if beat is not None and beat is not threading.current_thread():
            # the journal is closed right after this: a beat still writing with its
            # connection would use a closed SQLite handle (seen as a segfault in tests)
            beat.join(timeout=10)
        runs = tuple(self.active.values())
        if loop is not None and thread is not None:
            self._release(loop, thread)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=5)
            loop.close()
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        if writer is not None:
            writer.close()  # waits for its commit in flight, for the same reason
        _wait_for_writes(runs, timeout=10.0)

    def _release(self, loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
        """Let go of the runs executing here: they write nothing more and are cancelled.

        Without this a closed loop's pending runs were destroyed by the garbage collector,
        whose ``GeneratorExit`` their code could turn into a recorded failure; released,
        they keep their journal as it stands and resume after their lease.
        """
        for run in tuple(self.active.values()):
            run.released = True
        if thread is threading.current_thread():
            return  # closed from the loop itself: nothing to wait on here

        async def cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=2.0)

        try:
            asyncio.run_coroutine_threadsafe(cancel_all(), loop).result(timeout=3.0)
        except Exception:  # a run that ignores cancellation: stop the loop regardless
            pass
        try:  # as asyncio.run ends: async generators still suspended (an LLM adapter's
            # closer of this loop's SDK client, say) are closed while the loop still runs
            asyncio.run_coroutine_threadsafe(loop.shutdown_asyncgens(), loop).result(timeout=3.0)
        except Exception:
            pass

    def submit(
        self, run_id: str, epoch: int, created: RunRow | None = None
    ) -> concurrent.futures.Future[str]:
        """Execute a claimed run on the loop; the future gives the status it reached.

        ``created``: the row this process has just created for the run (``App.start``),
        which therefore has no steps yet: neither the row nor its steps are read again.
        """
        if not self._held:  # a run in flight here is seen orphaned once this process dies
            self._held = hold(self.host)
        loop = self.loop()
        with self._lock:
            assert self.writer is not None
            self.writer.starting += 1  # a run executing alone now shares its next commits
        return asyncio.run_coroutine_threadsafe(self._execute(run_id, epoch, created), loop)

    def drive(
        self, row: RunRow, reason: str | None = None
    ) -> concurrent.futures.Future[str] | None:
        """Claim and execute ``row`` here if it is claimable now (or held by a worker whose
        process is gone); the future, or None. ``reason``: the takeover reason of a claim
        of a run in flight (default ``lease_expired``; ``restarted`` for this worker id's)."""
        if row.status in TERMINAL or row.status == "needs_attention":
            return None
        if self.registry.get(row.workflow, row.version) is None:
            return None
        host = self.host
        epoch = take_from_dead_holder(host, row)
        if epoch is not None:
            return self.submit(row.run_id, epoch)
        now = host.clock.now()
        mine = row.owner == host.worker_id and row.run_id not in self.active
        claimed = host.journal.claim(
            host.worker_id,
            now=now,
            lease_until=now + host.lease,
            workflows=[],
            limit=1,
            run_id=row.run_id,
            force=mine and row.status == "running",
            reason="restarted" if mine else reason,
        )
        if not claimed:
            return None
        return self.submit(row.run_id, claimed[0][1])

    # -- heartbeat ---------------------------------------------------------------------

    def announce(self) -> None:
        """Tell the journal which workflows this worker serves, and until when it counts as
        live (while it serves): ``LIVE_LEASES`` of its own leases past this heartbeat.

        The journal's worker row keeps that time in its ``seen_at`` column: whoever looks
        (``show``'s ``stranded``) compares it with the time now and nothing of its own, so
        the answer is the same from every process.
        """
        host = self.host
        if host.serving:
            now = host.clock.now()
            liveness = host.journal.liveness
            if liveness is not None:  # before its first claim: see Worker (liveness)
                liveness.hold(host.worker_id, now=now)
            live_until = now + LIVE_LEASES * host.lease
            host.journal.register_worker(
                host.worker_id,
                self.registry.registered(),
                now=live_until,
                queues=host.served_queues(),
            )

    def withdraw(self) -> None:
        """Tell the journal this worker serves no more (it is live until now): a stopped
        worker must not count as offering its versions for three more leases."""
        host = self.host
        try:
            # live until a second ago: ``show`` counts a worker live while its time >= now
            gone = host.clock.now() - 1.0
            host.journal.register_worker(
                host.worker_id, self.registry.registered(), now=gone, queues=host.served_queues()
            )
        except Exception:  # the journal is down: the advertisement simply runs out
            pass

    def _beats(self, stop: threading.Event) -> None:
        while not stop.wait(max(self.host.lease / 3.0, 0.05)):
            if self.active or self.host.serving:
                if self.active and not self.host.serving:
                    hold(self.host)  # again after a lost connection (announce does, serving)
                self._beat()

    def _beat(self) -> None:
        """Renew the leases of the runs executing here; flag the ones taken over."""
        app = self.host
        try:
            held = [(r.run_id, r.epoch) for r in tuple(self.active.values())]
            if held:
                now = app.clock.now()
                lost = app.journal.heartbeat(
                    app.worker_id, held, lease_until=now + app.lease, now=now
                )
                for run_id in lost:
                    run = self.active.get(run_id)
                    if run is not None:
                        run.lost = True
            self.announce()
        except Exception:  # a busy database must not kill the heartbeat; try again next beat
            pass

    # -- one execution -----------------------------------------------------------------

    async def _execute(self, run_id: str, epoch: int, created: RunRow | None = None) -> str:
        with self._lock:
            if self.writer is not None:
                self.writer.starting -= 1
        app = self.host
        journal = app.journal
        row = created if created is not None else journal.get_run(run_id)
        if row is None or row.epoch != epoch:
            return "lost"
        wf = self.registry.workflow_for(row.workflow, row.version)
        args, kwargs = codec.loads(row.args)
        damaged: CorruptionError | None = None
        recorded: dict[str, Any] = {}
        if created is None:
            try:
                recorded = {s.pos: s for s in journal.steps(run_id)}
            except CorruptionError as exc:  # every claim would meet it again: escalate
                damaged = exc
        run = RunState(
            run_id=run_id,
            epoch=epoch,
            workflow=row.workflow,
            strategy=row.strategy,
            journal=journal,
            clock=app.clock,
            actor=app.worker_id,
            recorded=recorded,
            crash=app.crash,
            writer=self.writer,
            parent_id=row.parent_id,
            deadline_at=row.deadline_at,
            tokens=app.tokens,
        )
        if run.recorded:  # new positions go after the journal's last (see RunState.number)
            run.next_order = 1 + max(s.seq for s in run.recorded.values())
        self.active[run_id] = run
        run.observer = obs = RunObserver(row, app.worker_id)
        try:
            obs.begin(journal, app.clock.now(), len(run.recorded))
            if damaged is not None:
                detail = codec.dumps({"reason": "corruption", "why": str(damaged)})
                return await self._finish(
                    run, "needs_attention", error=_err(damaged), audit=[("needs_attention", detail)]
                )
            if row.claims > app.max_claims:
                return await self._too_many_claims(run, row.claims)
            return await self._drive(run, wf, args, kwargs)
        except LeaseLostError as exc:
            self._note_lost(run, exc)
            return "lost"
        except JournalDown:
            return "abandoned"  # resumed from its journal once the lease expires
        finally:
            app.tokens.close_run(run_id)
            self.active.pop(run_id, None)
            obs.end(sys.exc_info()[1])

    async def _drive(self, run: RunState, wf: Any, args: Any, kwargs: Any) -> str:
        scope = Scope(run)
        try:
            args, kwargs = wf.params.decode(args, kwargs, f"workflow {wf.name!r}")
            if wf.is_async:
                token = current.set(scope)
                try:
                    value = await wf.fn(*args, **kwargs)
                finally:
                    current.reset(token)
            else:
                loop = asyncio.get_running_loop()
                value = await loop.run_in_executor(
                    self._pool, _call_sync, scope, wf.fn, args, kwargs
                )
        except BaseException as exc:
            await _stop_tasks(run)  # siblings under gather must not act after the run stopped
            return await self._settle(run, exc)
        await _stop_tasks(run)
        try:
            where = f"the result of workflow {run.workflow!r}"
            text = codec.dumps(value, where=where)
            check_same(value, text, wf.returns, where)
        except (EncodeError, UnsupportedTypeError) as exc:
            return await self._fail(run, exc)
        return await self._finish(run, "succeeded", result=text)

    async def _settle(self, run: RunState, exc: BaseException) -> str:
        """The run's code stopped with ``exc``: suspend, escalate, fail, or pass it on."""
        if isinstance(exc, Suspend):
            return await self._suspend(run, exc)
        if isinstance(exc, NeedsAttention):
            detail = codec.dumps({"reason": exc.reason, **exc.detail})
            return await self._finish(
                run, "needs_attention", error=_err(exc), audit=[("needs_attention", detail)]
            )
        if isinstance(exc, StepMismatchError):
            detail = codec.dumps({"reason": "step_mismatch", "why": str(exc)})
            return await self._finish(
                run, "needs_attention", error=_err(exc), audit=[("needs_attention", detail)]
            )
        if isinstance(exc, LeaseLostError) or not isinstance(exc, Exception):
            raise exc  # a zombie, a simulated crash, a cancellation: stop here
        return await self._fail(run, exc)

    async def _fail(self, run: RunState, exc: BaseException) -> str:
        try:
            status, audit = await compensate(run, exc)
        except Suspend:  # a compensation cannot wait; treat as a failed rollback
            status, audit = "needs_attention", [("needs_attention", '"compensation waited"')]
        audit = deadline_audit(exc) + audit
        return await self._finish(run, status, error=_err(exc), audit=audit)

    async def _suspend(self, run: RunState, s: Suspend) -> str:
        assert self.writer is not None
        now = run.clock.now()
        # Several waits may have suspended at once (siblings under ``gather``): journal
        # each one's row, wake at the earliest deadline, and name every signal awaited (a
        # signal for any of them, even one already queued, makes the run due at once).
        waits = run.suspends or [s]
        deadlines = [w.wake_at for w in waits if w.wake_at is not None]
        if run.deadline_at is not None:
            deadlines.append(run.deadline_at)  # wake at the deadline to time out
        names = [w.waiting_for for w in waits if w.waiting_for is not None]
        sleep = RunWrite(
            run.run_id,
            run.epoch,
            "sleeping",
            now,
            run.actor,
            wake_at=min(deadlines) if deadlines else None,
            waiting_for=WAIT_SEP.join(dict.fromkeys(names)) if names else None,
            audit=_claim_of(run),
        )
        records = [w.record for w in waits if w.record is not None]
        for rec in records:
            run.number(rec)
        futs = [self.writer.submit(rec) for rec in records]
        futs.append(self.writer.submit(sleep))  # same batch, same transaction as the record
        try:
            oks = await asyncio.gather(*futs)
        except DOWN as exc:
            raise JournalDown(exc) from exc
        if not all(oks):
            run.lost = True
            raise LeaseLostError(run.run_id, run.epoch)
        if run.observer is not None:
            run.observer.reached("sleeping", ", ".join(dict.fromkeys(names)) or "a timer")
        return "sleeping"

    async def _finish(
        self,
        run: RunState,
        status: str,
        *,
        result: str | None = None,
        error: str | None = None,
        audit: list[tuple[str, str]] | None = None,
    ) -> str:
        rec = RunWrite(
            run.run_id,
            run.epoch,
            status,
            run.clock.now(),
            run.actor,
            result=result,
            error=error,
            audit=[*_claim_of(run), *(audit or [])],
            parent=run.parent_id,
        )
        await run.write(rec)
        if run.observer is not None:
            run.observer.reached(status, _reason_of(audit))
        return status

    async def _too_many_claims(self, run: RunState, claims: int) -> str:
        """``run`` was claimed more than ``max_claims`` times without suspending: park it.

        Each claim after the first means the previous holder died (or lost its lease) with
        the run in flight; a run that kills its worker every time would otherwise be
        retried forever. The run keeps its journal; ``surefoot runs retry`` resumes it.
        """
        limit = self.host.max_claims
        detail = codec.dumps(
            {
                "reason": "max_claims",
                "claims": claims,
                "max_claims": limit,
                "why": f"claimed {claims} times (max_claims={limit}) without suspending or "
                "finishing: each earlier holder died or lost its lease mid-run, so it is not "
                "run again. Fix the cause, then `surefoot runs retry` it.",
            }
        )
        return await self._finish(run, "needs_attention", audit=[("needs_attention", detail)])

    def _note_lost(self, run: RunState, exc: LeaseLostError) -> None:
        """A zombie's write was refused: say so in the audit log (append-only, unfenced)."""
        if run.observer is not None:
            run.observer.fenced(str(exc))
        try:
            self.host.journal.audit(
                run.run_id,
                actor=run.actor,
                action="lease_lost",
                detail=codec.dumps({"epoch": run.epoch, "why": str(exc)}),
                now=run.clock.now(),
            )
        except Exception:
            pass


def _wait_for_writes(runs: tuple[RunState, ...], timeout: float) -> None:
    """Until no run of ``runs`` has a commit in flight from sync code (a sync workflow's
    pool thread, which close does not join: it may be in the user's code for long), or
    ``timeout``. Released runs start no new commit; one already past that check would
    otherwise use a connection the journal is about to close."""
    deadline = time.monotonic() + timeout
    while any(run.writing for run in runs) and time.monotonic() < deadline:
        time.sleep(0.002)


async def _stop_tasks(run: RunState) -> None:
    """Cancel the tasks the run created that are still going, and wait for them."""
    left = [t for t in run.tasks if not t.done()]
    for t in left:
        t.cancel()
    if left:
        await asyncio.gather(*left, return_exceptions=True)


def _err(exc: BaseException) -> str:
    return codec.dumps(codec.error_to_data(exc))


def _claim_of(run: RunState) -> list[tuple[str, str]]:
    """A start()ed run's claim entry not written yet (once), or nothing."""
    return [] if run.observer is None else run.observer.take_claim()


def _reason_of(audit: list[tuple[str, str]] | None) -> str | None:
    """The reason a needs_attention entry gives, for the log line."""
    for action, detail in audit or ():
        if action == "needs_attention":
            data = codec.loads(detail)
            return str(data.get("reason")) if isinstance(data, dict) else str(data)
    return None
