"""The pure decisions of a step: replay or run, its key, its rows, an unknown outcome.

No I/O: each reads the run's state and the journalled rows and returns (or raises) what
to do. The step driver and the saga both use them.
"""

from __future__ import annotations

from typing import Any

from .. import codec, telemetry
from ..codec import dumps_json_values
from ..errors import EncodeError, LeaseLostError, StepMismatchError
from ..storage.runs import StepRow, StepWrite
from ._context import NeedsAttention, RunState, SagaEntry
from ._current import in_step
from ._defs import StepDef
from ._values import check_same, read

__all__ = [
    "begin",
    "encode",
    "error_text",
    "recorded",
    "replay",
    "step_kwargs",
    "step_row",
    "undo_row",
    "unknown_outcome",
]


def recorded(run: RunState, pos: str, name: str) -> StepRow | None:
    """The journalled row at ``pos`` (after checking it is the same step), or None."""
    if run.lost:
        raise LeaseLostError(run.run_id, run.epoch)
    row = run.recorded.get(pos)
    if row is not None and row.name != name:
        raise StepMismatchError(run.run_id, pos, row.name, name)
    return row


def begin(run: RunState, sd: StepDef, pos: str, args: Any, kwargs: Any) -> tuple[bool, Any]:
    """Replay or run: ``(True, value)`` to replay the journalled value, ``(False, attempts)``
    to run the step, counting ``attempts`` already made (an effect of unknown outcome that
    may safely run again).

    Raises:
        LeaseLostError / StepMismatchError / NeedsAttention: see ``recorded`` and
            ``unknown_outcome``; a journalled error is raised again.
    """
    # ``recorded`` inlined: every step passes here, and the call cost a replayed step ~5 %
    # (driver alone, replayed sync step: 993-1,002 ns with the call, 943-976 ns without;
    # 934-964 ns before the step flow existed; medians of 7 x 20,000 steps, 2026-12-01).
    if run.lost:
        raise LeaseLostError(run.run_id, run.epoch)
    row = run.recorded.get(pos)
    if row is None:
        return False, 0
    if row.name != sd.name:
        raise StepMismatchError(run.run_id, pos, row.name, sd.name)
    if row.status != "intent":
        return True, replay(run, sd, pos, row, args, kwargs)
    unknown_outcome(run, sd, pos, row)
    return False, row.attempts


def unknown_outcome(run: RunState, sd: StepDef, pos: str, row: StepRow) -> None:
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


def step_kwargs(run: RunState, sd: StepDef, pos: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The step's keyword arguments, plus its idempotency key if it is an effect taking one."""
    if not sd.takes_key:  # only effects take keys (see App.step)
        return kwargs
    key = f"{run.run_id}:{pos}" if run.strategy == "journal_keys" else None
    return {**kwargs, "key": key}


def encode(run: RunState, pos: str, sd: StepDef, value: Any) -> tuple[str, Any]:
    """The journal text of a step's result and the value the run sees (what a replay
    will read back), refused if it would not read back the same.

    Raises:
        EncodeError: the value cannot be stored.
        UnsupportedTypeError: reading it back by the step's annotation gives another value.
    """
    if sd.json_values:  # JSON's own types: one C encode, one C decode and ==, no walk
        plain = dumps_json_values(value)
        if plain is not None:
            return plain, value
    try:
        text = codec.dumps(value)
    except EncodeError:  # again, to say where (only on the error path)
        where = f"the result of step {pos} {sd.name!r} (run {run.run_id!r})"
        return codec.dumps(value, where=where), value  # (dumps raises here)
    return text, check_same(value, text, sd.returns, f"the result of step {pos} {sd.name!r}")


def error_text(exc: BaseException) -> str:
    return codec.dumps(codec.error_to_data(exc))


def step_row(
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
    w = StepWrite(
        run.run_id, run.epoch, pos, sd.name, sd.kind, status, result, error, attempts, started, done
    )
    if run.attempt_notes and done is not None:
        notes = run.attempt_notes.pop(pos, None)
        if notes is not None and any(n != "ok" for n in notes):
            w.audit = (attempts_entry(run, pos, sd.name, notes),)
    return w


MAX_NOTES = 50
"""Provider attempt outcomes kept per step (the rest are counted, not listed)."""


def note_attempt(outcome: str) -> None:
    """``telemetry.ATTEMPT_NOTES``' sink: keep what a provider call's attempt came to on
    the step in flight in this context (nothing outside a step)."""
    got = in_step.get()
    if got is None:
        return
    run, _, pos, _ = got
    notes = run.attempt_notes.setdefault(pos, [])
    if len(notes) <= MAX_NOTES:
        notes.append(outcome)


def attempts_entry(run: RunState, pos: str, step: str, notes: list[str]) -> tuple[str, str, str]:
    """The ``attempts`` audit entry of a step whose provider calls had a failed attempt:
    ``(actor, action, detail)``, written with the step's row."""
    kept = notes[:MAX_NOTES]
    detail: dict[str, Any] = {"pos": pos, "step": step, "epoch": run.epoch, "outcomes": kept}
    if len(notes) > MAX_NOTES:
        detail["more"] = True
    return run.actor, "attempts", codec.dumps(detail)


telemetry.ATTEMPT_NOTES.sink = note_attempt


def undo_row(
    run: RunState,
    pos: str,
    name: str,
    status: str,
    attempts: int,
    started: float,
    error: str | None = None,
) -> StepWrite:
    """The journal row of compensation ``name`` at ``pos`` (``<effect pos>.undo``)."""
    result = "null" if status == "done" else None
    return StepWrite(
        run.run_id,
        run.epoch,
        pos,
        name,
        "compensate",
        status,
        result,
        error,
        attempts,
        started,
        run.clock.now(),
    )


def replay(run: RunState, sd: StepDef, pos: str, row: StepRow, args: Any, kw: Any) -> Any:
    if row.status == "error":
        raise codec.loads(row.error or "null")
    ann = sd.returns
    if ann is Any:
        value = codec.loads(row.result or "null")
    else:
        value = read(row.result, ann, f"the result of step {pos} {sd.name!r} (run {run.run_id!r})")
    if sd.compensate is not None:
        run.saga.append(SagaEntry(pos, sd, args, kw, value))
    return value
