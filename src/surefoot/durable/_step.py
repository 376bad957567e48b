"""Steps: the journal decides whether a step runs, replays or stops the run.

``_decide.begin`` says whether a step replays or runs; ``step_flow`` is the whole of a
run, with no I/O: it decides (with ``_decide``) and yields what to do, one request at a
time; ``run_sync`` and ``run_async`` below it do what it asks, the same lines with and
without ``await``. A request is a tuple ``(op, a, b)``:

``(WRITE, record, None)``  commit ``record`` (the answer is None; a refusal raises)
``(CALL, args, kwargs)``   call the step's function; the answer is its value
``(SLEEP, seconds, None)`` wait before the next attempt

An error while doing a request is thrown into the flow at that request, so the flow's own
``except``/``finally`` see it as if the I/O were inline (a failed call is retried there).

Per step: a pure step commits one row after it ran. An effect commits an *intent* row
before it runs and its result row after (strategy ``journal_keys``), so a crash in between
is seen on resume: the effect reruns with the same idempotency key if it takes one (or is
declared ``idempotent``), otherwise the run goes to ``needs_attention``.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Generator
from typing import Any

from .. import telemetry
from ._context import STEP_CODES, RunState, SagaEntry, Suspend, current
from ._current import in_step
from ._deadlines import check_deadline
from ._decide import begin, encode, error_text, step_kwargs, step_row
from ._defs import StepDef
from ._observe import attempt_span, decision_reason, step_span

__all__ = ["CALL", "SLEEP", "WRITE", "make_step", "run_async", "run_sync", "step_flow"]

WRITE, CALL, SLEEP = "write", "call", "sleep"
Request = tuple[str, Any, Any]
_TRACING = telemetry.TRACING  # .tracer is None unless telemetry.instrument(): one read a step


def step_flow(
    run: RunState,
    sd: StepDef,
    pos: str,
    args: Any,
    kwargs: Any,
    prior: int,
    started: float | None = None,
) -> Generator[Request, Any, Any]:
    """Run one step that ``begin`` decided to run (``prior`` attempts made before): yields
    requests, returns the step's value. ``started``: when its first attempt began, if
    before this flow (``run_async``'s direct path hands a failed first attempt over)."""
    journalled = run.strategy != "restart"
    intent = sd.kind == "effect" and run.strategy == "journal_keys"
    crash = run.crash  # None outside crash tests: no check calls per step
    if crash is not None:
        crash.check("before_step", run.run_id, pos, sd.name)
    if run.deadline_at is not None:
        check_deadline(run)
    kw = step_kwargs(run, sd, pos, kwargs) if sd.takes_key else kwargs
    if started is None:
        started = run.clock.now()
    attempt, wait = prior, None
    while True:
        attempt += 1
        if intent:
            yield WRITE, step_row(run, pos, sd, "intent", attempt, started), None
        if crash is not None and sd.kind == "effect":
            crash.check("before_effect", run.run_id, pos, sd.name)
        token = current.set(None)  # code inside a step is not journalled
        here = in_step.set((run, sd.name, pos, attempt))
        span = None if _TRACING.tracer is None else attempt_span(run, sd.name, pos, attempt)
        try:
            value = yield CALL, args, kw
        except Exception as exc:
            if run.streaming:  # what the attempt streamed is written, with its end
                run.tokens.end(run, sd.name, pos, attempt, False)
            wait = sd.retry.next_wait(
                attempt - prior, exc, run.clock.now() - started, wait, run.rng
            )
            if span is not None:  # closed before the back-off sleep: not part of the attempt
                n, most = attempt - prior, sd.retry.max_attempts
                span.decided(
                    exc, wait is not None, wait, decision_reason(wait is not None, n, most)
                )
                span.close()
                span = None
            if wait is None:
                if journalled:
                    err = step_row(run, pos, sd, "error", attempt, started, None, error_text(exc))
                    yield WRITE, err, None
                if run.observer is not None:
                    run.observer.step_failed(sd.name, sd.kind, pos, attempt, exc)
                raise
            yield SLEEP, wait, None
            continue
        finally:
            in_step.reset(here)
            current.reset(token)
            if span is not None:
                span.close()
        break
    if run.streaming:  # the attempt's streamed events are written before its result
        run.tokens.end(run, sd.name, pos, attempt, True)
    if crash is not None and sd.kind == "effect":
        crash.check("after_effect", run.run_id, pos, sd.name)
    text, value = encode(run, pos, sd, value)
    if journalled:
        yield WRITE, step_row(run, pos, sd, "done", attempt, started, text), None
    run.steps_run += 1
    if run.observer is not None:
        run.observer.step_done(sd.name, sd.kind, pos, attempt)
    if crash is not None:
        crash.check("after_journal", run.run_id, pos, sd.name)
    if sd.compensate is not None:
        run.saga.append(SagaEntry(pos, sd, args, kwargs, value))
    return value


# -- drivers: the same lines, with and without await -------------------------------------


def run_sync(run: RunState, sd: StepDef, pos: str, args: Any, kwargs: Any) -> Any:
    """Run (or replay) a sync step in a sync context."""
    # Replay needs no flow: deciding first spares a replayed step the generator (driver
    # alone, replayed sync step: 1,239-1,267 ns inside the flow, 943-976 ns like this;
    # 934-964 ns before the flow existed; medians of 7 x 20,000 steps, 2026-12-01).
    replayed, got = begin(run, sd, pos, args, kwargs)
    if replayed:
        return got
    flow = step_flow(run, sd, pos, args, kwargs, got)
    fn = sd.fn
    stopped: StopIteration | None = None
    span = None if _TRACING.tracer is None else step_span(run, sd.name, sd.kind, pos)
    try:
        op, a, b = next(flow)
        while True:
            try:
                if op is CALL:
                    got = fn(*a, **b)
                elif op is WRITE:
                    run.write_sync(a)
                    got = None
                else:
                    run.clock.sleep(a)
                    got = None
            except BaseException as exc:
                if isinstance(exc, StopIteration):
                    stopped = exc
                op, a, b = flow.throw(exc)
                continue
            op, a, b = flow.send(got)
    except StopIteration as done:
        return done.value
    except RuntimeError as err:
        if stopped is None or err.__cause__ is not stopped:
            raise
        # The step's own StopIteration, which the flow (a generator) cannot raise: raise
        # it as a plain call would (an async step's is a RuntimeError already).
        raise stopped from None
    finally:
        if span is not None:
            _end_step(span, sys.exc_info()[1])


async def run_async(run: RunState, sd: StepDef, pos: str, args: Any, kwargs: Any) -> Any:
    """Run (or replay) an async step; the same flow as ``run_sync``.

    A plain step (no intent row, no key argument, journalled, no deadline, crash points
    or tracing) whose first attempt succeeds takes a direct path: the lines ``step_flow``
    runs for it, in order, without the generator. A failed first attempt is handed to
    ``step_flow`` (entered at that attempt's call and thrown its exception), which owns
    the retries, so a retried step takes the same path as before.
    """
    # Replay needs no flow: deciding first spares a replayed step the generator (driver
    # alone, replayed sync step: 1,239-1,267 ns inside the flow, 943-976 ns like this;
    # 934-964 ns before the flow existed; medians of 7 x 20,000 steps, 2026-12-01).
    replayed, got = begin(run, sd, pos, args, kwargs)
    if replayed:
        return got
    fn = sd.fn
    failed: Exception | None = None
    if (  # journalled, no intent row (step_flow's flags), nothing else to do per step
        run.crash is None
        and run.deadline_at is None
        and _TRACING.tracer is None
        and not sd.takes_key
        and run.strategy != "restart"
        and not (sd.kind == "effect" and run.strategy == "journal_keys")
    ):
        attempt = got + 1
        started = run.clock.now()
        token = current.set(None)  # code inside a step is not journalled
        here = in_step.set((run, sd.name, pos, attempt))
        try:
            value = await fn(*args, **kwargs)
        except Exception as exc:
            failed = exc
        finally:
            in_step.reset(here)
            current.reset(token)
        if failed is None:
            if run.streaming:
                run.tokens.end(run, sd.name, pos, attempt, True)
            text, value = encode(run, pos, sd, value)
            await run.write(step_row(run, pos, sd, "done", attempt, started, text))
            run.steps_run += 1
            if run.observer is not None:
                run.observer.step_done(sd.name, sd.kind, pos, attempt)
            if sd.compensate is not None:
                run.saga.append(SagaEntry(pos, sd, args, kwargs, value))
            return value
        flow = step_flow(run, sd, pos, args, kwargs, got, started)
    else:
        flow = step_flow(run, sd, pos, args, kwargs, got)
    span = None if _TRACING.tracer is None else step_span(run, sd.name, sd.kind, pos)
    try:
        op, a, b = next(flow)
        if failed is not None:  # the direct path's first attempt: op is its CALL
            try:
                op, a, b = flow.throw(failed)
            finally:
                failed = None  # no cycle through this frame's locals and the traceback
        while True:
            try:
                if op is CALL:
                    got = await fn(*a, **b)
                elif op is WRITE:
                    await run.write(a)
                    got = None
                else:
                    await run.clock.asleep(a)
                    got = None
            except BaseException as exc:
                op, a, b = flow.throw(exc)
                continue
            op, a, b = flow.send(got)
    except StopIteration as done:
        return done.value
    finally:
        if span is not None:
            _end_step(span, sys.exc_info()[1])


def _end_step(span: telemetry.Span, error: BaseException | None) -> None:
    """Close a step's span, failed by ``error`` unless the step only suspended the run."""
    if error is not None and not isinstance(error, Suspend | StopIteration):
        span.error(error)
    span.close()


STEP_CODES.add(run_async.__code__)


def make_step(sd: StepDef) -> Callable[..., Any]:
    """The callable that replaces a step function: journalled inside a run, plain outside."""
    fn = sd.fn
    if sd.is_async:

        @functools.wraps(fn)
        def astep(*args: Any, **kwargs: Any) -> Any:
            scope = current.get()
            if scope is None:
                return fn(*args, **kwargs)
            if scope.engine is not None:  # a run on another engine: it runs the step
                return scope.engine.step(sd, scope.next(), args, kwargs)
            return run_async(scope.run, sd, scope.next(), args, kwargs)

        astep.__surefoot_step__ = sd  # type: ignore[attr-defined]
        return astep

    @functools.wraps(fn)
    def step(*args: Any, **kwargs: Any) -> Any:
        scope = current.get()
        if scope is None:
            return fn(*args, **kwargs)
        if scope.engine is not None:
            return scope.engine.step(sd, scope.next(), args, kwargs)
        return run_sync(scope.run, sd, scope.next(), args, kwargs)

    step.__surefoot_step__ = sd  # type: ignore[attr-defined]
    return step
