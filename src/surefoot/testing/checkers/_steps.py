"""A checker for durable step executions: nothing journalled runs again, effects land once.

Read from the history alone:

- ``exec`` operations are executions of a step body (``{"run", "pos", "key"}``), recorded
  inside the body; ``journal`` operations are reads of a run's journal (``{"run", "steps":
  {pos: {"status", "digest"}}}``). Once a read has seen a step ``done``, its result was
  journalled before that read completed, so an execution of that step invoked after that is
  a step run again after its result was journalled (``executed-after-journal``). Executions
  before it (a crash between the effect and its journal row) are allowed and counted.
- A journalled result never changes nor disappears in later reads (``journal-changed``).
- Every execution of one step carries one idempotency key (``key-changed``): a recipient
  that deduplicates on keys can only apply an effect once if its retries reuse the key.
- ``apply`` operations are the recipient's (``{"key", "applied"}``; ``applied`` False for a
  duplicate it recognised): each key is applied at most once (``applied-twice``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from ...errors import ConfigError
from ..history import History, Op, Pair
from ._result import Anomaly, CheckResult, as_pairs, ref

__all__ = ["check_steps"]


def _step_of(p: Pair) -> tuple[Any, Any]:
    v = p.invoke.value
    if not isinstance(v, dict) or "run" not in v:
        raise ConfigError(f"{p.describe()}: an exec's value needs 'run' and 'pos', got {v!r}")
    return v["run"], v.get("pos") if v.get("pos") is not None else v.get("step")


def check_steps(history: History | Iterable[Op]) -> CheckResult:
    """Check ``exec``, ``journal`` and ``apply`` operations (see the module text).

    Raises:
        ConfigError: a malformed operation.
    """
    pairs = as_pairs(history)
    out: list[Anomaly] = []

    def bad(kind: str, text: str, *ps: Pair, key: Any = None) -> None:
        out.append(Anomaly(kind, text, tuple(ref(p) for p in ps), key))

    # run -> pos -> (the read that first saw the step done, its result's digest)
    journalled: dict[Any, dict[Any, tuple[Pair, Any]]] = defaultdict(dict)
    reads = sorted((p for p in pairs if p.f == "journal" and p.type == "ok"), key=lambda p: p.stop)
    for p in reads:
        v = p.value
        if not isinstance(v, dict) or not isinstance(v.get("steps"), dict):
            raise ConfigError(f"{p.describe()}: a journal read needs 'run' and 'steps', got {v!r}")
        run, steps = v.get("run"), v["steps"]
        for pos, (first, digest) in journalled[run].items():
            now = steps.get(pos)
            if now is None or now.get("status") != "done" or now.get("digest") != digest:
                bad(
                    "journal-changed",
                    f"run {run!r} step {pos}: {first.describe()} read it done (result {digest}), "
                    f"then {p.describe()} read {now!r}",
                    first,
                    p,
                    key=run,
                )
        for pos, s in steps.items():
            if isinstance(s, dict) and s.get("status") == "done":
                journalled[run].setdefault(pos, (p, s.get("digest")))

    execs: dict[tuple[Any, Any], list[Pair]] = defaultdict(list)
    for p in pairs:
        if p.f == "exec":
            execs[_step_of(p)].append(p)
    again = 0
    for (run, pos), ps in execs.items():
        again += len(ps) - 1
        keys = {p.invoke.value.get("key") for p in ps} - {None}
        if len(keys) > 1:
            bad(
                "key-changed",
                f"run {run!r} step {pos} ran {len(ps)} times with keys "
                f"{sorted(keys, key=repr)!r}: a recipient cannot tell they are one effect",
                *ps,
                key=run,
            )
        seen = journalled.get(run, {}).get(pos)
        if seen is None:
            continue
        for p in ps:
            if p.start > seen[0].stop:
                bad(
                    "executed-after-journal",
                    f"run {run!r} step {pos} ran again ({p.describe()}) after "
                    f"{seen[0].describe()} had read its result journalled",
                    seen[0],
                    p,
                    key=run,
                )

    applied: dict[Any, list[Pair]] = defaultdict(list)
    for p in pairs:
        if p.f == "apply" and p.type == "ok":
            v = p.value
            if not isinstance(v, dict) or "key" not in v:
                raise ConfigError(f"{p.describe()}: an apply needs 'key', got {v!r}")
            if v.get("applied", True):
                applied[v["key"]].append(p)
    for key, ps in applied.items():
        if len(ps) > 1:
            bad(
                "applied-twice",
                f"the effect with key {key!r} was applied {len(ps)} times at the recipient",
                *ps,
                key=key,
            )

    stats = {
        "executions": sum(len(ps) for ps in execs.values()),
        "steps": len(execs),
        "executed_again": again,
        "journalled": sum(len(steps) for steps in journalled.values()),
        "applied": sum(len(ps) for ps in applied.values()),
    }
    return CheckResult("steps", tuple(out), stats)
