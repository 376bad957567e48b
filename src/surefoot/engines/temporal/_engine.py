"""The client side: ``app.start`` / ``enqueue`` / ``signal`` / ``handle`` of an app on Temporal.

The engine keeps one event loop thread of its own, where its Temporal client (and, once
``app.start`` asked to run here, an in-process worker) live; the sync API waits on it.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import logging
import threading
import uuid
import weakref
from collections.abc import Coroutine
from typing import Any, TypeVar

from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import (
    ApplicationError,
    CancelledError,
    TerminatedError,
    WorkflowAlreadyStartedError,
)
from temporalio.exceptions import TimeoutError as WorkflowTimeoutError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker

from ... import codec
from ...clock import seconds
from ...durable import RunHandle, RunInfo
from ...durable.engine import Workflow
from ...errors import (
    ConfigError,
    JournalError,
    RunConflictError,
    RunFailedError,
    TimeoutError_,
    UnknownRunError,
)
from ._url import TemporalConfig, parse_url
from ._wire import parse_type, type_name
from ._worker import connect, make_worker, unserve
from ._workflow import SIGNALS_QUERY

__all__ = ["TemporalEngine", "TemporalHandle"]

T = TypeVar("T")
log = logging.getLogger("surefoot.engines.temporal")

_STATUS = {
    "RUNNING": "running",
    "COMPLETED": "succeeded",
    "FAILED": "failed",
    "CANCELED": "cancelled",
    "TERMINATED": "cancelled",
    "CONTINUED_AS_NEW": "running",
    "TIMED_OUT": "failed",
}


def _failure(err: BaseException) -> tuple[str, Any, list[list[Any]]]:
    """(status, error data, audit) of a run that ended with workflow failure ``err``."""
    cause = err.cause if isinstance(err, WorkflowFailureError) else err
    if isinstance(cause, ApplicationError) and (cause.type or "").startswith("surefoot."):
        data = cause.details[0] if cause.details else {}
        return str(data.get("status", "failed")), data.get("error"), list(data.get("audit", []))
    if isinstance(cause, CancelledError | TerminatedError):
        return "cancelled", {"t": type(cause).__name__, "message": str(cause)}, []
    if isinstance(cause, WorkflowTimeoutError):
        return "failed", {"t": "TimeoutError", "message": str(cause)}, []
    return "failed", {"t": type(cause).__name__, "message": str(cause)}, []


_OPEN: weakref.WeakSet[TemporalEngine] = weakref.WeakSet()


def _close_all() -> None:
    """At interpreter exit, stop what still runs here (a script that never called close)."""
    for engine in list(_OPEN):
        engine.close()


# Before the thread pools the SDK's worker uses are shut down at exit (those are stopped by
# threading's exit hooks, which run before atexit's, newest first): otherwise the worker
# keeps retrying evictions on a dead pool and the process does not end cleanly.
_register = getattr(threading, "_register_atexit", atexit.register)


class TemporalEngine:
    """An app's runs on the Temporal cluster its ``temporal://`` URL names."""

    name = "Temporal"  # in messages: "not supported on Temporal"

    def __init__(self, app: Any) -> None:
        self.app = app
        self.config: TemporalConfig = parse_url(app.url)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._client: Client | None = None
        self._worker: Worker | None = None
        self._lock = threading.Lock()

    # -- the loop thread ------------------------------------------------------------------

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def main() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                self._thread = threading.Thread(target=main, name="surefoot-temporal", daemon=True)
                self._thread.start()
                ready.wait()
                self._loop = loop
                if not _OPEN:
                    _register(_close_all)
                _OPEN.add(self)
            loop = self._loop
        fut = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise

    async def client(self) -> Client:
        """The Temporal client (connected on first use)."""
        if self._client is None:
            self._client = await connect(self.config)
        return self._client

    def serve_here(self) -> None:
        """Run a worker for the app in this process (once), beside the client."""
        self._run(self._serve_here())

    async def _serve_here(self) -> None:
        if self._worker is None:
            worker = self._worker = make_worker(await self.client(), self.app, self.config)
            task = asyncio.get_running_loop().create_task(worker.run())
            task.add_done_callback(lambda t: self._worker_ended(worker, t))

    def _worker_ended(self, worker: Worker, task: asyncio.Task[None]) -> None:
        """An in-process worker that stopped by itself says so in one line (its exception
        is read here, so asyncio never reports "Task exception was never retrieved"); the
        next ``start`` here runs a new one."""
        if task.cancelled() or task.exception() is None:
            return
        exc = task.exception()
        log.error(
            "the Temporal worker in this process stopped: %s: %s; runs go on with other "
            "workers of task queue %r, and the next app.start here starts a new one",
            type(exc).__name__,
            exc,
            self.config.task_queue,
        )
        if self._worker is worker:
            self._worker = None
            unserve(self.app, self.config)

    def close(self) -> None:
        """Stop the in-process worker (runs go on elsewhere) and the loop thread."""
        loop, thread = self._loop, self._thread
        if loop is None:
            return
        try:
            self._run(self._shutdown(), timeout=30)
        except Exception:
            pass
        unserve(self.app, self.config)
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(timeout=5)
        if not loop.is_running():
            loop.close()
        self._loop = self._thread = None

    async def _shutdown(self) -> None:
        """Stop the worker, then let every task on this loop end before the loop stops.

        The SDK's Rust core answers on this loop from its own threads; a loop stopped with
        calls in flight gets answers during interpreter shutdown, which aborts the process
        (seen: ``PyGILState_Release`` at exit, 1 run in 3).
        """
        worker, self._worker = self._worker, None
        if worker is not None:
            await worker.shutdown()
        me = asyncio.current_task()
        rest = [t for t in asyncio.all_tasks() if t is not me]
        for t in rest:
            t.cancel()
        await asyncio.gather(*rest, return_exceptions=True)
        self._client = None
        await asyncio.sleep(0.05)

    # -- runs -----------------------------------------------------------------------------

    def start(
        self,
        workflow: Workflow,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        run_id: str | None,
        here: bool,
        timeout: float | None = None,
    ) -> TemporalHandle:
        """Start a run of ``workflow`` (``here``: serve the app in this process too;
        ``timeout``: its deadline in seconds from its start, else the workflow's own).

        Raises:
            ConfigError: a bad run id or timeout, or a sync workflow. EncodeError: an
                argument cannot be stored.
        """
        if not workflow.is_async:  # refused before a run id is used up on the cluster
            raise ConfigError(
                f"workflow {workflow.name!r} is a plain (sync) function; on Temporal a "
                "workflow is `async def` and awaits its steps (declare it `async def`; a "
                "blocking call goes in an async step, via `await asyncio.to_thread(...)`)"
            )
        text = codec.dumps(
            [list(args), kwargs], where=f"the arguments of workflow {workflow.name!r}"
        )
        rid = uuid.uuid4().hex if run_id is None else run_id
        if not isinstance(rid, str) or not rid:
            raise ConfigError(f"run_id must be a non-empty string, got {run_id!r}")
        t = self._timeout(workflow, timeout)
        if here:
            self.serve_here()
        self._run(self._start(workflow, text, rid, t))
        return TemporalHandle(self, rid)

    def _timeout(self, wf: Workflow, timeout: float | None) -> float | None:
        """The run's deadline, seconds from its start: given, or the workflow's own."""
        if timeout is None:
            got: float | None = self.app.registry.timeouts.get((wf.name, wf.version))
            return got
        t = seconds(timeout, "timeout")
        if t <= 0:
            raise ConfigError(f"timeout must be > 0 seconds, got {timeout!r}")
        return t

    async def _start(self, wf: Workflow, text: str, rid: str, timeout: float | None) -> None:
        client = await self.client()
        inp: dict[str, Any] = {
            "args": text,
            "version": wf.version,
            "structure_hash": wf.structure_hash,
        }
        if timeout is not None:
            inp["timeout"] = timeout
        wtype = type_name(wf.name, wf.version)
        try:
            await client.start_workflow(
                wtype,
                inp,
                id=rid,
                task_queue=self.config.task_queue,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            )
            return
        except WorkflowAlreadyStartedError:
            pass
        stored_type, stored = await self._input(client.get_workflow_handle(rid))
        name = parse_type(stored_type)[0] if "@" in stored_type else stored_type
        same = stored.get("args") == text or codec.loads(stored.get("args", "null")) == codec.loads(
            text
        )
        if name != wf.name or not same:
            raise RunConflictError(
                rid,
                f"run id {rid!r} already belongs to a run of workflow {name!r} with arguments "
                f"{stored.get('args')}; this call has {wf.name!r} with {text}. Use another run "
                "id for another run, or the same arguments to get the same run.",
            )

    async def _input(self, handle: WorkflowHandle[Any, Any]) -> tuple[str, dict[str, Any]]:
        conv = (await self.client()).data_converter.payload_converter
        async for event in handle.fetch_history_events():
            attrs = event.workflow_execution_started_event_attributes
            data = conv.from_payload(attrs.input.payloads[0], dict) if attrs.input.payloads else {}
            return attrs.workflow_type.name, data
        return "", {}

    async def _signal_ids(self, handle: WorkflowHandle[Any, Any]) -> set[str]:
        conv = (await self.client()).data_converter.payload_converter
        ids: set[str] = set()
        async for event in handle.fetch_history_events():
            if event.HasField("workflow_execution_signaled_event_attributes"):
                p = event.workflow_execution_signaled_event_attributes.input.payloads
                data = conv.from_payload(p[0], dict) if p else {}
                if isinstance(data, dict) and data.get("id") is not None:
                    ids.add(str(data["id"]))
        return ids

    def signal(self, run_id: str, name: str, payload: Any, signal_id: str | None) -> bool:
        """Deliver signal ``name``; False if ``signal_id`` was delivered to this run before.

        Raises:
            UnknownRunError: no such run. JournalError: the run has ended.
        """
        text = codec.dumps(payload, where=f"the payload of signal {name!r}")
        return self._run(self._signal(run_id, name, text, signal_id))

    async def _signal(self, run_id: str, name: str, text: str, sid: str | None) -> bool:
        handle = (await self.client()).get_workflow_handle(run_id)
        status = await self._status(run_id, handle)
        if sid is not None and sid in await self._signal_ids(handle):
            return False  # delivered before: the workflow would ignore it anyway
        if status != "running":
            raise JournalError(
                f"run {run_id!r} has ended ({status}); no wait_for({name!r}) will receive "
                "this signal, so nothing was sent"
            )
        sent = sid or uuid.uuid4().hex
        try:
            await handle.signal(name, {"id": sent, "v": text})
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                raise JournalError(
                    f"run {run_id!r} ended before signal {name!r} reached it; nothing was sent"
                ) from None
            raise
        # A signal that arrives while a workflow task is in flight is buffered outside the
        # history until the task completes; wait until it is recorded, so that a repeated
        # send of the same id (from this process or another) finds it and returns False.
        for _ in range(200):
            if sent in await self._signal_ids(handle):
                break
            await asyncio.sleep(0.01)
        return True

    def handle(self, run_id: str) -> TemporalHandle:
        """A handle on run ``run_id``.

        Raises:
            UnknownRunError: no such run.
        """
        handle = TemporalHandle(self, run_id)
        handle.status()
        return handle

    async def _status(self, run_id: str, handle: WorkflowHandle[Any, Any]) -> str:
        try:
            desc = await handle.describe()
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                raise self._unknown(run_id) from None
            raise
        status = _STATUS.get(desc.status.name if desc.status else "RUNNING", "running")
        if status == "failed":
            try:
                await handle.result()
            except WorkflowFailureError as err:
                status = _failure(err)[0]
        return status

    async def _result(self, run_id: str, timeout: float | None) -> Any:
        handle = (await self.client()).get_workflow_handle(run_id)
        try:
            text = await asyncio.wait_for(handle.result(), timeout)
        except TimeoutError:
            raise TimeoutError_(
                timeout or 0.0,
                f"run {run_id!r} did not finish within {timeout} s; it goes on. Wait again, or "
                "look at it in the Temporal UI (docs/engines.md)",
            ) from None
        except WorkflowFailureError as err:
            status, error, _ = _failure(err)
            hint = self.config.show_hint(run_id)
            raise RunFailedError(run_id, status, error, hint=hint) from None
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                raise self._unknown(run_id) from None
            raise
        return codec.loads(text)

    def _unknown(self, run_id: str) -> UnknownRunError:
        return UnknownRunError(run_id, self.config.url(), hint=self.config.list_hint())

    async def _audit(self, run_id: str) -> list[list[Any]]:
        """The saga's audit of an ended run; none for a running one (reading the outcome
        of a run still running would wait for it to end, forever if no worker serves it)."""
        handle = (await self.client()).get_workflow_handle(run_id)
        if await self._status(run_id, handle) == "running":
            return []
        try:
            await handle.result()
        except WorkflowFailureError as err:
            return _failure(err)[2]
        return []

    async def _info(self, run_id: str) -> RunInfo:
        handle = (await self.client()).get_workflow_handle(run_id)
        status = await self._status(run_id, handle)
        wtype, inp = await self._input(handle)
        name, version = parse_type(wtype)
        args, kwargs = codec.loads(inp.get("args", "[[], {}]"))
        result = error = None
        if status == "succeeded":
            result = codec.loads(await handle.result())
        elif status != "running":
            try:
                await handle.result()
            except WorkflowFailureError as err:
                error = _failure(err)[1]
        desc = await handle.describe()
        start = desc.start_time.timestamp() if desc.start_time else 0.0
        end = desc.close_time.timestamp() if desc.close_time else start
        return RunInfo(
            run_id=run_id,
            workflow=name,
            version=version,
            structure_hash=str(inp.get("structure_hash", "")),
            strategy="journal_keys",
            status=status,
            args=list(args),
            kwargs=dict(kwargs),
            result=result,
            error=error,
            owner=None,
            epoch=1,
            lease_until=None,
            wake_at=None,
            waiting_for=None,
            created_at=start,
            updated_at=end,
            forked_from=None,
        )


class TemporalHandle(RunHandle):
    """A run on Temporal, by id: the same ``result`` / ``status`` / ``info`` as a journal's."""

    def __init__(self, engine: TemporalEngine, run_id: str) -> None:
        super().__init__(engine.app, run_id, drive=False)
        self.engine = engine

    def result(self, timeout: float | None = None) -> Any:
        """Wait for the run to end and return its result (``RunFailedError`` if it failed)."""
        return self.engine._run(self.engine._result(self.run_id, timeout))

    async def aresult(self, timeout: float | None = None) -> Any:
        """``result()`` for async code."""
        return await asyncio.to_thread(self.result, timeout)

    def status(self) -> str:
        """running, succeeded, failed, needs_attention or cancelled."""
        eng = self.engine

        async def go() -> str:
            return await eng._status(
                self.run_id, (await eng.client()).get_workflow_handle(self.run_id)
            )

        return eng._run(go())

    def info(self) -> RunInfo:
        """The run's header, read from Temporal (its start event and its outcome)."""
        return self.engine._run(self.engine._info(self.run_id))

    def audit(self) -> list[tuple[str, Any]]:
        """The saga's audit of an ended run: ``(action, detail)`` as in ``runs show``."""
        return [(a, d) for a, d in self.engine._run(self.engine._audit(self.run_id))]

    def signals(self) -> list[str]:
        """The signal ids this run has taken in, in order (each once)."""
        eng = self.engine

        async def go() -> list[str]:
            h = (await eng.client()).get_workflow_handle(self.run_id)
            got: list[str] = await h.query(SIGNALS_QUERY)
            return got

        return eng._run(go())

    def __repr__(self) -> str:
        return f"TemporalHandle({self.run_id!r}, {self.engine.config.url()})"
