"""The one Temporal activity that runs any step or compensation of the served app.

Its activity type is the step's name (the Temporal UI lists steps by name). It finds the
step in the registry served on its task queue, rebuilds the arguments by the function's
annotations, adds the idempotency key the workflow computed (``f"{run_id}:{pos}"``, the
same on every attempt and replay), sets ``current_run()`` and calls the function: async
ones on the worker's loop, sync ones in a thread. While it runs it heartbeats every third
of the heartbeat timeout, so a dead worker's attempt is known lost within that timeout.
A step's exception fails the activity with surefoot's error data and the step's retry
decision, taken here on the real exception (never retried by Temporal: the workflow
sleeps the decided wait on a durable timer and schedules the next attempt).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import random
import time
from collections.abc import Sequence
from typing import Any

from temporalio import activity
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from ... import codec
from ...durable.engine import find_step, step_context
from ...errors import EncodeError
from ._wire import ENCODE_ERROR, SERVED, STEP_ERROR, UNKNOWN_STEP, decode_args

__all__ = ["run_step"]

log = logging.getLogger("surefoot.engines.temporal")


@activity.defn(dynamic=True)
async def run_step(args: Sequence[RawValue]) -> str:
    """Run one attempt of a step (or of a compensation, ``undo``); its result as codec text."""
    info = activity.info()
    call: dict[str, Any] = activity.payload_converter().from_payload(args[0].payload, dict)
    served = SERVED.get(info.task_queue)
    sd = None if served is None else find_step(served.registry, call["step"])
    if sd is None or (call["undo"] and sd.compensate is None):
        raise ApplicationError(
            f"this worker has no step {call['step']!r} (task queue {info.task_queue!r}); "
            "run workers with the same app as the workflow's",
            type=UNKNOWN_STEP,
            non_retryable=True,
        )
    if call["undo"]:
        comp = sd.compensate
        assert comp is not None
        fn, is_async, name, retry = comp.fn, comp.is_async, comp.name, comp.retry
    else:
        fn, is_async, name, retry = sd.fn, sd.is_async, sd.name, sd.retry
    a, kw = decode_args(fn, call["args"])
    if call.get("key") is not None:
        kw["key"] = call["key"]
    with step_context(call["run_id"], call["workflow"], name, call["pos"], call["attempt"]):
        if is_async:
            task: asyncio.Future[Any] = asyncio.ensure_future(fn(*a, **kw))
        else:
            ctx = contextvars.copy_context()
            loop = asyncio.get_running_loop()
            task = loop.run_in_executor(None, functools.partial(ctx.run, fn, *a, **kw))
    every = max(info.heartbeat_timeout.total_seconds() / 3, 0.05) if info.heartbeat_timeout else 1
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=every)
            if done:
                break
            activity.heartbeat()
        value = task.result()
    except asyncio.CancelledError:
        task.cancel()
        raise
    except Exception as exc:
        # The step's retry policy decides here, on the exception itself (its type, a
        # Retry-After it carries); the decision is recorded in the history with the failure,
        # so replay reads it back instead of deciding again.
        r = call["retry"]
        wait = retry.next_wait(
            r["attempt"],
            exc,
            max(time.time() - r["started"], 0.0),
            r["previous"],
            random.Random(r["seed"]),
        )
        then = "no attempts left" if wait is None else f"attempt {r['attempt'] + 1} in {wait:g} s"
        log.warning(
            "step %r (position %s) of run %r failed on attempt %s: %s: %s; %s",
            name,
            call["pos"],
            call["run_id"],
            r["attempt"],
            type(exc).__name__,
            exc,
            then,
        )
        # BENIGN: the SDK logs it at DEBUG instead of a 14-line traceback per attempt; the
        # line above says what happened, and the run's history holds the whole failure.
        raise ApplicationError(
            f"{type(exc).__name__}: {exc}",
            codec.error_to_data(exc),
            wait,
            type=STEP_ERROR,
            non_retryable=True,
            category=ApplicationErrorCategory.BENIGN,
        ) from None
    try:
        return codec.dumps(value, where=f"the result of step {call['pos']} {name!r}")
    except EncodeError as exc:
        raise ApplicationError(
            str(exc), codec.error_to_data(exc), type=ENCODE_ERROR, non_retryable=True
        ) from None
