"""Wait steps: durable timers and signals. A wait that is not satisfied suspends the run.

Suspending commits the wait's row and the run's ``sleeping`` status in one transaction and
ends the run's execution: no worker slot, thread or coroutine stays behind. A worker (or
``handle.result()`` for a run started here) claims the run again when its ``wake_at`` has
passed or a signal arrived, and replays it to the wait, which then returns.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Generator
from typing import Any

from .. import codec
from ..errors import ConfigError
from ..storage.runs import StepWrite
from ._context import DOWN, STEP_CODES, JournalDown, RunState, Scope, Suspend, current
from ._deadlines import check_deadline
from ._decide import recorded
from ._values import read

__all__ = ["Done", "sleep_step", "wait_step"]


class Done:
    """What a wait returns in a sync workflow: already done, and awaitable for symmetry."""

    __slots__ = ("value",)

    def __init__(self, value: Any = None) -> None:
        self.value = value

    def __await__(self) -> Generator[Any, None, Any]:
        return self.value
        yield  # pragma: no cover - makes this a generator


def _scope(what: str) -> Scope:
    scope = current.get()
    if scope is None:
        raise ConfigError(
            f"app.{what}() works only inside a workflow run (it journals the wait); outside "
            "one, use clock.sleep() or asyncio.sleep()"
        )
    return scope


def _in_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _suspend(run: RunState, s: Suspend) -> Suspend:
    """Note ``s`` on the run: waits under one ``gather`` each journal their own deadline."""
    run.suspends.append(s)
    return s


def _sleep(run: RunState, pos: str, wake_at: float) -> None:
    row = recorded(run, pos, "sleep")
    now = run.clock.now()
    if row is not None:
        wake = float(codec.loads(row.result or "0"))
        if now >= wake:
            return
        check_deadline(run)
        raise _suspend(run, Suspend(wake, None, None))
    rec = StepWrite(
        run.run_id,
        run.epoch,
        pos,
        "sleep",
        "sleep",
        "done",
        codec.dumps(wake_at),
        None,
        1,
        now,
        wake_at,
    )
    if wake_at <= now:
        run.write_sync(rec)
        return
    check_deadline(run)
    raise _suspend(run, Suspend(wake_at, None, rec))


async def _asleep(run: RunState, pos: str, wake_at: float) -> None:
    _sleep(run, pos, wake_at)  # only a due timer writes, and a direct write is fine there


STEP_CODES.add(_asleep.__code__)


def sleep_step(wake_at: float) -> Any:
    """Journal a timer due at ``wake_at`` (clock seconds) and suspend until then."""
    scope = _scope("sleep")
    pos = scope.next()
    if scope.engine is not None:  # a run on another engine: its own durable timer
        return scope.engine.sleep(pos, wake_at)
    if _in_loop():
        return _asleep(scope.run, pos, wake_at)
    _sleep(scope.run, pos, wake_at)
    return Done()


def _payload(text: str, ann: Any, name: str) -> Any:
    return read(text, ann, f"the payload of signal {name!r}")


def _wait(run: RunState, pos: str, name: str, timeout: float | None, default: Any, ann: Any) -> Any:
    step = f"signal:{name}"
    row = recorded(run, pos, step)
    now = run.clock.now()
    if row is not None and row.status == "done":
        if ann is Any:
            got = codec.loads(row.result or "null")
            return got.get("v", default)
        raw = json.loads(row.result or "null")
        if "v" not in raw:
            return default
        return codec.decode_as(raw["v"], ann, where=f"the payload of signal {name!r}")
    if row is None:
        deadline = None if timeout is None else now + timeout
    else:
        deadline = codec.loads(row.result or "null")["deadline"]
    started = now if row is None else row.started_at
    try:
        sig = run.journal.pending_signal(run.run_id, name)
    except DOWN as exc:
        raise JournalDown(exc) from exc
    if sig is not None:
        sig_id, payload = sig
        text = codec.dumps({"v": codec.loads(payload)})
        run.write_sync(
            StepWrite(
                run.run_id,
                run.epoch,
                pos,
                step,
                "signal",
                "done",
                text,
                None,
                1,
                started,
                now,
                consume_signal=sig_id,
            )
        )
        return _payload(payload, ann, name)
    if deadline is not None and now >= deadline:
        text = codec.dumps({"timeout": deadline})
        run.write_sync(
            StepWrite(
                run.run_id, run.epoch, pos, step, "signal", "done", text, None, 1, started, now
            )
        )
        return default
    check_deadline(run)
    rec = None
    if row is None:
        rec = StepWrite(
            run.run_id,
            run.epoch,
            pos,
            step,
            "signal",
            "waiting",
            codec.dumps({"deadline": deadline}),
            None,
            1,
            now,
            None,
        )
    raise _suspend(run, Suspend(deadline, name, rec))


async def _await(
    run: RunState, pos: str, name: str, timeout: float | None, default: Any, ann: Any
) -> Any:
    return _wait(run, pos, name, timeout, default, ann)


STEP_CODES.add(_await.__code__)


def wait_step(name: str, timeout: float | None, default: Any, ann: Any = Any) -> Any:
    """Wait for signal ``name`` (journalled; delivered exactly once) or the timeout; the
    payload is read as ``ann``."""
    scope = _scope("wait_for")
    pos = scope.next()
    if scope.engine is not None:
        return scope.engine.wait(pos, name, timeout, default, ann)
    if _in_loop():
        return _await(scope.run, pos, name, timeout, default, ann)
    # A sync workflow gets the payload itself (``approval = app.wait_for("approve")``).
    return _wait(scope.run, pos, name, timeout, default, ann)
