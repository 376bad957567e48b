"""What the store campaign's final state says about the operations of its history:
unknown outcomes resolved (applied once, not applied, or an anomaly) and acknowledged
writes missing (lost). Used by store_campaign.py."""

from __future__ import annotations

from collections import Counter
from typing import Any


def resolve_unknowns(history: Any, state: dict[str, Any]) -> dict[str, Any]:
    """Each operation without a definite outcome, found applied once, not applied, or
    (an anomaly) applied more than once in the final state. Reads, fetches and acks change
    no data a client relies on (an unknown ack's message is acked again when drained)."""
    written = {k: Counter(v) for k, v in state["history"].items()}
    elements = {k: Counter(v) for k, v in state["lists"].items()}
    ids = Counter(state["stream"])
    out: Counter[str] = Counter()
    twice = []
    for p in history.pairs():
        if p.type != "info":
            continue
        v = p.invoke.value
        if p.f == "write":
            n = written[v["key"]][v["value"]]
        elif p.f == "txn" and any(m[0] == "append" for m in v):
            counts = {elements[k][x] for f, k, x in v if f == "append"}
            if len(counts) != 1:  # a transaction's appends land together or not at all
                twice.append(("torn", p.invoke.index))
                continue
            (n,) = counts
        elif p.f == "append":
            n = ids[v["id"]]
        else:
            out["no-effect"] += 1
            continue
        if n == 0:
            out["not-applied"] += 1
        elif n == 1:
            out["applied-once"] += 1
        else:
            twice.append((p.f, p.invoke.index))
    return {"resolved": dict(out), "applied-twice-or-torn": twice}


def acked_lost(history: Any, state: dict[str, Any], kills: list[int]) -> dict[str, Any]:
    """Acknowledged writes missing from the final state (a register value not in its key's
    history, an appended element not in its list, a stream append not in the stream), and
    for each how long before the next server SIGKILL it was acknowledged (ms): the window
    Redis's ``appendfsync`` promises to bound."""
    written = {k: set(v) for k, v in state["history"].items()}
    elements = {k: set(v) for k, v in state["lists"].items()}
    ids = set(state["stream"])
    lost: list[tuple[str, Any]] = []
    before_kill: list[float] = []
    for p in history.pairs():
        if p.type != "ok":
            continue
        v = p.invoke.value
        if p.f == "write":
            missing = [v["value"]] if v["value"] not in written[v["key"]] else []
        elif p.f == "txn":
            missing = [x for f, k, x in v if f == "append" and x not in elements[k]]
        elif p.f == "append":
            missing = [v["id"]] if v["id"] not in ids else []
        else:
            continue
        for x in missing:
            lost.append((p.f, x))
            after = [k for k in kills if k >= p.end.time]
            before_kill.append(round((min(after) - p.end.time) / 1e6, 1) if after else -1.0)
    return {"count": len(lost), "examples": lost[:5], "ms_before_next_kill": before_kill}
