"""Steps: the journal decides whether a step runs, replays or stops the run.

The decisions live in ``_recorded`` and ``_unknown_outcome`` (pure); the sync and async
drivers below them only do the I/O, side by side so they stay alike.

Per step: a pure step commits one row after it ran. An effect commits an *intent* row
before it runs and its result row after (strategy ``journal_keys``), so a crash in between
is seen on resume: the effect reruns with the same idempotency key if it takes one (or is
declared ``idempotent``), otherwise the run goes to ``needs_attention``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ._context import STEP_CODES, RunState, SagaEntry, current
from ._current import RunContext, in_step
from ._decide import encode, error_text, recorded, replay, step_kwargs, step_row, unknown_outcome
from ._defs import StepDef

__all__ = ["make_step", "run_async", "run_sync"]


# -- drivers -----------------------------------------------------------------------------


def run_sync(run: RunState, sd: StepDef, pos: str, args: Any, kwargs: Any) -> Any:
    """Run (or replay) a sync step in a sync context."""
    row = recorded(run, pos, sd.name)
    prior = 0
    if row is not None:
        if row.status != "intent":
            return replay(run, sd, pos, row, args, kwargs)
        unknown_outcome(run, sd, pos, row)
        prior = row.attempts
    journalled = run.strategy != "restart"
    intent = sd.kind == "effect" and run.strategy == "journal_keys"
    crash = run.crash  # None outside crash tests: no check calls per step
    if crash is not None:
        crash.check("before_step", run.run_id, pos, sd.name)
    kw = step_kwargs(run, sd, pos, kwargs)
    started = run.clock.now()
    attempt, wait = prior, None
    while True:
        attempt += 1
        if intent:
            run.write_sync(step_row(run, pos, sd, "intent", attempt, started))
        if crash is not None and sd.kind == "effect":
            crash.check("before_effect", run.run_id, pos, sd.name)
        token = current.set(None)  # code inside a step is not journalled
        here = in_step.set(RunContext(run.run_id, run.workflow, run.epoch, sd.name, pos, attempt))
        try:
            value = sd.fn(*args, **kw)
        except Exception as exc:
            wait = sd.retry.next_wait(
                attempt - prior, exc, run.clock.now() - started, wait, run.rng
            )
            if wait is None:
                if journalled:
                    run.write_sync(
                        step_row(run, pos, sd, "error", attempt, started, None, error_text(exc))
                    )
                raise
            run.clock.sleep(wait)
            continue
        finally:
            in_step.reset(here)
            current.reset(token)
        break
    if crash is not None and sd.kind == "effect":
        crash.check("after_effect", run.run_id, pos, sd.name)
    text = encode(run, pos, sd.name, value)
    if journalled:
        run.write_sync(step_row(run, pos, sd, "done", attempt, started, text))
    run.steps_run += 1
    if crash is not None:
        crash.check("after_journal", run.run_id, pos, sd.name)
    if sd.compensate is not None:
        run.saga.append(SagaEntry(pos, sd, args, kwargs, value))
    return value


async def run_async(run: RunState, sd: StepDef, pos: str, args: Any, kwargs: Any) -> Any:
    """Run (or replay) an async step; the same decisions as ``run_sync``."""
    row = recorded(run, pos, sd.name)
    prior = 0
    if row is not None:
        if row.status != "intent":
            return replay(run, sd, pos, row, args, kwargs)
        unknown_outcome(run, sd, pos, row)
        prior = row.attempts
    journalled = run.strategy != "restart"
    intent = sd.kind == "effect" and run.strategy == "journal_keys"
    crash = run.crash  # None outside crash tests: no check calls per step
    if crash is not None:
        crash.check("before_step", run.run_id, pos, sd.name)
    kw = step_kwargs(run, sd, pos, kwargs)
    started = run.clock.now()
    attempt, wait = prior, None
    while True:
        attempt += 1
        if intent:
            await run.write(step_row(run, pos, sd, "intent", attempt, started))
        if crash is not None and sd.kind == "effect":
            crash.check("before_effect", run.run_id, pos, sd.name)
        token = current.set(None)
        here = in_step.set(RunContext(run.run_id, run.workflow, run.epoch, sd.name, pos, attempt))
        try:
            value = await sd.fn(*args, **kw)
        except Exception as exc:
            wait = sd.retry.next_wait(
                attempt - prior, exc, run.clock.now() - started, wait, run.rng
            )
            if wait is None:
                if journalled:
                    await run.write(
                        step_row(run, pos, sd, "error", attempt, started, None, error_text(exc))
                    )
                raise
            await run.clock.asleep(wait)
            continue
        finally:
            in_step.reset(here)
            current.reset(token)
        break
    if crash is not None and sd.kind == "effect":
        crash.check("after_effect", run.run_id, pos, sd.name)
    text = encode(run, pos, sd.name, value)
    if journalled:
        await run.write(step_row(run, pos, sd, "done", attempt, started, text))
    run.steps_run += 1
    if crash is not None:
        crash.check("after_journal", run.run_id, pos, sd.name)
    if sd.compensate is not None:
        run.saga.append(SagaEntry(pos, sd, args, kwargs, value))
    return value


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
            return run_async(scope.run, sd, scope.next(), args, kwargs)

        astep.__surefoot_step__ = sd  # type: ignore[attr-defined]
        return astep

    @functools.wraps(fn)
    def step(*args: Any, **kwargs: Any) -> Any:
        scope = current.get()
        if scope is None:
            return fn(*args, **kwargs)
        return run_sync(scope.run, sd, scope.next(), args, kwargs)

    step.__surefoot_step__ = sd  # type: ignore[attr-defined]
    return step
