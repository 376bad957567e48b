"""The one Temporal workflow that runs any ``@app.workflow``: steps become activities.

A surefoot workflow ``name`` at ``version`` is the Temporal workflow type ``name@version``
(one type per version: a run begun on version 1 stays a ``@1`` run). This class is
registered as Temporal's *dynamic* workflow, so one worker serves every type its app
registered; a type whose version the worker lacks fails the run at once with
``needs_attention`` and surefoot's message, instead of a workflow task retried forever.

The workflow function runs unchanged under :func:`surefoot.durable.engine.enter`: each
step call is an activity (type = the step's name, id = its position), ``app.sleep`` a
durable timer, ``app.wait_for`` waits for a signal of that name whose id it has not seen.
Retries are surefoot's: every activity has Temporal's retries off; the step's own
``RetryPolicy`` decides in the failed activity, on the real exception (its type, a
``Retry-After``), with a seed drawn here from the workflow's random, and the decision comes
back with the failure (so it is in the history): the workflow sleeps that wait on a durable
timer and schedules the next attempt (activity id ``pos#attempt``), same key. An attempt
lost to a dead worker (heartbeat or start-to-close timeout) is run again like an embedded
resume, except an effect with no key that is not idempotent: its outcome is unknown, so
the run goes to ``needs_attention``.

Children and patches on Temporal: ``app.child`` is a Temporal child workflow (id
``<parent id>:<pos>`` unless given, same task queue; its result read by the child workflow's return
annotation, its failure raised as the child's error); ``app.patched`` is Temporal's
``workflow.patched`` (a run whose history lacks the marker takes the old branch, as a
journal whose position holds another step does); a run's ``timeout=`` is a deadline from
the workflow's start, checked at each step, timer and wait as embedded, so a run past it
fails with ``DeadlineExceededError`` after its compensations ran.

Runs without Temporal's sandbox: the user's module is not re-imported per run (a script's
own ``app.start`` would run again). :mod:`._guard` makes the clock, random and I/O raise
:class:`~surefoot.errors.NondeterminismError` in the workflow's code instead, and the
worker fails a workflow on any exception (``workflow_failure_exception_types``), so
nothing is retried forever.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue, RetryPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    ChildWorkflowError,
    TimeoutType,
    WorkflowAlreadyStartedError,
)
from temporalio.exceptions import TimeoutError as ActivityTimeoutError

from ... import codec
from ...durable.engine import StepDef, Workflow, enter, leave
from ...errors import (
    ConfigError,
    DeadlineExceededError,
    EncodeError,
    NondeterminismError,
    RunConflictError,
    RunFailedError,
)
from ._guard import guarded
from ._url import TemporalConfig
from ._wire import (
    ENCODE_ERROR,
    SERVED,
    STEP_ERROR,
    Served,
    decode_result,
    failure_type,
    parse_type,
    type_name,
)

__all__ = ["SIGNALS_QUERY", "SurefootWorkflow"]

SIGNALS_QUERY = "surefoot.signals"
"""The query naming the signal ids a run has taken in (each once)."""

_ONCE = RetryPolicy(maximum_attempts=1)  # surefoot decides every retry


class _Escalate(BaseException):
    """Stops the run for a person (``needs_attention``); not catchable by ``except Exception``."""

    def __init__(self, reason: str, detail: dict[str, Any]) -> None:
        super().__init__(reason)
        self.reason = reason
        self.detail = detail


def _order(pos: str) -> tuple[int, ...]:
    return tuple(int(p) for p in pos.split(".") if p.isdigit())


def _fail(status: str, message: str, error: Any, audit: list[list[Any]]) -> ApplicationError:
    data = {"status": status, "error": error, "audit": audit}
    return ApplicationError(message, data, type=failure_type(status), non_retryable=True)


class _Run:
    """One run's engine inside the workflow: what its steps, timers and waits do."""

    def __init__(self, wf: SurefootWorkflow, served: Served, run_id: str, name: str) -> None:
        self.wf = wf
        self.served = served
        self.run_id = run_id
        self.name = name
        self.saga: list[tuple[str, StepDef, list[Any], dict[str, Any], Any]] = []
        self.violation: NondeterminismError | None = None
        cfg = served.config
        self.stc = timedelta(seconds=cfg.step_timeout)
        self.hb = timedelta(seconds=cfg.heartbeat)
        self.deadline: float | None = None  # the run's deadline (workflow clock), if any

    # -- the run's deadline -----------------------------------------------------------------

    def check_deadline(self) -> None:
        """Raise ``DeadlineExceededError`` once the run passed its deadline (as embedded)."""
        if self.deadline is not None and workflow.now().timestamp() >= self.deadline:
            raise DeadlineExceededError(self.run_id, self.deadline)

    def _left(self, timeout: float | None) -> tuple[float | None, bool]:
        """(how long a wait of ``timeout`` may last, whether the deadline cut it short)."""
        if self.deadline is None:
            return timeout, False
        left = max(self.deadline - workflow.now().timestamp(), 0.0)
        if timeout is None or left < timeout:
            return left, True
        return timeout, False

    # -- what the guard reports ---------------------------------------------------------

    def report(self, call: str, hint: str) -> NondeterminismError:
        err = NondeterminismError(self.run_id, self.name, call, hint)
        if self.violation is None:
            self.violation = err  # kept even if the workflow's code catches the error
        return err

    # -- steps ----------------------------------------------------------------------------

    def step(self, sd: StepDef, pos: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if not sd.is_async:
            raise ConfigError(
                f"step {sd.name!r} is a plain (sync) function, called in workflow "
                f"{self.name!r} on Temporal, where every step is an activity the workflow "
                f"awaits: declare it `async def` (a sync body can run in "
                f"`await asyncio.to_thread(...)` inside it)"
            )
        return self._step(sd, pos, args, kwargs)

    async def _step(
        self, sd: StepDef, pos: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        self.check_deadline()
        text = codec.dumps([list(args), kwargs], where=f"the arguments of step {pos} {sd.name!r}")
        key = f"{self.run_id}:{pos}" if sd.takes_key else None
        call = {"step": sd.name, "undo": False, "pos": pos, "args": text, "key": key}
        out = await self._attempts(sd.name, pos, call, lost_ok=self._rerun_ok(sd))
        value = decode_result(sd, out)
        if sd.compensate is not None:
            self.saga.append((pos, sd, list(args), dict(kwargs), value))
        return value

    @staticmethod
    def _rerun_ok(sd: StepDef) -> bool:
        return sd.kind == "pure" or sd.idempotent or sd.takes_key

    async def _attempts(
        self, activity: str, pos: str, call: dict[str, Any], *, lost_ok: bool
    ) -> str:
        """Run one step (or compensation) as activities until it succeeds or gives up."""
        started = workflow.now().timestamp()
        attempt = lost = 0
        wait: float | None = None
        while True:
            attempt += 1
            payload = {
                **call,
                "run_id": self.run_id,
                "workflow": self.name,
                "attempt": attempt,
                "retry": {
                    "attempt": attempt - lost,
                    "started": started,
                    "previous": wait,
                    "seed": workflow.random().getrandbits(32),
                },
            }
            try:
                out: str = await workflow.execute_activity(
                    activity,
                    payload,
                    activity_id=pos if attempt == 1 else f"{pos}#{attempt}",
                    start_to_close_timeout=self.stc,
                    heartbeat_timeout=self.hb,
                    retry_policy=_ONCE,
                )
                return out
            except ActivityError as err:
                cause = err.cause
                if isinstance(cause, ActivityTimeoutError) and cause.type in (
                    TimeoutType.HEARTBEAT,
                    TimeoutType.START_TO_CLOSE,
                ):
                    lost += 1  # its worker died (or hung): like a resume, not a failure
                    if not lost_ok:
                        raise _Escalate("outcome_unknown", self._unknown(call, attempt)) from None
                    if lost > self.served.max_lost:
                        raise _Escalate("max_claims", self._too_lost(call, lost)) from None
                    continue
                if not (isinstance(cause, ApplicationError) and cause.type == STEP_ERROR):
                    if isinstance(cause, ApplicationError) and cause.type == ENCODE_ERROR:
                        raise codec.error_from_data(cause.details[0]) from None
                    raise
                exc = codec.error_from_data(cause.details[0])
                wait = cause.details[1] if len(cause.details) > 1 else None
                if wait is None:
                    raise exc from None
                if wait > 0:
                    await workflow.sleep(wait)

    def _unknown(self, call: dict[str, Any], attempt: int) -> dict[str, Any]:
        step, pos = call["step"], call["pos"]
        return {
            "pos": pos,
            "step": step,
            "attempts": attempt,
            "why": (
                f"effect {step!r} (step {pos}) was started and its worker was lost before "
                "it answered; it takes no idempotency key, so rerunning it could do it "
                "twice. Check whether it happened, then start a new run."
            ),
        }

    def _too_lost(self, call: dict[str, Any], lost: int) -> dict[str, Any]:
        return {
            "pos": call["pos"],
            "step": call["step"],
            "claims": lost,
            "max_claims": self.served.max_lost,
            "why": f"step {call['step']!r} lost its worker {lost} times; it is not run again",
        }

    # -- timers and signals ---------------------------------------------------------------

    def sleep(self, pos: str, wake_at: float) -> Any:
        return self._sleep(wake_at)

    async def _sleep(self, wake_at: float) -> None:
        self.check_deadline()
        delay, cut = self._left(wake_at - workflow.now().timestamp())
        if delay is not None and delay > 0:
            await workflow.sleep(delay)
        if cut:
            self.check_deadline()

    def wait(self, pos: str, name: str, timeout: float | None, default: Any, ann: Any) -> Any:
        return self._wait(name, timeout, default, ann)

    async def _wait(self, name: str, timeout: float | None, default: Any, ann: Any) -> Any:
        queue = self.wf.queue(name)
        self.check_deadline()
        limit, cut = self._left(timeout)
        try:
            await workflow.wait_condition(lambda: bool(queue), timeout=limit)
        except TimeoutError:
            if cut:
                self.check_deadline()
            return default
        text = queue.popleft()
        if ann is Any:
            return codec.loads(text)
        return codec.loads_as(text, ann, where=f"the payload of signal {name!r}")

    # -- patches and children ---------------------------------------------------------------

    def patched(self, patch_id: str) -> bool:
        """Temporal's own patch marker: False replaying a history begun before the patch."""
        return workflow.patched(patch_id)

    def child(
        self,
        wf: Workflow,
        pos: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        run_id: str | None,
        timeout: float | None,
    ) -> Any:
        return self._child(wf, pos, args, kwargs, run_id, timeout)

    async def _child(
        self,
        wf: Workflow,
        pos: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        run_id: str | None,
        timeout: float | None,
    ) -> Any:
        if not wf.is_async:
            raise ConfigError(
                f"child workflow {wf.name!r} is a plain (sync) function; on Temporal a "
                "workflow is `async def`"
            )
        self.check_deadline()
        text = codec.dumps([list(args), kwargs], where=f"the arguments of workflow {wf.name!r}")
        cid = run_id if run_id is not None else f"{self.run_id}:{pos}"
        inp: dict[str, Any] = {
            "args": text,
            "version": wf.version,
            "structure_hash": wf.structure_hash,
        }
        own = (self.served.timeouts or {}).get((wf.name, wf.version))
        if own is not None:  # the child workflow's own timeout=, as embedded
            inp["timeout"] = own
        limit, cut = self._left(timeout)
        started = workflow.now().timestamp()
        try:
            handle = await workflow.start_child_workflow(
                type_name(wf.name, wf.version),
                inp,
                id=cid,
                task_queue=workflow.info().task_queue,
                retry_policy=_ONCE,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            )
        except WorkflowAlreadyStartedError:
            raise RunConflictError(
                cid,
                f"run id {cid!r} exists and is not a child of run {self.run_id!r}; give the "
                "child another run_id (or none: it is derived from the parent's position)",
            ) from None
        try:
            await workflow.wait_condition(handle.done, timeout=limit)
        except TimeoutError:
            handle.cancel()  # the child (and, by Temporal's parent-close policy, its own)
            if cut:
                self.check_deadline()
            assert timeout is not None
            raise DeadlineExceededError(
                self.run_id, started + timeout, f"child run {cid!r}"
            ) from None
        try:
            out: str = await handle
        except ChildWorkflowError as err:
            raise _child_error(cid, err, self.served.config) from None
        if wf.returns is Any:
            return codec.loads(out)
        where = f"the result of child run {pos} {wf.name!r} (run {self.run_id!r})"
        return codec.loads_as(out, wf.returns, where=where)

    # -- sagas ----------------------------------------------------------------------------

    async def compensate(self, error: BaseException) -> tuple[str, list[list[Any]]]:
        """Undo the completed effects newest first; (final status, audit), as embedded."""
        entries = sorted(self.saga, key=lambda e: _order(e[0]), reverse=True)
        audit: list[list[Any]] = []
        undone: list[dict[str, Any]] = []

        def entry(e: tuple[str, StepDef, Any, Any, Any]) -> dict[str, Any]:
            comp = e[1].compensate
            return {"pos": e[0], "step": e[1].name, "compensation": comp.name if comp else None}

        for i, e in enumerate(entries):
            pos, sd, args, kwargs, result = e
            comp = sd.compensate
            assert comp is not None
            upos = f"{pos}.undo"
            kw = dict(kwargs)
            if comp.takes_key:
                kw["key"] = f"{self.run_id}:{upos}"
            if comp.takes_result:
                kw["result"] = result
            text = codec.dumps([args, kw], where=f"the arguments of compensation {comp.name!r}")
            call = {"step": sd.name, "undo": True, "pos": upos, "args": text, "key": None}
            try:
                await self._attempts(comp.name, upos, call, lost_ok=True)
            except Exception as exc:
                failed = {**entry(e), "error": f"{type(exc).__name__}: {exc}"}
                rest = [entry(x) for x in entries[i + 1 :]]
                audit.append(["compensation_failed", failed])
                detail = {
                    "error": f"{type(error).__name__}: {error}",
                    "undone": undone,
                    "failed": failed,
                    "not_undone": [failed, *rest],
                    "why": "a compensation failed for good; fix its cause, then start a new "
                    "run (a Temporal run that ended cannot be resumed)",
                }
                audit.append(["needs_attention", detail])
                return "needs_attention", audit
            undone.append(entry(e))
            audit.append(["compensated", entry(e)])
        detail = {"error": f"{type(error).__name__}: {error}", "undone": undone, "not_undone": []}
        audit.append(["failed", detail])
        return "failed", audit


def _child_error(cid: str, err: ChildWorkflowError, config: TemporalConfig) -> BaseException:
    """The parent's exception for child ``cid`` that ended unsuccessfully (as embedded)."""
    cause = err.cause
    if isinstance(cause, ApplicationError) and (cause.type or "").startswith("surefoot."):
        data = cause.details[0] if cause.details else {}
        status = str(data.get("status", "failed"))
        error = data.get("error")
        if status == "failed" and isinstance(error, dict) and "t" in error:
            return codec.error_from_data(error)
        return RunFailedError(cid, status, error, hint=config.show_hint(cid))
    data = {"t": type(cause).__name__, "message": str(cause)}
    return RunFailedError(cid, "cancelled", data, hint=config.show_hint(cid))


@workflow.defn(dynamic=True)
class SurefootWorkflow:
    """Any surefoot workflow; its type name says which (``name@version``)."""

    def __init__(self) -> None:
        self._queues: dict[str, deque[str]] = {}
        self._seen: list[str] = []
        self._seen_set: set[str] = set()

    def queue(self, name: str) -> deque[str]:
        return self._queues.setdefault(name, deque())

    @workflow.signal(dynamic=True)
    def on_signal(self, name: str, args: Sequence[RawValue]) -> None:
        """Queue a signal for ``wait_for(name)``, once per signal id."""
        data: Any = {}
        if args:
            data = workflow.payload_converter().from_payload(args[0].payload, dict)
        sid = data.get("id") if isinstance(data, dict) else None
        if sid is not None:
            if sid in self._seen_set:
                return
            self._seen_set.add(sid)
            self._seen.append(sid)
        value = data.get("v", "null") if isinstance(data, dict) else "null"
        self.queue(name).append(value)

    @workflow.query(name=SIGNALS_QUERY)
    def signals(self) -> list[str]:
        """The signal ids taken in, in order (a repeated id is not among them twice)."""
        return list(self._seen)

    @workflow.run
    async def run(self, args: Sequence[RawValue]) -> str:
        info = workflow.info()
        name, version = parse_type(info.workflow_type)
        inp = workflow.payload_converter().from_payload(args[0].payload, dict)
        served = SERVED.get(info.task_queue)
        if served is None:
            raise _fail(
                "needs_attention",
                f"no surefoot app is served on task queue {info.task_queue!r} in this worker",
                None,
                [],
            )
        wf = served.registry.get(name, version)
        if wf is None:
            have = [v for (n, v) in served.registry.registered() if n == name]
            msg = (
                f"run {info.workflow_id!r} is workflow {name!r} version {version!r}, which this "
                f"worker does not have (versions here: {', '.join(have) or 'none'}); keep the "
                "old version registered until its runs finish"
            )
            raise _fail(
                "needs_attention",
                msg,
                {"t": "WorkflowNotFoundError", "message": msg},
                [["needs_attention", {"reason": "version_missing", "why": msg}]],
            )
        run = _Run(self, served, info.workflow_id, name)
        if not wf.is_async:
            msg = (
                f"workflow {name!r} is a plain (sync) function; on Temporal a workflow is "
                "`async def` (its steps are awaited activities)"
            )
            raise _fail("failed", msg, {"t": "ConfigError", "message": msg}, [])
        a, kw = codec.loads(inp["args"])
        if inp.get("timeout") is not None:
            run.deadline = info.start_time.timestamp() + float(inp["timeout"])
        fn = guarded(wf.fn, run.report)
        token = enter(run, info.workflow_id, name)
        try:
            value = await fn(*a, **kw)
        except _Escalate as esc:
            detail = {"reason": esc.reason, **esc.detail}
            why = str(esc.detail.get("why", esc.reason))
            raise _fail(
                "needs_attention",
                why,
                {"t": esc.reason, "message": why},
                [["needs_attention", detail]],
            ) from None
        except Exception as exc:
            raise await self._failed(run, run.violation or exc) from None
        finally:
            leave(token)
        if run.violation is not None:  # caught by the workflow's own code: fail all the same
            raise await self._failed(run, run.violation)
        try:
            return codec.dumps(value, where=f"the result of workflow {name!r}")
        except EncodeError as exc:
            raise await self._failed(run, exc) from None

    @staticmethod
    async def _failed(run: _Run, err: BaseException) -> ApplicationError:
        """The run failed with ``err``: undo its effects (as embedded), then fail the run."""
        status, audit = await run.compensate(err)
        message = (
            str(err) if isinstance(err, NondeterminismError) else f"{type(err).__name__}: {err}"
        )
        return _fail(status, message, codec.error_to_data(err), audit)
