"""Sagas: when a run fails, undo its completed effects in reverse, journalled and retried.

Each compensation is a journalled step at position ``<effect pos>.undo`` with the key
``f"{run_id}:{pos}.undo"``, so a crash mid-rollback resumes where it stopped and never
undoes an effect twice once the undo was journalled. Compensations are expected to be
idempotent: one whose outcome was not journalled is run again. If one fails for good the
rollback stops and the run goes to ``needs_attention`` with an audit entry that lists what
was undone, what failed and what was not undone.
"""

from __future__ import annotations

import asyncio
from typing import Any

from .. import codec
from ._context import RunState, SagaEntry, current
from ._current import in_step
from ._decide import error_text, recorded, undo_row

__all__ = ["compensate"]


def _order(pos: str) -> tuple[int, ...]:
    return tuple(int(p) for p in pos.split(".") if p.isdigit())


def _entry(e: SagaEntry) -> dict[str, Any]:
    comp = e.step.compensate
    return {"pos": e.pos, "step": e.step.name, "compensation": comp.name if comp else None}


async def _undo(run: RunState, e: SagaEntry) -> bool:
    """Undo one effect; True if the compensation ran now, False if replayed as done."""
    comp = e.step.compensate
    assert comp is not None
    pos = f"{e.pos}.undo"
    row = recorded(run, pos, comp.name)
    if row is not None and row.status == "done":
        return False
    if row is not None and row.status == "error":
        raise codec.loads(row.error or "null")
    kw = dict(e.kwargs)
    if comp.takes_key:
        kw["key"] = f"{run.run_id}:{pos}"
    if comp.takes_result:
        kw["result"] = e.result
    started = run.clock.now()
    attempt, wait = 0, None
    while True:
        attempt += 1
        token = current.set(None)
        here = in_step.set((run, comp.name, pos, attempt))
        try:
            if comp.is_async:
                await comp.fn(*e.args, **kw)
            else:
                comp.fn(*e.args, **kw)
        except Exception as exc:
            wait = comp.retry.next_wait(attempt, exc, run.clock.now() - started, wait, run.rng)
            if wait is None:
                await run.write(
                    undo_row(run, pos, comp.name, "error", attempt, started, error_text(exc))
                )
                raise
            await run.clock.asleep(wait)
            continue
        finally:
            in_step.reset(here)
            current.reset(token)
        break
    await run.write(undo_row(run, pos, comp.name, "done", attempt, started))
    return True


async def compensate(run: RunState, error: BaseException) -> tuple[str, list[tuple[str, str]]]:
    """Undo ``run``'s completed effects, newest first.

    Returns:
        The final status (``failed`` when everything was undone, ``needs_attention`` when a
        compensation failed for good) and the audit entries to append.
    """
    entries = sorted(run.saga, key=lambda e: _order(e.pos), reverse=True)
    audit: list[tuple[str, str]] = []
    undone: list[dict[str, Any]] = []
    for i, e in enumerate(entries):
        try:
            ran = await _undo(run, e)
        except Exception as exc:
            failed = {**_entry(e), "error": f"{type(exc).__name__}: {exc}"}
            rest = [_entry(x) for x in entries[i + 1 :]]
            audit.append(("compensation_failed", codec.dumps(failed)))
            detail = {
                "error": f"{type(error).__name__}: {error}",
                "undone": undone,
                "failed": failed,
                "not_undone": [failed, *rest],
                "why": "a compensation failed for good; fix its cause, then "
                "`surefoot runs retry` resumes the rollback where it stopped",
            }
            audit.append(("needs_attention", codec.dumps(detail)))
            return "needs_attention", audit
        undone.append(_entry(e))
        if ran:  # a compensation replayed from the journal was audited when it ran
            audit.append(("compensated", codec.dumps(_entry(e))))
        await asyncio.sleep(0)
    detail = {"error": f"{type(error).__name__}: {error}", "undone": undone, "not_undone": []}
    audit.append(("failed", codec.dumps(detail)))
    return "failed", audit
