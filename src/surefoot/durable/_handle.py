"""``RunHandle``: wait for a run's result from any process."""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from typing import Any, Protocol

from .. import codec
from ..clock import Clock
from ..errors import ConfigError, RunFailedError, TimeoutError_, UnknownRunError
from ..storage.journal import Journal
from ..storage.runs import ENDED
from ._follow import RunStream, check_after
from ._registry import Registry
from ._runner import Executor
from ._tokens import TokenHub
from ._types import RunInfo
from ._values import read

__all__ = ["RunHandle", "RunSource"]


class RunSource(Protocol):
    """What a handle reads from its app (an ``App``): the journal, the clock, the executor."""

    @property
    def url(self) -> str: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def poll(self) -> float: ...
    @property
    def executor(self) -> Executor: ...
    @property
    def registry(self) -> Registry: ...
    @property
    def tokens(self) -> TokenHub: ...

    @property
    def journal(self) -> Journal: ...


class RunHandle:
    """A run, by id. ``result()`` waits for it; cheap to make, safe to drop.

    A handle from ``app.start`` (or ``resume``, ``retry``, ``fork``) *drives* its run: while
    you wait, it runs the run here whenever the run is claimable (pending, a timer due, a
    signal arrived, an abandoned lease), so an embedded program needs no worker. A handle
    from ``app.enqueue`` or ``app.handle`` only watches, leaving the work to workers.

    Attributes:
        run_id: the run's id.
    """

    def __init__(
        self,
        app: RunSource,
        run_id: str,
        *,
        drive: bool,
        future: concurrent.futures.Future[str] | None = None,
        resume_as: str | None = None,
    ) -> None:
        self.app = app
        self.run_id = run_id
        self._drive = drive
        self._future = future
        # an operator's resume that waits for a live holder's lease: the claim this handle
        # makes is audited as the operator's (reason and ``resume`` entry), by this worker
        self._resume_as = resume_as

    def info(self) -> RunInfo:
        """The run's header now.

        Raises:
            UnknownRunError: no such run.
        """
        row = self.app.journal.get_run(self.run_id)
        if row is None:
            raise UnknownRunError(self.run_id, self.app.url)
        return RunInfo.from_row(row)

    def status(self) -> str:
        """The run's status now (pending, running, sleeping, succeeded, …)."""
        return self.info().status

    def result(self, timeout: float | None = None) -> Any:
        """Wait for the run to end and return its result.

        A run sleeping at a plain timer is waited for on the app's clock (a ``FakeClock``
        jumps to the wake time); a run that executes, waits for a worker or for a signal
        is waited for in real time, since that is the time it moves in: woken when a
        commit moves its row (SQLite) or when it ends (PostgreSQL), and read again at least
        every ``app.poll``.

        Args:
            timeout: seconds; it passes when either the app's clock or real time has
                moved that far (while the run executes in this app, real time: the app's
                clock moved by the run's own steps is not waiting). None waits as long as
                it takes.

        Raises:
            RunFailedError: the run ended failed, cancelled or needs_attention.
            TimeoutError_: still not finished after ``timeout`` (the run goes on).
            UnknownRunError: no such run.
            SimulatedCrash: an in-process crash point fired in this run.
        """
        app = self.app
        clock = app.clock
        t_clock, t_real = clock.monotonic(), time.monotonic()

        def left(clock_too: bool = True) -> float:
            if timeout is None:
                return float("inf")
            moved = time.monotonic() - t_real
            if clock_too:
                moved = max(moved, clock.monotonic() - t_clock)
            if moved >= timeout:
                raise TimeoutError_(timeout, self._late(timeout))
            return timeout - moved

        while True:
            fut = self._future
            if fut is not None:
                # ``left()`` outside the ``try``: its ``TimeoutError_`` is a ``TimeoutError``,
                # which is what ``concurrent.futures.TimeoutError`` is since Python 3.11, so
                # inside it the caller's timeout was caught as a poll and never reached them.
                # Real time only while the run executes here: the app's clock moved by the
                # run itself (a FakeClock advanced by a step or a back-off) is not waiting.
                wait = min(app.poll, left(clock_too=False))
                try:
                    fut.result(timeout=wait)
                except concurrent.futures.TimeoutError:
                    continue
                finally:
                    if fut.done():
                        self._future = None
            row = app.journal.get_run(self.run_id)
            if row is None:
                raise UnknownRunError(self.run_id, app.url)
            if row.status == "succeeded":
                wf = app.registry.get(row.workflow, row.version)
                ann = Any if wf is None else wf.returns
                return read(row.result, ann, f"the result of run {self.run_id!r}")
            if row.status in ENDED:  # failed, cancelled, needs_attention
                raise RunFailedError(self.run_id, row.status, RunInfo.from_row(row).error)
            if self._drive:
                resumer = self._resume_as
                self._future = app.executor.drive(row, "operator" if resumer else None)
                if self._future is not None:
                    if resumer is not None:
                        self._resume_as = None
                        detail = codec.dumps({"from": row.status, "worker": resumer})
                        app.journal.audit(
                            self.run_id,
                            actor="operator",
                            action="resume",
                            detail=detail,
                            now=clock.now(),
                        )
                    continue
            if (
                self._drive
                and row.status == "sleeping"
                and row.wake_at is not None
                and row.waiting_for is None
                and row.wake_at > clock.now()
            ):  # a plain timer that this handle will run when due: wait on the clock
                clock.sleep(min(row.wake_at - clock.now(), left()))
            else:
                self._wait_for_move(row.status, row.updated_at, min(app.poll, left()))

    def stream(
        self, after: int | str = 0, *, follow: bool = True, timeout: float | None = None
    ) -> RunStream:
        """The run's token stream after offset ``after``: what its steps emit while they
        run (``durable.emit``, a provider adapter's ``stream()``), live.

        Iterate it with ``for`` or ``async for``; each ``StreamEvent`` has an ``offset``:
        after a reconnect (or a crash of this reader) pass the last one you handled as
        ``after`` to get every later event once. A ``retry`` event announces a step's new
        attempt: drop the text held for its position. See docs/streams.md.

        Args:
            after: the offset to read after (0: from the start; text is accepted, as a
                ``Last-Event-ID`` header is).
            follow: wait for new events until the run ends (False: stop at the events
                stored now).
            timeout: seconds after which a followed stream stops even if the run goes on.

        Raises:
            UnknownRunError: no such run (or it was pruned).
            ConfigError: a bad ``after`` (or one past the stream's last offset), a negative
                ``timeout``, or a journal that keeps no token streams.
        """
        app = self.app
        run_id = self.run_id

        def status() -> str | None:
            row = app.journal.get_run(run_id)
            return None if row is None else row.status

        if status() is None:
            raise UnknownRunError(run_id, app.url)
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0
        ):
            raise ConfigError(f"timeout must be seconds >= 0 or None, got {timeout!r}")
        log = app.tokens.log(run_id)
        start = check_after(after)
        if start and start > (last := log.last_seq()):
            raise ConfigError(
                f"after={start} is past the end of the stream of run {run_id!r} (its last offset "
                f"is {last}); pass the last offset you read, or 0 for the start"
            )
        return RunStream(
            log,
            status,
            run_id,
            after=start,
            follow=follow,
            poll=app.poll or 0.05,
            timeout=timeout,
            decode=app.tokens.decode,
        )

    def _wait_for_move(self, status: str, updated_at: float, timeout: float) -> None:
        """Up to ``timeout`` seconds until the run's row moves from what was read. A journal
        that can be woken (``waking.wait_until``: SQLite on any commit to the file,
        PostgreSQL on a run's end) ends the wait when the row moves, so a result is read as
        soon as it is committed; otherwise it sleeps."""
        waking = self.app.journal.waking
        if waking is None:
            time.sleep(timeout)
            return

        def moved() -> bool:
            row = self.app.journal.get_run(self.run_id)
            return row is None or (row.status, row.updated_at) != (status, updated_at)

        waking.wait_until(moved, timeout)

    async def aresult(self, timeout: float | None = None) -> Any:
        """``result()`` for async code (waits in a thread)."""
        return await asyncio.to_thread(self.result, timeout)

    def _late(self, timeout: float | None) -> str:
        return (
            f"run {self.run_id!r} did not finish within {timeout} s; it goes on. Wait again, "
            f"or look at it with `surefoot runs show {self.run_id} --db URL`"
        )

    def __repr__(self) -> str:
        return f"RunHandle({self.run_id!r})"
