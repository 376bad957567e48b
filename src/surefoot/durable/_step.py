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

from .. import codec
from ..errors import EncodeError, StepMismatchError
from ..storage.base import StepRow, StepWrite
from ._context import STEP_CODES, NeedsAttention, RunState, SagaEntry, current
from ._current import RunContext, in_step
from ._defs import StepDef

__all__ = ["make_step", "run_async", "run_sync"]


# -- decisions ---------------------------------------------------------------------------


def _recorded(run: RunState, pos: str, name: str) -> StepRow | None:
    """The journalled row at ``pos`` (after checking it is the same step), or None."""
    if run.lost:
        from ..errors import LeaseLostError

        raise LeaseLostError(run.run_id, run.epoch)
    row = run.recorded.get(pos)
    if row is not None and row.name != name:
        raise StepMismatchError(run.run_id, pos, row.name, name)
    return row


def _unknown_outcome(run: RunState, sd: StepDef, pos: str, row: StepRow) -> None:
    """An effect began and its outcome was never journalled: rerun only if that is safe."""
    if sd.idempotent or (sd.takes_key and run.strategy == "journal_keys"):
        return
    raise NeedsAttention(
        "outcome_unknown",
        {
            "pos": pos,
            "step": sd.name,
            "attempts": row.attempts,
            "why": (
                f"effect {sd.name!r} (step {pos}) was started and its outcome was never "
                "journalled; it takes no idempotency key, so rerunning it could do it twice. "
                "Check whether it happened, then `surefoot runs retry` to run it again."
            ),
        },
    )


def _kwargs(run: RunState, sd: StepDef, pos: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The step's keyword arguments, plus its idempotency key if it is an effect taking one."""
    if not sd.takes_key:  # only effects take keys (see App.step)
        return kwargs
    key = f"{run.run_id}:{pos}" if run.strategy == "journal_keys" else None
    return {**kwargs, "key": key}


def _encode(run: RunState, pos: str, name: str, value: Any) -> str:
    try:
        return codec.dumps(value)
    except EncodeError:  # again, to say where (only on the error path)
        return codec.dumps(value, where=f"the result of step {pos} {name!r} (run {run.run_id!r})")


def _error_text(exc: BaseException) -> str:
    return codec.dumps(codec.error_to_data(exc))


def _row(
    run: RunState,
    pos: str,
    sd: StepDef,
    status: str,
    attempts: int,
    started: float,
    result: str | None = None,
    error: str | None = None,
) -> StepWrite:
    done = None if status == "intent" else run.clock.now()
    return StepWrite(
        run.run_id, run.epoch, pos, sd.name, sd.kind, status, result, error, attempts, started, done
    )


def _replay(run: RunState, sd: StepDef, pos: str, row: StepRow, args: Any, kw: Any) -> Any:
    if row.status == "error":
        raise codec.loads(row.error or "null")
    value = codec.loads(row.result or "null")
    if sd.compensate is not None:
        run.saga.append(SagaEntry(pos, sd, args, kw, value))
    return value


# -- drivers -----------------------------------------------------------------------------


def run_sync(run: RunState, sd: StepDef, pos: str, args: Any, kwargs: Any) -> Any:
    """Run (or replay) a sync step in a sync context."""
    row = _recorded(run, pos, sd.name)
    prior = 0
    if row is not None:
        if row.status != "intent":
            return _replay(run, sd, pos, row, args, kwargs)
        _unknown_outcome(run, sd, pos, row)
        prior = row.attempts
    journalled = run.strategy != "restart"
    intent = sd.kind == "effect" and run.strategy == "journal_keys"
    crash = run.crash  # None outside crash tests: no check calls per step
    if crash is not None:
        crash.check("before_step", run.run_id, pos, sd.name)
    kw = _kwargs(run, sd, pos, kwargs)
    started = run.clock.now()
    attempt, wait = prior, None
    while True:
        attempt += 1
        if intent:
            run.write_sync(_row(run, pos, sd, "intent", attempt, started))
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
                        _row(run, pos, sd, "error", attempt, started, None, _error_text(exc))
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
    text = _encode(run, pos, sd.name, value)
    if journalled:
        run.write_sync(_row(run, pos, sd, "done", attempt, started, text))
    run.steps_run += 1
    if crash is not None:
        crash.check("after_journal", run.run_id, pos, sd.name)
    if sd.compensate is not None:
        run.saga.append(SagaEntry(pos, sd, args, kwargs, value))
    return value


async def run_async(run: RunState, sd: StepDef, pos: str, args: Any, kwargs: Any) -> Any:
    """Run (or replay) an async step; the same decisions as ``run_sync``."""
    row = _recorded(run, pos, sd.name)
    prior = 0
    if row is not None:
        if row.status != "intent":
            return _replay(run, sd, pos, row, args, kwargs)
        _unknown_outcome(run, sd, pos, row)
        prior = row.attempts
    journalled = run.strategy != "restart"
    intent = sd.kind == "effect" and run.strategy == "journal_keys"
    crash = run.crash  # None outside crash tests: no check calls per step
    if crash is not None:
        crash.check("before_step", run.run_id, pos, sd.name)
    kw = _kwargs(run, sd, pos, kwargs)
    started = run.clock.now()
    attempt, wait = prior, None
    while True:
        attempt += 1
        if intent:
            await run.write(_row(run, pos, sd, "intent", attempt, started))
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
                        _row(run, pos, sd, "error", attempt, started, None, _error_text(exc))
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
    text = _encode(run, pos, sd.name, value)
    if journalled:
        await run.write(_row(run, pos, sd, "done", attempt, started, text))
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
