"""Valid concurrent histories for the checkers' property tests, generated from a model.

Several clients run operations against a plain model one at a time, each at its
linearization point, while Hypothesis chooses which client moves next: a client invokes,
later its operation takes effect on the model (the point), later it completes. Some crash
before or after the point (recorded as ``info``, and the client continues under a fresh
process id). Every history made this way is linearizable by construction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from surefoot.testing.history import Op

# new_op(draw) -> (f, value invoked); apply(draw, f, value) -> (completion type, value)
NewOp = Callable[[st.DrawFn], tuple[str, Any]]
Apply = Callable[[st.DrawFn, str, Any], tuple[str, Any]]


def interleave(draw: st.DrawFn, new_op: NewOp, apply: Apply) -> list[Op]:
    """One history of 5–60 scheduling steps by 2–4 clients; one step in ten of an operation
    in flight is a crash (before or after it took effect)."""
    ops: list[Op] = []
    # process -> (phase, f, value invoked, result once applied)
    state: dict[int, tuple[str, str, Any, tuple[str, Any] | None]] = {}
    procs = list(range(draw(st.integers(2, 4))))
    next_proc = len(procs)
    for t in range(1, draw(st.integers(5, 60)) + 1):
        slot = draw(st.integers(0, len(procs) - 1))
        p = procs[slot]
        if p not in state:
            f, value = new_op(draw)
            ops.append(Op("invoke", p, f, value, t))
            state[p] = ("invoked", f, value, None)
            continue
        phase, f, value, result = state[p]
        if draw(st.integers(0, 9)) == 0:
            ops.append(Op("info", p, f, value, t))
            procs[slot], next_proc = next_proc, next_proc + 1
            del state[p]
        elif phase == "invoked":
            state[p] = ("applied", f, value, apply(draw, f, value))
        else:
            assert result is not None
            ops.append(Op(result[0], p, f, result[1], t))
            del state[p]
    return ops
